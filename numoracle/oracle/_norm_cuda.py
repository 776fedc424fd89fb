"""The whole-rule kernels of layer norm as CUDA C sources (compiled by CuPy, through
:mod:`~numoracle.oracle.fused_norm_cuda`).

The kernels are the loops of :mod:`~numoracle.oracle._numba_norm`, written once more
in C on the per-element functions of the softmax family's kernels
(:data:`~numoracle.oracle._rows_cuda.PREAMBLE`: ``nr_shifted`` is tracked ``sub``,
``nr_mul`` is ``elementwise.mul``'s radii) and, here, ``elementwise.mul``'s exact
test (:func:`nl_times`, Dekker's product error as ``_numba_loops``'s). Each performs
the loop's float64 operations in their order, compiled without contraction
(``--fmad=false``); no function beyond IEEE's ``+``, ``-``, ``*``, ``/``, comparisons
and selections is evaluated, so a kernel gives the loop's bits, hence the primitives'.

Four kernels are elementwise (:class:`~numoracle.oracle._rows_cuda.Elementwise`: the
per-row statistics read from ``raw`` arrays of four numbers a row, value, det, prob,
ref_err, at ``i / cols``; the weight and bias from ``raw`` arrays of four rows of
``cols``), and each row's largest ``|x| + det + ref_err`` is a block per row
(:class:`~numoracle.oracle._rows_cuda.PerRow`, a maximum and an or of the NaN seen,
so the order of the threads does not change it). The backward's first kernel comes
in variants by what it writes (:func:`backward_products`). The sources name no CuPy
object: the tests compile the same text on the host.
"""

from __future__ import annotations

from functools import cache

from ._rows_cuda import BLOCK
from ._rows_cuda import PREAMBLE as ROWS_PREAMBLE
from ._rows_cuda import Elementwise, PerRow
from .fused import _INF

__all__ = ["PREAMBLE", "ROW_TOP", "DEVIATION_SQUARES", "NORMALIZED", "INPUT_GRAD",
           "backward_products", "specs"]

_NAN = "__longlong_as_double(0x7ff8000000000000LL)"

#: the softmax family's per-element functions, and elementwise.mul with its exact test
PREAMBLE = ROWS_PREAMBLE + """
/* the rounding error of the float64 product p = x y (Dekker's TwoProduct, Veltkamp's
   splitting), as _numba_loops._two_product_error */
__device__ double nl_two_product_error(double x, double y, double p) {
  double cx = 134217729.0 * x;
  double x_hi = cx - (cx - x);
  double x_lo = x - x_hi;
  double cy = 134217729.0 * y;
  double y_hi = cy - (cy - y);
  double y_lo = y - y_hi;
  return (((x_hi * y_hi - p) + x_hi * y_lo) + x_lo * y_hi) + x_lo * y_lo;
}

/* x y as elementwise.mul computes it, with test its exact test (_numba_norm._times) */
__device__ nr4 nl_times(double x, double xd, double xp, double xr, double y, double yd,
                        double yp, double yr, double u, double tiny, double u64, int t,
                        int emin, double fmax, bool test) {
  nr4 o = nr_mul(x, xd, xp, xr, y, yd, yp, yr, u, tiny, u64, fmax);
  if (test && xd == 0.0 && yd == 0.0 && xr == 0.0 && yr == 0.0 && fabs(o.v) < INF
      && (o.v != 0.0 || x == 0.0 || y == 0.0) && o.d != INF
      && nl_two_product_error(x, y, o.v) == 0.0
      && numoracle_representable(o.v, t, emin, fmax)) {
    o.d = 0.0; o.p = 0.0; o.r = 0.0;
  }
  return o;
}
""".replace("INF", _INF)

#: per row of ``x`` (its radii each a pointer and element strides, broadcast or not):
#: the largest ``|x| + det + ref_err``, NaN where one is NaN (``_numba_norm.row_top``)
ROW_TOP = PerRow("numoracle_norm_row_top", (
    "const double* x, const double* xd, long long d0, long long d1, const double* xr, "
    "long long r0, long long r1, long long cols, double* out"), """
  __shared__ double red[BLOCK];
  __shared__ int odd[BLOCK];
  long long i = blockIdx.x;
  unsigned t = threadIdx.x;
  double top = -INF;
  int seen = 0;
  for (long long j = t; j < cols; j += blockDim.x) {
    double a = (fabs(x[i * cols + j]) + xd[i * d0 + j * d1]) + xr[i * r0 + j * r1];
    seen |= a != a;
    top = a > top ? a : top;
  }
  red[t] = top; odd[t] = seen;
  __syncthreads();
  for (unsigned s = blockDim.x >> 1; s > 0; s >>= 1) {
    if (t < s) {
      double o = red[t + s];
      red[t] = o > red[t] ? o : red[t];
      odd[t] |= odd[t + s];
    }
    __syncthreads();
  }
  if (t == 0) out[i] = odd[0] ? NAN_ : red[0];
""".replace("BLOCK", str(BLOCK)).replace("NAN_", _NAN).replace("INF", _INF))

