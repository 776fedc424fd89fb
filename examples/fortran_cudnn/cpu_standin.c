/* A CPU stand-in for the parts of the CUDA runtime and cuDNN that conv2d_cudnn.F90
 * calls: same symbols, same signatures, same semantics (NCHW row-major tensors and
 * filters, cross-correlation, groups, alpha/beta scaling), "device" memory on the
 * host. It lets the Fortran program's bindings (argument orders, descriptors,
 * layouts) be tested where there is no GPU:
 *
 *   gcc -O2 -shared -fPIC cpu_standin.c -o libcudnn_cpu_standin.so
 *   NUMORACLE_CUDART=$PWD/libcudnn_cpu_standin.so NUMORACLE_CUDNN=$PWD/libcudnn_cpu_standin.so
 *
 * Only what the program uses is here; every algorithm is the direct sum in double.
 */
#include <stdlib.h>
#include <string.h>

typedef struct { int n, c, h, w; } Tensor;
typedef struct { int ph, pw, u, v, dh, dw, groups; } Conv;

int cudaMalloc(void **p, size_t n) { *p = malloc(n ? n : 1); return *p ? 0 : 2; }
int cudaFree(void *p) { free(p); return 0; }
int cudaMemcpy(void *dst, const void *src, size_t n, int kind) {
  (void)kind; memcpy(dst, src, n); return 0;
}
int cudaDeviceSynchronize(void) { return 0; }
const char *cudaGetErrorString(int code) { (void)code; return "cuda stand-in error"; }
const char *cudnnGetErrorString(int code) { (void)code; return "cudnn stand-in error"; }

int cudnnCreate(void **h) { *h = malloc(1); return 0; }
static int create(void **d, size_t n) { *d = calloc(1, n); return 0; }
int cudnnCreateTensorDescriptor(void **d) { return create(d, sizeof(Tensor)); }
int cudnnCreateFilterDescriptor(void **d) { return create(d, sizeof(Tensor)); }
int cudnnCreateConvolutionDescriptor(void **d) {
  create(d, sizeof(Conv)); ((Conv *)*d)->groups = 1; return 0;
}
int cudnnDestroyTensorDescriptor(void *d) { free(d); return 0; }
int cudnnDestroyFilterDescriptor(void *d) { free(d); return 0; }
int cudnnDestroyConvolutionDescriptor(void *d) { free(d); return 0; }

int cudnnSetTensor4dDescriptor(Tensor *d, int format, int dtype, int n, int c, int h, int w) {
  if (format != 0 || dtype != 0) return 3;  /* NCHW float only */
  d->n = n; d->c = c; d->h = h; d->w = w; return 0;
}
int cudnnSetFilter4dDescriptor(Tensor *d, int dtype, int format, int k, int c, int h, int w) {
  if (format != 0 || dtype != 0) return 3;
  d->n = k; d->c = c; d->h = h; d->w = w; return 0;
}
int cudnnSetConvolution2dDescriptor(Conv *d, int ph, int pw, int u, int v, int dh, int dw,
                                    int mode, int dtype) {
  if (mode != 1 || dtype != 0) return 3;  /* cross-correlation in float only */
  d->ph = ph; d->pw = pw; d->u = u; d->v = v; d->dh = dh; d->dw = dw; return 0;
}
int cudnnSetConvolutionGroupCount(Conv *d, int g) { d->groups = g; return 0; }
int cudnnSetConvolutionMathType(Conv *d, int m) { (void)d; return m == 3 ? 0 : 3; }

int cudnnGetConvolutionForwardWorkspaceSize(void *h, void *a, void *b, void *c, void *e, int algo,
                                            size_t *size) {
  (void)h; (void)a; (void)b; (void)c; (void)e; (void)algo; *size = 0; return 0;
}
int cudnnGetConvolutionBackwardDataWorkspaceSize(void *h, void *a, void *b, void *c, void *e,
                                                 int algo, size_t *size) {
  (void)h; (void)a; (void)b; (void)c; (void)e; (void)algo; *size = 0; return 0;
}
int cudnnGetConvolutionBackwardFilterWorkspaceSize(void *h, void *a, void *b, void *c, void *e,
                                                   int algo, size_t *size) {
  (void)h; (void)a; (void)b; (void)c; (void)e; (void)algo; *size = 0; return 0;
}

#define AT(t, d, i0, i1, i2, i3) (t)[(((size_t)(i0) * (d)->c + (i1)) * (d)->h + (i2)) * (d)->w + (i3)]

