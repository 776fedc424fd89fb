"""The whole-rule kernels of the softmax family and the tracked row sum as CUDA C
sources (compiled by CuPy, through :mod:`~numoracle.oracle.fused_cuda`).

The kernels are those of :mod:`~numoracle.oracle._numba_rows`, written once more in
C: each per-element function there has a ``__device__`` function here performing
the same float64 operations in the same order (compiled with ``--fmad=false``: no
``a*b+c`` contracted into one fma), so the two give the same bits wherever the
operations are IEEE's (``+``, ``-``, ``*``, ``/``, comparisons, selections); the
exponentials are the device's ``exp`` and ``expm1``, within the reference's own
error of the host's (its ``ref_err``: the elementwise rules' ``4`` float64 ulps).

A kernel is either elementwise (:class:`Elementwise`, one CuPy ``ElementwiseKernel``:
per-row quantities read from ``raw`` arrays at row ``i / cols``) or one block per
row (:class:`PerRow`, a ``RawKernel``: the rows' maxima and counts, reduced over the
block's threads in shared memory, each step a maximum, a sum of counts or a least
index, so the order of the threads does not change the result). The sources name
no CuPy object: the tests compile the same text on the host, each thread index a
loop (``tests/oracle/rows_harness.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .fused import _INF, _LSB, _REPRESENTABLE

__all__ = ["Elementwise", "PerRow", "PREAMBLE", "ROW_MAX", "HOT_ROWS", "SHIFTED_EXP",
           "SHIFTED_EXP_BOTH", "ROW_HI", "SOFTMAX", "LOG_SOFTMAX", "LOG_SOFTMAX_BACKWARD", "BLOCK",
           "FLAG_BITS", "ROW_MAX_COLUMNS", "ROW_SUM", "ROW_SUM_RADII", "SUM_COLUMNS"]

#: threads per block of a per-row kernel (a power of 2)
BLOCK = 256
#: columns of :data:`ROW_MAX`'s output: the largest value, det, prob, ref_err,
#: ``x + det + ref_err``, the masked entries, the entries not finite
ROW_MAX_COLUMNS = 7
#: the bits of :data:`SHIFTED_EXP`'s flags (``_numba_rows.shifted_exp_rows``'s columns)
FLAG_BITS = 7


@dataclass(frozen=True)
class Elementwise:
    """An elementwise kernel: per-element inputs ``arrays``, ``raws`` (arrays read
    or written at computed indices), ``scalars``, per-element outputs ``outs`` and
    raw outputs ``raw_outs`` (CuPy's parameter lists, ``type name`` separated by
    commas), and its ``body`` (``i`` the element's index). Called with the
    arguments in that order."""

    name: str
    arrays: str
    raws: str
    scalars: str
    outs: str
    raw_outs: str
    body: str

    def in_params(self) -> str:
        return ", ".join(p for p in (self.arrays, self.raws, self.scalars) if p)

    def out_params(self) -> str:
        return ", ".join(p for p in (self.outs, self.raw_outs) if p)


@dataclass(frozen=True)
class PerRow:
    """A kernel of one block (``BLOCK`` threads) per row: its C parameters and body."""

    name: str
    params: str
    body: str

    def source(self) -> str:
        return f'extern "C" __global__ void {self.name}({self.params}) {{\n{self.body}\n}}\n'


_NAN = "__longlong_as_double(0x7ff8000000000000LL)"

#: the per-element functions (``_numba_rows``'s and ``_numba_loops``'s of the same name)
PREAMBLE = _REPRESENTABLE + """
struct nr4 { double v, d, p, r; };
struct nr5 { double v, d, p, r, m; };
struct nr3 { double d, p, m; };

__device__ __forceinline__ double nr_rmul(double x, double y) {
  return (x == 0.0 || y == 0.0) ? 0.0 : x * y;
}

__device__ __forceinline__ double nr_maximum(double a, double b) {
  if (a != a || b != b) return a + b;
  return b > a ? b : a;
}

/* x - m as tracked sub: value, det, prob, ref_err */
__device__ nr4 nr_shifted(double xv, double ad, double ap, double ar, double m, double md,
                          double mp, double mr, double u, double tiny, double u64,
                          bool test_exact, int t, int emin, double fmax) {
  double y = -1.0 * m;
  double v = xv + y;
  double mm = fabs(v);
  double r = (ar + mr) + u64 * mm;
  double s = mm + r;
  s = s * u;
  s = s + tiny;
  double grow = 1.0 + u;
  double d = (ad + md) * grow + s;
  double p = (ap + mp) * grow + s;
  if (test_exact && ad == 0.0 && md == 0.0 && ar == 0.0 && mr == 0.0) {
    double bb = v - xv;
    if ((xv - (v - bb)) + (y - bb) == 0.0 && numoracle_representable(v, t, emin, fmax)) {
      r = 0.0; d = 0.0; p = 0.0;
    }
  }
  nr4 o = {v, d, p, r};
  return o;
}

/* exp of a tracked element as elementary computes it */
__device__ nr4 nr_exp(double v, double td, double tp, double tr, double ulps, double per_x,
                      double of_one, double u, double tiny, double ref_unit, double acc_max) {
  double reach = td + tr;
  double lip = exp(v + reach);
  double value = exp(v);
  double va = fabs(value);
  double d = nr_rmul(lip, td);
  double p = nr_rmul(lip, tp);
  double r = ref_unit * va;
  r = nr_rmul(lip, tr) + r;
  double k = per_x != 0.0 ? ulps + per_x * (fabs(v) + reach) : ulps;
  double e = ((2.0 * k) * u) * ((va + d) + r) + k * tiny;
  if (of_one != 0.0) e = e + (2.0 * u) * of_one;
  d = d + e;
  p = p + e;
  if ((va + d) >= acc_max) { d = INF; p = INF; }
  nr4 o = {value, d, p, r};
  return o;
}

/* ieee's special point: an exact 0 or infinity, or NaN with a finite reach */
__device__ __forceinline__ bool nr_special(double v, double r) {
  return (r == 0.0 && (v == 0.0 || fabs(v) == INF)) || (v != v && fabs(r) < INF);
}

__device__ __forceinline__ double nr_binary(int op, double x, double y) {
  if (op == 0) return x + y;
  if (op == 1) return x - y;
  if (op == 2) return x * y;
  return x / y;
}

/* whether the operands decide the element exactly, and that value */
__device__ bool nr_decided(int op, double x, double rx, double y, double ry, bool b_no_pole,
                           double* w) {
  *w = 0.0;
  if (!(nr_special(x, rx) || nr_special(y, ry))) return false;
  bool ok = fabs(rx) < INF && fabs(ry) < INF;
  if (!(fabs(rx) < INF) || x != x) rx = 0.0;
  if (!(fabs(ry) < INF) || y != y) ry = 0.0;
  double xl = rx == 0.0 ? x : x - rx, xh = rx == 0.0 ? x : x + rx;
  double yl = ry == 0.0 ? y : y - ry, yh = ry == 0.0 ? y : y + ry;
  xl = xl == 0.0 ? -0.0 : xl; xh = xh == 0.0 ? 0.0 : xh;
  yl = yl == 0.0 ? -0.0 : yl; yh = yh == 0.0 ? 0.0 : yh;
  if (b_no_pole && yl < 0.0 && yh > 0.0) ok = false;
  double first = nr_binary(op, xl, yl);
  for (int k = 0; k < 3; ++k) {
    double other = nr_binary(op, k == 0 ? xl : xh, k == 1 ? yl : yh);
    ok = ok && (first == other || (first != first && other != other));
  }
  ok = ok && (first == 0.0 || !(fabs(first) < INF));
  *w = first == 0.0 ? 0.0 : first;
  return ok;
}

/* a / b as elementwise.div */
__device__ nr4 nr_div(double a, double ad, double ap, double ar, double b, double bd,
                      double bp, double br, double rel_u, double rel_tiny, double grow,
                      double u64, double acc_max) {
  double value = a / b;
  double q = fabs(value);
  double ab = fabs(b);
  double room = ab - bd;
  double d = room > 0.0 ? (ad + nr_rmul(q, bd)) / room : INF;
  room = ab - bp;
  double p = room > 0.0 ? (ap + nr_rmul(q, bp)) / room : INF;
  room = ab - br;
  double r = room > 0.0 ? (ar + nr_rmul(q, br)) / room : INF;
  r = r + u64 * q;
  double s = ((q + d) + r) * rel_u + rel_tiny;
  d = d * grow + s;
  p = p * grow + s;
  if ((q + d) >= acc_max) { d = INF; p = INF; }
  nr4 o = {value, d, p, r};
  return o;
}

/* x y as the loop mul_radii */
__device__ nr4 nr_mul(double x, double xd, double xp, double xr, double y, double yd,
                      double yp, double yr, double u, double tiny, double u64, double fmax) {
  double v = x * y;
  double m = fabs(v);
  double ax = fabs(x), ay = fabs(y);
  double d = (nr_rmul(ax, yd) + nr_rmul(xd, ay)) + nr_rmul(xd, yd);
  double p = (nr_rmul(ax, yp) + nr_rmul(xp, ay)) + nr_rmul(xp, yp);
  double r = ((nr_rmul(ax, yr) + nr_rmul(xr, ay)) + nr_rmul(xr, yr)) + u64 * m;
  double s = ((m + d) + r) * u + tiny;
  double grow = 1.0 + u;
  d = d * grow + s;
  p = p * grow + s;
  bool over = (m + d) >= fmax;
  bool wild = (!(fabs(xd) < INF) && y == 0.0 && yd == 0.0)
              || (!(fabs(yd) < INF) && x == 0.0 && xd == 0.0);
  if (wild) { d = NAN_; p = NAN_; }
  if (over) { d = INF; p = INF; }
  nr4 o = {v, d, p, r};
  return o;
}

/* tracked either of two elements: det, prob, mag */
__device__ nr3 nr_either(double a, double d1, double p1, double m1, double b, double d2,
                         double p2, double r2, double m2, double grow) {
  double gap = a == b ? 0.0 : fabs(b - a);
  gap = gap * grow;
  gap = gap + r2;
  double d = nr_maximum(d1, gap + d2);
  double p = nr_maximum(p1, gap + p2);
  bool split = ((a != a) != (b != b)) || ((fabs(a) == INF || fabs(b) == INF) && a != b);
  if (split) { d = NAN_; p = NAN_; }
  nr3 o = {d, p, nr_maximum(m1, m2)};
  return o;
}

/* softmax's either: where both are NaN the larger radii */
__device__ nr3 nr_either_nan(double a, double d1, double p1, double m1, double b, double d2,
                             double p2, double r2, double m2, double grow) {
  nr3 o = nr_either(a, d1, p1, m1, b, d2, p2, r2, m2, grow);
  if (a != a && b != b) { o.d = nr_maximum(d1, d2); o.p = nr_maximum(p1, p2); }
  return o;
}

/* the order-preserving key of a float64 that is not NaN (its bits, the sign bit flipped
   for a positive one, every bit for a negative one; -0 made +0 first, the two being
   equal): the keys compare as the values do, and sort by radix */
__device__ __forceinline__ unsigned long long nr_key(double v) {
  v = v + 0.0;
  unsigned long long b = (unsigned long long)__double_as_longlong(v);
  return (b >> 63) ? ~b : (b | 0x8000000000000000ULL);
}

/* 2^e as a double (tracked._pow2): infinite above the range, 0 far below it */
__device__ __forceinline__ double nr_pow2(int e) {
  return e > 1023 ? INF : ldexp(1.0, e < -1100 ? -1100 : e);
}

/* x - y as tracked sub: value, det, prob, ref_err, mag */
__device__ nr5 nr_sub(double x, double xd, double xp, double xr, double y, double yd,
                      double yp, double yr, double u, double tiny, double u64,
                      bool test_exact, int t, int emin, double fmax) {
  nr4 s = nr_shifted(x, xd, xp, xr, y, yd, yp, yr, u, tiny, u64, test_exact, t, emin, fmax);
  nr5 o = {s.v, s.d, s.p, s.r, fabs(x) + fabs(-1.0 * y)};
  return o;
}
""".replace("NAN_", _NAN).replace("INF", _INF)

#: per row of ``x`` (its radii each a pointer and element strides, broadcast or not):
#: ``_numba_rows.row_max``'s columns, and how many values or radii are not finite
#: (column 6)
ROW_MAX = PerRow("numoracle_row_max", (
    "const double* x, const double* xd, long long d0, long long d1, const double* xq, "
    "long long q0, long long q1, const double* xr, long long r0, long long r1, "
    "long long cols, double* out"), """
  __shared__ double red[5][BLOCK];
  __shared__ long long cnt[2][BLOCK];
  long long i = blockIdx.x;
  unsigned t = threadIdx.x;
  double mv = -INF, md = -INF, mp = -INF, mr = -INF, mh = -INF;
  long long masked = 0, bad = 0;
  for (long long j = t; j < cols; j += blockDim.x) {
    double v = x[i * cols + j], d = xd[i * d0 + j * d1], p = xq[i * q0 + j * q1],
           r = xr[i * r0 + j * r1];
    bool hole = v == -INF && d == 0.0 && r == 0.0;
    masked += hole;
    bad += !((fabs(v) < INF || hole) && fabs(d) < INF && fabs(p) < INF && fabs(r) < INF);
    double h = v + (d + r);
    mv = v > mv ? v : mv;
    md = d > md ? d : md;
    mp = p > mp ? p : mp;
    mr = r > mr ? r : mr;
    mh = h > mh ? h : mh;
  }
  red[0][t] = mv; red[1][t] = md; red[2][t] = mp; red[3][t] = mr; red[4][t] = mh;
  cnt[0][t] = masked; cnt[1][t] = bad;
  __syncthreads();
  for (unsigned s = blockDim.x >> 1; s > 0; s >>= 1) {
    if (t < s) {
      for (int k = 0; k < 5; ++k) {
        double o = red[k][t + s];
        red[k][t] = o > red[k][t] ? o : red[k][t];
      }
      cnt[0][t] += cnt[0][t + s];
      cnt[1][t] += cnt[1][t + s];
    }
    __syncthreads();
  }
  if (t == 0) {
    for (int k = 0; k < 5; ++k) out[i * 7 + k] = red[k][0];
    out[i * 7 + 5] = (double)cnt[0][0];
    out[i * 7 + 6] = (double)cnt[1][0];
  }
""".replace("BLOCK", str(BLOCK)).replace("INF", _INF))

#: per row of a gradient: how many entries may be nonzero (value or det not 0) and the
#: first of them (0 where none)
HOT_ROWS = PerRow("numoracle_hot_rows", (
    "const double* g, const double* gd, long long d0, long long d1, long long cols, "
    "long long* count, long long* first"), """
  __shared__ long long cnt[BLOCK], low[BLOCK];
  long long i = blockIdx.x;
  unsigned t = threadIdx.x;
  long long c = 0, f = cols;
  for (long long j = t; j < cols; j += blockDim.x) {
    if (g[i * cols + j] != 0.0 || gd[i * d0 + j * d1] != 0.0) {
      c += 1;
      if (j < f) f = j;
    }
  }
  cnt[t] = c; low[t] = f;
  __syncthreads();
  for (unsigned s = blockDim.x >> 1; s > 0; s >>= 1) {
    if (t < s) {
      cnt[t] += cnt[t + s];
      if (low[t + s] < low[t]) low[t] = low[t + s];
    }
    __syncthreads();
  }
  if (t == 0) { count[i] = cnt[0]; first[i] = low[0] == cols ? 0 : low[0]; }
""".replace("BLOCK", str(BLOCK)))

#: each entry's upper end ``x + (det + ref_err)`` as its key (``nr_key``), sorted per
#: row for the online bound's counts
ROW_HI = Elementwise("numoracle_row_hi", "float64 x, float64 d, float64 r", "", "",
                     "uint64 h", "", "h = nr_key(x + (d + r));")

_EXP_SCALARS = ("float64 u, float64 tiny, float64 u64, float64 fmax, float64 ulps, "
                "float64 per_x, float64 of_one, float64 ref_unit, float64 acc_max, "
                "float64 uo, int32 t, int32 emin, bool test_exact, int64 cols")
_FOUR = "float64 ev, float64 ed, float64 ep, float64 er"

#: e = exp(x - max x), the online bound's terms (and exp(x)), the flags or'ed into
#: the first entry of ``flags`` (bit k: ``shifted_exp_rows``'s column k)
_SHIFTED_BODY = """
long long row = i / cols;
const double* mrow = &mx[row * 7];
double m = mrow[0], md = mrow[1], mp = mrow[2], mr = mrow[3], top = mrow[4];
int bits = 0;
if (xv == -INF) {
  bits |= 2 | 4 | 8 | 16;
  ev = 0.0; ed = 0.0; ep = 0.0; er = 0.0; terms = 0.0;
  UNSHIFTED_MASKED
} else {
  nr4 s = nr_shifted(xv, ad, ap, ar, m, md, mp, mr, u, tiny, u64, test_exact, t, emin, fmax);
  if (s.d == 0.0) bits |= 2;
  if (s.r == 0.0) bits |= 4;
  nr4 e = nr_exp(s.v, s.d, s.p, s.r, ulps, per_x, of_one, u, tiny, ref_unit, acc_max);
  if (nr_special(e.v, e.d + e.r)) bits |= 1;
  if (e.d == 0.0) bits |= 8;
  if (e.r == 0.0) bits |= 16;
  ev = e.v; ed = e.d; ep = e.p; er = e.r;
  if (e.v == 0.0) {
    terms = 0.0;
  } else {
    double lo = xv - (ad + ar);
    /* the entries of the row's sorted keys of x + det + ref_err above lo's */
    unsigned long long key = nr_key(lo);
    long long a = row * cols, b = a + cols;
    while (a < b) {
      long long mid = a + ((b - a) >> 1);
      if (hs[mid] <= key) a = mid + 1; else b = mid;
    }
    double gap = top - lo;
    double k = (double)(row * cols + cols - a);
    double c = 2.0 * (per_x != 0.0 ? ulps + per_x * gap : ulps) + 1.0;
    double rel = expm1(uo * gap * (1.0 + 9.5367431640625e-07) + k * c * uo);
    terms = (fabs(e.v) + e.d) * rel;
  }
  UNSHIFTED
}
int* flag = &flags[row - row];  /* (the first: no literal 0 index, which CArray may
                                   read as a null pointer) */
if ((bits & ~*flag) != 0) atomicOr(flag, bits);
""".replace("INF", _INF)
_UNSHIFTED = """
  nr4 w = nr_exp(xv, ad, ap, ar, ulps, per_x, of_one, u, tiny, ref_unit, acc_max);
  if (nr_special(w.v, w.d + w.r)) bits |= 1;
  if (w.d == 0.0) bits |= 32;
  if (w.r == 0.0) bits |= 64;
  xe = w.v; xed = w.d; xep = w.p; xer = w.r;"""
_UNSHIFTED_MASKED = "bits |= 32 | 64; xe = 0.0; xed = 0.0; xep = 0.0; xer = 0.0;"


def _shifted_exp(name: str, unshifted: bool) -> Elementwise:
    return Elementwise(
        name, "float64 xv, float64 ad, float64 ap, float64 ar", "raw float64 mx, raw uint64 hs",
        _EXP_SCALARS,
        _FOUR + ", float64 terms" + (", float64 xe, float64 xed, float64 xep, float64 xer"
                                      if unshifted else ""),
        "raw int32 flags",
        _SHIFTED_BODY.replace("UNSHIFTED_MASKED", _UNSHIFTED_MASKED if unshifted else "")
        .replace("UNSHIFTED", _UNSHIFTED if unshifted else ""))


SHIFTED_EXP = _shifted_exp("numoracle_shifted_exp", False)
SHIFTED_EXP_BOTH = _shifted_exp("numoracle_shifted_exp_both", True)

_OUT5 = "float64 value, float64 det, float64 prob, float64 ref, float64 mag"

#: e / s or e (1 / s), covered by either (``tot``, ``rec``: per row value, det, prob, ref_err)
SOFTMAX = Elementwise(
    "numoracle_softmax_rows", "float64 a, float64 ad, float64 ap, float64 ar",
    "raw float64 tot, raw float64 rec",
    "float64 u, float64 tiny, float64 u64, float64 acc_max, float64 rel_u, float64 rel_tiny, "
    "float64 grow_div, float64 grow_either, bool carry, int64 cols", _OUT5, "", """
long long row = i / cols;
const double* s = &tot[row * 4];
const double* c = &rec[row * 4];
nr4 q = nr_div(a, ad, ap, ar, s[0], s[1], s[2], s[3], rel_u, rel_tiny, grow_div, u64, acc_max);
nr4 w = nr_mul(a, ad, ap, ar, c[0], c[1], c[2], c[3], u, tiny, u64, acc_max);
double m1 = fabs(q.v), m2 = fabs(w.v);
if (carry) {
  double z;
  if (nr_decided(3, a, ad + ar, s[0], s[1] + s[3], true, &z)) {
    q.v = z; q.d = 0.0; q.p = 0.0; q.r = 0.0; m1 = z != z ? 0.0 : fabs(z);
  }
  if (nr_decided(2, a, ad + ar, c[0], c[1] + c[3], false, &z)) {
    w.v = z; w.d = 0.0; w.p = 0.0; w.r = 0.0; m2 = z != z ? 0.0 : fabs(z);
  }
}
nr3 o = nr_either(q.v, q.d, q.p, m1, w.v, w.d, w.p, w.r, m2, grow_either);
value = q.v; det = o.d; prob = o.p; ref = q.r; mag = o.m;
""")

#: (x - m) - l or x - (m + l), and where the row's ok says so x - log(sum(exp(x)))
LOG_SOFTMAX = Elementwise(
    "numoracle_log_softmax_rows", "float64 xv, float64 ad, float64 ap, float64 ar",
    "raw float64 mx, raw float64 logs, raw float64 top, raw float64 plain, raw bool ok",
    "float64 u, float64 tiny, float64 u64, float64 fmax, float64 grow, int32 t, int32 emin, "
    "bool e0, bool e1, bool e2, bool e3, int64 cols", _OUT5, "", """
long long row = i / cols;
const double* m = &mx[row * 7];
const double* l = &logs[row * 4];
const double* tp = &top[row * 4];
const double* pl = &plain[row * 4];
nr4 d = nr_shifted(xv, ad, ap, ar, m[0], m[1], m[2], m[3], u, tiny, u64, e0, t, emin, fmax);
nr5 a = nr_sub(d.v, d.d, d.p, d.r, l[0], l[1], l[2], l[3], u, tiny, u64, e1, t, emin, fmax);
nr5 b = nr_sub(xv, ad, ap, ar, tp[0], tp[1], tp[2], tp[3], u, tiny, u64, e2, t, emin, fmax);
nr3 o = nr_either(a.v, a.d, a.p, a.m, b.v, b.d, b.p, b.r, b.m, grow);
if (ok[row]) {
  nr5 c = nr_sub(xv, ad, ap, ar, pl[0], pl[1], pl[2], pl[3], u, tiny, u64, e3, t, emin, fmax);
  if (fabs(c.d) < INF && fabs(c.v) < INF)
    o = nr_either(a.v, o.d, o.p, o.m, c.v, c.d, c.p, c.r, c.m, grow);
}
value = a.v; det = o.d; prob = o.p; ref = a.r; mag = o.m;
""".replace("INF", _INF))

#: g - p s, and in one-hot rows also (p - onehot) c (log_softmax_backward_rule's forms)
LOG_SOFTMAX_BACKWARD = Elementwise(
    "numoracle_log_softmax_backward_rows",
    "float64 yv, float64 yd, float64 yq, float64 yr, float64 gv, float64 gd, float64 gq, "
    "float64 gr", "raw float64 s, raw float64 c, raw bool single, raw float64 sc",
    "float64 u, float64 tiny, float64 u64, float64 fmax, float64 ulps, float64 per_x, "
    "float64 of_one, float64 ref_unit, float64 rel_u, float64 rel_tiny, float64 grow_div, "
    "float64 grow, int64 cols", _OUT5, "", """
long long row = i / cols;
const double* sr = &s[row * 4];
const double* cr = &c[row * 4];
nr4 p = nr_exp(yv, yd, yq, yr, ulps, per_x, of_one, u, tiny, ref_unit, fmax);
const double* one = &sc[row - row];  /* (no literal 0 index: CArray may read it as a pointer) */
nr4 a1 = nr_div(p.v, p.d, p.p, p.r, one[0], one[1], one[2], one[3], rel_u, rel_tiny, grow_div,
                u64, fmax);
nr4 a2 = nr_mul(p.v, p.d, p.p, p.r, one[4], one[5], one[6], one[7], u, tiny, u64, fmax);
nr3 in = nr_either_nan(a1.v, a1.d, a1.p, fabs(a1.v), a2.v, a2.d, a2.p, a2.r, fabs(a2.v), grow);
nr3 k = nr_either_nan(p.v, p.d, p.p, fabs(p.v), a1.v, in.d, in.p, a1.r, in.m, grow);
nr4 w = nr_mul(p.v, k.d, k.p, p.r, sr[0], sr[1], sr[2], sr[3], u, tiny, u64, fmax);
nr5 r = nr_sub(gv, gd, gq, gr, w.v, w.d, w.p, w.r, u, tiny, u64, false, 0, 0, fmax);
double rd = r.d, rp = r.p, rm = r.m;
if (single[row]) {
  double oh = (gv != 0.0 || gd != 0.0) ? 1.0 : 0.0;
  nr5 f = nr_sub(p.v, k.d, k.p, p.r, oh, 0.0, 0.0, 0.0, u, tiny, u64, false, 0, 0, fmax);
  nr4 h = nr_mul(f.v, f.d, f.p, f.r, cr[0], cr[1], cr[2], cr[3], u, tiny, u64, fmax);
  nr3 o = nr_either_nan(r.v, rd, rp, rm, h.v, h.d, h.p, h.r, fabs(h.v), grow);
  rd = o.d; rp = o.p; rm = o.m;
}
value = r.v; det = rd; prob = rp; ref = r.r; mag = rm;
""")

#: columns of :data:`ROW_SUM`'s output: the sums of the values, their magnitudes, det,
#: prob and ref_err
SUM_COLUMNS = 5

#: per row of ``x`` and its radii (each a pointer and element strides): the float64 sums
#: of :data:`SUM_COLUMNS`, each thread's strided part in order, then the parts in a tree
#: (one thread: the row in order); a subnormal value's magnitude joins det and prob where
#: it lies below ``flush`` (the inputs a kernel may flush); or'ed into ``flags[0]``: 1 a
#: value or radius not finite, 2 a det not 0, 4 a ref_err not 0; ``flags[1]`` the least
#: lowest set bit of the nonzero finite values (``none`` where there are none)
ROW_SUM = PerRow("numoracle_row_sum", (
    "const double* x, long long x0, long long x1, const double* xd, long long d0, "
    "long long d1, const double* xq, long long q0, long long q1, const double* xr, "
    "long long r0, long long r1, long long cols, double flush, int none, double* out, "
    "int* flags"), """
  __shared__ double red[5][BLOCK];
  __shared__ int low[BLOCK], seen[BLOCK];
  long long i = blockIdx.x;
  unsigned t = threadIdx.x;
  double sv = 0.0, sm = 0.0, sd = 0.0, sq = 0.0, sr = 0.0;
  int lsb = none, bits = 0;
  for (long long j = t; j < cols; j += blockDim.x) {
    double v = x[i * x0 + j * x1], d = xd[i * d0 + j * d1], p = xq[i * q0 + j * q1],
           r = xr[i * r0 + j * r1];
    double a = fabs(v);
    if (v != 0.0 && a < flush) { d = d + a; p = p + a; }
    if (!(a < INF && fabs(d) < INF && fabs(p) < INF && fabs(r) < INF)) bits |= 1;
    if (d != 0.0) bits |= 2;
    if (r != 0.0) bits |= 4;
    if (v != 0.0 && a < INF) {
      long long b = __double_as_longlong(v);
      int E = (int)((b >> 52) & 0x7ff);
      int e = LSB;
      lsb = e < lsb ? e : lsb;
    }
    sv = sv + v; sm = sm + a; sd = sd + d; sq = sq + p; sr = sr + r;
  }
  red[0][t] = sv; red[1][t] = sm; red[2][t] = sd; red[3][t] = sq; red[4][t] = sr;
  low[t] = lsb; seen[t] = bits;
  __syncthreads();
  for (unsigned s = blockDim.x >> 1; s > 0; s >>= 1) {
    if (t < s) {
      for (int k = 0; k < 5; ++k) red[k][t] = red[k][t] + red[k][t + s];
      low[t] = low[t + s] < low[t] ? low[t + s] : low[t];
      seen[t] |= seen[t + s];
    }
    __syncthreads();
  }
  if (t == 0) {
    for (int k = 0; k < 5; ++k) out[i * 5 + k] = red[k][0];
    atomicOr(&flags[0], seen[0]);
    atomicMin(&flags[1], low[0]);
  }
""".replace("BLOCK", str(BLOCK)).replace("LSB", _LSB).replace("INF", _INF))

#: per row, from :data:`ROW_SUM`'s sums and flags: the tracked sum as ``tracked.sum_``'s
#: contraction with a vector of ones makes it (``S`` grown into an upper bound, the radii
#: affine in it, the exact regime where no det is nonzero, infinite radii where the
#: accumulator may overflow); ``flags[2]`` set where the float64 reference is not below
#: ``share`` of the kernel's bound (there the contraction escalates)
ROW_SUM_RADII = Elementwise(
    "numoracle_row_sum_radii", "", "raw float64 sums",
    "float64 grow, float64 tiny_mag, float64 tiny_sum, float64 det_coef, float64 prob_coef, "
    "float64 eta, float64 g64, float64 acc_max, float64 share, int32 acc_p, int32 acc_emin, "
    "int32 p64, int32 floor64, int32 none", _OUT5, "raw int32 flags", """
const double* o = &sums[i * 5];
int* f = &flags[i - i];  /* (no literal 0 index: CArray may read it as a pointer) */
bool rad = (f[0] & 2) != 0, has_ref = (f[0] & 4) != 0;
double S = o[1];
if (rad) S = S + o[2];
double s = S * grow;
s = s + tiny_mag;
double d = s * det_coef + eta;
double p = s * prob_coef + eta;
double r = s * g64 + tiny_sum;
if (has_ref) r = r + o[4];
if (!rad) {
  int e = f[1] < none ? f[1] : 0;
  if (e >= acc_emin && s <= nr_pow2(acc_p + e)) { d = 0.0; p = 0.0; }
  if (!has_ref && e >= floor64 && s <= nr_pow2(p64 + e)) r = 0.0;
}
if (rad) { d = d + o[2]; p = p + o[3]; }
if (s > acc_max || d != d) { d = INF; p = INF; }
value = o[0]; det = d; prob = p; ref = r; mag = s;
if (r > share * (p < d ? p : d) && fabs(o[0]) < INF) atomicOr(&f[2], 1);
""".replace("INF", _INF))
