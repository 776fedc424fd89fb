// linear (y = x W^T + b) and its input and weight gradients in CUDA C, as a
// shared library whose entry point takes *device* pointers (CuPy arrays or
// torch CUDA tensors) and the stream to launch on. Row-major float32.
//
// Build:  nvcc -O2 -shared -Xcompiler -fPIC linear.cu -o liblinear_cuda.so
//
// Planted bug (-DPLANTED_BUG): the weight gradient reads x with its axes
// swapped (x[c * batch + s]), as if x were column-major; every batch of one,
// and every layer with one input feature, still passes.
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void forward(const float *x, const float *w, const float *bias, float *y,
                        int32_t batch, int32_t in, int32_t out)
{
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= (int64_t)batch * out) return;
    int32_t s = idx / out, r = idx % out;
    float acc = 0.0f;
    for (int32_t c = 0; c < in; ++c)
        acc += x[(int64_t)s * in + c] * w[(int64_t)r * in + c];
    if (bias) acc += bias[r];
    y[idx] = acc;
}

__global__ void grad_input(const float *g, const float *w, float *gi,
                           int32_t batch, int32_t in, int32_t out)
{
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= (int64_t)batch * in) return;
    int32_t s = idx / in, c = idx % in;
    float acc = 0.0f;
    for (int32_t r = 0; r < out; ++r)
        acc += g[(int64_t)s * out + r] * w[(int64_t)r * in + c];
    gi[idx] = acc;
}

__global__ void grad_weight(const float *g, const float *x, float *gw,
                            int32_t batch, int32_t in, int32_t out)
{
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= (int64_t)out * in) return;
    int32_t r = idx / in, c = idx % in;
    float acc = 0.0f;
    for (int32_t s = 0; s < batch; ++s) {
#ifdef PLANTED_BUG
        float xv = x[(int64_t)c * batch + s];
#else
        float xv = x[(int64_t)s * in + c];
#endif
        acc += g[(int64_t)s * out + r] * xv;
    }
    gw[idx] = acc;
}

static unsigned blocks(int64_t n) { return (unsigned)((n + 255) / 256); }

extern "C" int linear_f32_cuda(const float *x, const float *w, const float *bias,
                               const float *g, float *y, float *gi, float *gw,
                               int32_t batch, int32_t in, int32_t out, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    forward<<<blocks((int64_t)batch * out), 256, 0, st>>>(x, w, bias, y, batch, in, out);
    grad_input<<<blocks((int64_t)batch * in), 256, 0, st>>>(g, w, gi, batch, in, out);
    grad_weight<<<blocks((int64_t)out * in), 256, 0, st>>>(g, x, gw, batch, in, out);
    return (int)cudaGetLastError();  // a launch error, as a status
}

// The library's own runtime error state (nvcc links cudart statically):
// numoracle calls it after synchronising.
extern "C" int linear_last_error(void) { return (int)cudaGetLastError(); }