/* which: 0 forward (y), 1 backward data (x), 2 backward filter (w) */
static void conv(const Tensor *xd, float *x, const Tensor *wd, float *w, const Tensor *yd,
                 float *y, const Conv *cd, float alpha, float beta, int which) {
  int cg = xd->c / cd->groups, og = wd->n / cd->groups;
  size_t nout = which == 0 ? (size_t)yd->n * yd->c * yd->h * yd->w
              : which == 1 ? (size_t)xd->n * xd->c * xd->h * xd->w
                           : (size_t)wd->n * wd->c * wd->h * wd->w;
  double *acc = calloc(nout, sizeof(double));
  for (int s = 0; s < xd->n; s++)
    for (int o = 0; o < wd->n; o++)
      for (int i = 0; i < cg; i++)
        for (int ky = 0; ky < wd->h; ky++)
          for (int kx = 0; kx < wd->w; kx++)
            for (int oy = 0; oy < yd->h; oy++)
              for (int ox = 0; ox < yd->w; ox++) {
                int iy = oy * cd->u - cd->ph + ky * cd->dh, ix = ox * cd->v - cd->pw + kx * cd->dw;
                if (iy < 0 || iy >= xd->h || ix < 0 || ix >= xd->w) continue;
                int ic = (o / og) * cg + i;
                size_t xi = (((size_t)s * xd->c + ic) * xd->h + iy) * xd->w + ix;
                size_t wi = (((size_t)o * wd->c + i) * wd->h + ky) * wd->w + kx;
                size_t yi = (((size_t)s * yd->c + o) * yd->h + oy) * yd->w + ox;
                if (which == 0) acc[yi] += (double)x[xi] * w[wi];
                else if (which == 1) acc[xi] += (double)y[yi] * w[wi];
                else acc[wi] += (double)x[xi] * y[yi];
              }
  float *out = which == 0 ? y : which == 1 ? x : w;
  for (size_t k = 0; k < nout; k++)
    out[k] = (float)(alpha * acc[k] + (beta != 0.0f ? beta * out[k] : 0.0));
  free(acc);
}

int cudnnConvolutionForward(void *h, const float *alpha, Tensor *xd, float *x, Tensor *wd,
                            float *w, Conv *cd, int algo, void *ws, size_t wss,
                            const float *beta, Tensor *yd, float *y) {
  (void)h; (void)algo; (void)ws; (void)wss;
  conv(xd, x, wd, w, yd, y, cd, *alpha, *beta, 0); return 0;
}
int cudnnConvolutionBackwardData(void *h, const float *alpha, Tensor *wd, float *w, Tensor *dyd,
                                 float *dy, Conv *cd, int algo, void *ws, size_t wss,
                                 const float *beta, Tensor *dxd, float *dx) {
  (void)h; (void)algo; (void)ws; (void)wss;
  conv(dxd, dx, wd, w, dyd, dy, cd, *alpha, *beta, 1); return 0;
}
int cudnnConvolutionBackwardFilter(void *h, const float *alpha, Tensor *xd, float *x,
                                   Tensor *dyd, float *dy, Conv *cd, int algo, void *ws,
                                   size_t wss, const float *beta, Tensor *dwd, float *dw) {
  (void)h; (void)algo; (void)ws; (void)wss;
  conv(xd, x, dwd, dw, dyd, dy, cd, *alpha, *beta, 2); return 0;
}
int cudnnConvolutionBackwardBias(void *h, const float *alpha, Tensor *dyd, float *dy,
                                 const float *beta, Tensor *dbd, float *db) {
  (void)h;
  for (int o = 0; o < dbd->c; o++) {
    double acc = 0.0;
    for (int s = 0; s < dyd->n; s++)
      for (int i = 0; i < dyd->h * dyd->w; i++) acc += AT(dy, dyd, s, o, 0, i);
    db[o] = (float)(*alpha * acc + (*beta != 0.0f ? *beta * db[o] : 0.0));
  }
  return 0;
}
int cudnnAddTensor(void *h, const float *alpha, Tensor *ad, float *a, const float *beta,
                   Tensor *cd, float *c) {
  (void)h; (void)ad;
  for (int s = 0; s < cd->n; s++)
    for (int o = 0; o < cd->c; o++)
      for (int i = 0; i < cd->h * cd->w; i++)
        AT(c, cd, s, o, 0, i) = *alpha * a[o] + *beta * AT(c, cd, s, o, 0, i);
  return 0;
}