_X4 = "float64 xv, float64 xd, float64 xq, float64 xr"
_G4 = "float64 gv, float64 gd, float64 gq, float64 gr"
_SCALARS = "float64 u, float64 tiny, float64 u64, float64 fmax, int32 t, int32 emin"
_OUT4 = "float64 value, float64 det, float64 prob, float64 ref"
#: a row's statistic ``name`` (value, det, prob, ref_err) as ``name[0..3]``
_ROW = "const double* {0} = &{0}_rows[row * 4];"
_ARGS = "u, tiny, u64, t, emin, fmax"

#: ``d d`` with ``d = x - mean`` (``_numba_norm.deviation_squares``)
DEVIATION_SQUARES = Elementwise(
    "numoracle_norm_deviation_squares", _X4, "raw float64 mean_rows",
    _SCALARS + ", bool test, int64 cols", _OUT4, "", ("""
long long row = i / cols;
""" + _ROW.format("mean") + """
nr4 d = nr_shifted(xv, xd, xq, xr, mean[0], mean[1], mean[2], mean[3], u, tiny, u64, test, t,
                   emin, fmax);
nr4 s = nl_times(d.v, d.d, d.p, d.r, d.v, d.d, d.p, d.r, ARGS, test);
value = s.v; det = s.d; prob = s.p; ref = s.r;
""").replace("ARGS", _ARGS))

#: ``(x - mean) rstd`` widened for a kernel that folds the statistics, with ``has_w``
#: times the weight (unbounded where the folded products may overflow), with ``has_b``
#: plus the bias widened by ``u |b|`` (``_numba_norm.normalized_rows``)
NORMALIZED = Elementwise(
    "numoracle_norm_normalized", _X4,
    "raw float64 mean_rows, raw float64 rstd_rows, raw float64 w, raw float64 b",
    _SCALARS + ", bool has_w, bool has_b, bool test, int64 cols", _OUT4 + ", float64 mag", "",
    ("""
long long row = i / cols, j = i - row * cols;
""" + _ROW.format("mean") + _ROW.format("rstd") + """
double two_u = 2.0 * u, half_max = fmax / 2.0;
double scale = (fabs(rstd[0]) + rstd[1]) + rstd[3];
double top_m = (fabs(mean[0]) + mean[1]) + mean[3];
nr4 o = nr_shifted(xv, xd, xq, xr, mean[0], mean[1], mean[2], mean[3], u, tiny, u64, test, t,
                   emin, fmax);
o = nl_times(o.v, o.d, o.p, o.r, rstd[0], rstd[1], rstd[2], rstd[3], ARGS, test);
double extra = (two_u * (fabs(xv) + fabs(mean[0]))) * scale;
o.d = o.d + extra;
o.p = o.p + extra;
double mg = fabs(o.v);
if (has_w) {
  double fold = ((((fabs(xv) + xd) + xr) + top_m) + 1.0) * scale;
  double wv = w[j], wd = w[cols + j];
  o = nl_times(o.v, o.d, o.p, o.r, wv, wd, w[2 * cols + j], w[3 * cols + j], ARGS, test);
  mg = fabs(o.v);
  if (fold * (fabs(wv) + wd) >= half_max) { o.d = INF; o.p = INF; }
}
if (has_b) {
  double bv = b[j];
  /* add(out, b) is sub(out, -b): negation is exact, -(-b) is b's bits */
  mg = fabs(o.v) + fabs(bv);
  o = nr_shifted(o.v, o.d, o.p, o.r, -bv, b[cols + j], b[2 * cols + j], b[3 * cols + j], u,
                 tiny, u64, test, t, emin, fmax);
  double wide = u * fabs(bv);
  o.d = o.d + wide;
  o.p = o.p + wide;
}
value = o.v; det = o.d; prob = o.p; ref = o.r; mag = mg;
""").replace("ARGS", _ARGS).replace("INF", _INF))


@cache
def backward_products(has_w: bool, want_gxh: bool, want_gh: bool) -> Elementwise:
    """Layer norm backward's kernel before its sums (``_numba_norm.backward_products``),
    writing ``g w`` (``gx*``) with ``has_w``, ``gx xhat`` (``h*``) with ``want_gxh`` and
    ``g xhat`` (``k*``) with ``want_gh``, ``xhat = (x - mean) rstd`` and ``gx`` the
    weighted gradient (``g`` itself without a weight); ``test_gx``: ``g w``'s exact
    test, ``test``: the others'."""
    outs, body = [], ["long long row = i / cols, j = i - row * cols;", _ROW.format("mean"),
                      _ROW.format("rstd"), "double sv = gv, sd = gd, sp = gq, sr = gr;"]
    if has_w:
        outs.append("float64 gxv, float64 gxd, float64 gxp, float64 gxr")
        body.append("nr4 a = nl_times(gv, gd, gq, gr, w[j], w[cols + j], w[2 * cols + j], "
                    "w[3 * cols + j], ARGS, test_gx);\n"
                    "gxv = a.v; gxd = a.d; gxp = a.p; gxr = a.r;\n"
                    "sv = a.v; sd = a.d; sp = a.p; sr = a.r;")
    body.append("nr4 h = nr_shifted(xv, xd, xq, xr, mean[0], mean[1], mean[2], mean[3], u, "
                "tiny, u64, test, t, emin, fmax);\n"
                "h = nl_times(h.v, h.d, h.p, h.r, rstd[0], rstd[1], rstd[2], rstd[3], ARGS, "
                "test);")
    if want_gh:
        outs.append("float64 kv, float64 kd, float64 kp, float64 kr")
        body.append("nr4 k = nl_times(gv, gd, gq, gr, h.v, h.d, h.p, h.r, ARGS, test);\n"
                    "kv = k.v; kd = k.d; kp = k.p; kr = k.r;")
    if want_gxh:
        outs.append("float64 hv, float64 hd, float64 hp, float64 hr")
        body.append("nr4 q = nl_times(sv, sd, sp, sr, h.v, h.d, h.p, h.r, ARGS, test);\n"
                    "hv = q.v; hd = q.d; hp = q.p; hr = q.r;")
    name = f"numoracle_norm_backward_products_{int(has_w)}{int(want_gxh)}{int(want_gh)}"
    return Elementwise(name, _X4 + ", " + _G4,
                       "raw float64 mean_rows, raw float64 rstd_rows, raw float64 w",
                       _SCALARS + ", bool test_gx, bool test, int64 cols", ", ".join(outs), "",
                       "\n".join(body).replace("ARGS", _ARGS))


#: ``rstd ((g - a) - xhat b)`` with ``xhat = (x - mean) rstd``, ``a`` and ``b`` per row
#: (``_numba_norm.input_grad_rows``)
INPUT_GRAD = Elementwise(
    "numoracle_norm_input_grad", _X4 + ", " + _G4,
    "raw float64 mean_rows, raw float64 rstd_rows, raw float64 a_rows, raw float64 b_rows",
    _SCALARS + ", bool test, int64 cols", _OUT4 + ", float64 mag", "", ("""
long long row = i / cols;
""" + "".join(_ROW.format(k) for k in ("mean", "rstd", "a", "b")) + """
nr4 v = nr_shifted(xv, xd, xq, xr, mean[0], mean[1], mean[2], mean[3], u, tiny, u64, test, t,
                   emin, fmax);
v = nl_times(v.v, v.d, v.p, v.r, rstd[0], rstd[1], rstd[2], rstd[3], ARGS, test);
v = nl_times(v.v, v.d, v.p, v.r, b[0], b[1], b[2], b[3], ARGS, test);
nr4 c = nr_shifted(gv, gd, gq, gr, a[0], a[1], a[2], a[3], u, tiny, u64, test, t, emin, fmax);
c = nr_shifted(c.v, c.d, c.p, c.r, v.v, v.d, v.p, v.r, u, tiny, u64, test, t, emin, fmax);
c = nl_times(c.v, c.d, c.p, c.r, rstd[0], rstd[1], rstd[2], rstd[3], ARGS, test);
value = c.v; det = c.d; prob = c.p; ref = c.r; mag = fabs(c.v);
""").replace("ARGS", _ARGS))


def specs() -> tuple[Elementwise | PerRow, ...]:
    """Every kernel of this module (each variant of :func:`backward_products`)."""
    variants = tuple(backward_products(w, h, k) for w in (False, True) for h in (False, True)
                     for k in (False, True) if w or h or k)
    return (ROW_TOP, DEVIATION_SQUARES, NORMALIZED, INPUT_GRAD, *variants)
