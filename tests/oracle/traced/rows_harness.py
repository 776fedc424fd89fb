"""The device kernels of the softmax family's rows (``numoracle/oracle/_rows_cuda.py``)
compiled on the host: the same C text, through a shim of CUDA's few names, by g++
without contraction (``-ffp-contract=off``, as the device's ``--fmad=false``) into
a shared library loaded by ctypes. An elementwise kernel is a loop over the elements
(``i`` its index); a kernel of a block per row a loop over the blocks, each of one
thread by default (so its shared-memory reduction has one entry, and the thread's loop
visits the row in order: the numba loops' order), or of several threads meeting at
``__syncthreads`` (a ``std::barrier``), as on the device. :func:`build` returns
callables with CuPy's calling conventions on NumPy arrays, for ``fused_cuda.build``;
:func:`library` is None where g++ is missing.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from numoracle.oracle import _rows_cuda as src

SHIM = r"""
#include <math.h>
#include <string.h>
#include <stddef.h>
#include <algorithm>
#include <barrier>
#include <thread>
#include <vector>
using std::max;
using std::min;
#define __device__ static inline
#define __forceinline__
#define __global__
#define __shared__ static
static inline double __longlong_as_double(long long b) { double d; memcpy(&d, &b, 8); return d; }
static inline long long __double_as_longlong(double d) { long long b; memcpy(&b, &d, 8); return b; }
static inline int __ffsll(long long b) { return __builtin_ffsll(b); }
static inline int atomicOr(int* p, int v) { int o = *p; *p |= v; return o; }
static inline int atomicMin(int* p, int v) { int o = *p; if (v < o) *p = v; return o; }
struct nr_dim3 { unsigned x; };
static thread_local nr_dim3 threadIdx;
static nr_dim3 blockIdx, blockDim, gridDim;
static std::barrier<>* nr_barrier = nullptr;
static inline void __syncthreads() { if (nr_barrier) nr_barrier->arrive_and_wait(); }
"""

_C = {"float64": "double", "int32": "int", "int64": "long long", "uint64": "unsigned long long",
      "bool": "bool"}
_CTYPES = {"double": ctypes.c_double, "int": ctypes.c_int, "long long": ctypes.c_longlong,
           "unsigned long long": ctypes.c_ulonglong, "bool": ctypes.c_bool}
_NP = {"double": np.float64, "int": np.int32, "long long": np.int64,
       "unsigned long long": np.uint64, "bool": np.bool_}


def _params(text: str) -> list[tuple[str, str]]:
    """CuPy's ``type name`` list as (C type, name), ``raw`` dropped."""
    out = []
    for p in filter(None, (q.strip() for q in text.split(","))):
        words = p.split()
        out.append((_C[words[-2]], words[-1]))
    return out


def _elementwise_source(k: src.Elementwise) -> str:
    sig, bind = ["long long n"], []
    for t, name in _params(k.arrays):
        sig.append(f"const {t}* {name}__p")
        bind.append(f"const {t} {name} = {name}__p[i];")
    sig += [f"{t}* {name}" for t, name in _params(k.raws)]
    sig += [f"{t} {name}" for t, name in _params(k.scalars)]
    for t, name in _params(k.outs):
        sig.append(f"{t}* {name}__p")
        bind.append(f"{t}& {name} = {name}__p[i];")
    sig += [f"{t}* {name}" for t, name in _params(k.raw_outs)]
    return (f'extern "C" void {k.name}({", ".join(sig)}) {{\n'
            f"  for (long long i = 0; i < n; ++i) {{\n    {' '.join(bind)}\n"
            f"    {{\n{k.body}\n    }}\n  }}\n}}\n")


def _c_params(text: str) -> list[tuple[str, str]]:
    out = []
    for p in (q.strip() for q in text.split(",")):
        t, name = p.rsplit(None, 1)
        out.append((t, name))
    return out


def _per_row_source(k: src.PerRow) -> str:
    """The kernel, and a launcher of its blocks one after the other, each of ``block``
    threads (one: the thread itself; more: threads meeting at ``__syncthreads``, the
    block's shared arrays static, so shared by them)."""
    names = ", ".join(n for _, n in _c_params(k.params))
    return k.source() + f"""extern "C" void {k.name}__grid(long long grid, long long block,
                                                       {k.params}) {{
  blockDim.x = (unsigned)block; gridDim.x = (unsigned)grid;
  for (long long b = 0; b < grid; ++b) {{
    blockIdx.x = (unsigned)b;
    if (block == 1) {{ threadIdx.x = 0; {k.name}({names}); continue; }}
    std::barrier<> sync(block);
    nr_barrier = &sync;
    std::vector<std::thread> team;
    for (long long t = 0; t < block; ++t)
      team.emplace_back([&, t] {{ threadIdx.x = (unsigned)t; {k.name}({names}); }});
    for (auto& th : team) th.join();
    nr_barrier = nullptr;
  }}
}}
"""


def _host(a: Any) -> Any:
    """The NumPy array under an array of the tests' strict namespace (written in place)."""
    return getattr(a, "a", a) if type(a).__name__ == "StrictArray" else a


def _ctype(t: str) -> Any:
    return ctypes.c_void_p if t.endswith("*") else _CTYPES[t]


class _ElementwiseCall:
    """An elementwise kernel called as CuPy's: inputs, then outputs (all given)."""

    def __init__(self, lib: Any, k: src.Elementwise) -> None:
        self.fn = getattr(lib, k.name)
        self.groups = [_params(g) for g in (k.arrays, k.raws, k.scalars, k.outs, k.raw_outs)]
        types = [ctypes.c_longlong]
        for g, (_, scalar) in zip(self.groups, ((0, False), (1, False), (2, True), (3, False),
                                                 (4, False)), strict=True):
            types += [_CTYPES[t] if scalar else ctypes.c_void_p for t, _ in g]
        self.fn.argtypes = types
        self.fn.restype = None

    def __call__(self, *wrapped: Any) -> Any:
        args = [_host(a) for a in wrapped]
        counts = [len(g) for g in self.groups]
        assert len(args) == sum(counts), (len(args), counts)
        parts, at = [], 0
        for c in counts:
            parts.append(args[at:at + c])
            at += c
        arrays, raws, scalars, outs, raw_outs = parts
        shape = outs[0].shape
        keep: list[Any] = []
        call: list[Any] = [int(np.prod(shape))]
        for (t, _), a in zip(self.groups[0], arrays, strict=True):
            keep.append(np.ascontiguousarray(np.broadcast_to(a, shape), dtype=_NP[t]))
            call.append(keep[-1].ctypes.data)
        for (t, _), a in zip(self.groups[1], raws, strict=True):
            keep.append(np.ascontiguousarray(a, dtype=_NP[t]))
            call.append(keep[-1].ctypes.data)
        for (t, _), s in zip(self.groups[2], scalars, strict=True):
            assert np.ndim(s) == 0, "a scalar parameter given an array"
            call.append(_NP[t](s).item())
        for (t, _), a in zip(self.groups[3] + self.groups[4], outs + raw_outs, strict=True):
            assert a.flags.c_contiguous and a.dtype == _NP[t], (a.dtype, a.strides)
            call.append(a.ctypes.data)
        assert all(a.shape == shape for a in outs), [a.shape for a in outs]
        self.fn(*call)
        given = wrapped[len(args) - len(outs) - len(raw_outs):]
        return given[0] if len(outs) == 1 else given[:len(outs)]


class _PerRowCall:
    """A kernel of a block per row called as CuPy's RawKernel (grid, block, arguments),
    each block of ``threads`` threads (one, whatever the block asked: the loops' order)."""

    def __init__(self, lib: Any, k: src.PerRow, threads: int) -> None:
        self.fn = getattr(lib, k.name + "__grid")
        self.params = _c_params(k.params)
        self.threads = threads
        self.fn.argtypes = [ctypes.c_longlong, ctypes.c_longlong] + [
            _ctype(t) for t, _ in self.params]
        self.fn.restype = None

    def __call__(self, grid: tuple[int], block: tuple[int], args: tuple[Any, ...]) -> None:
        assert self.threads <= block[0] <= src.BLOCK
        call: list[Any] = [grid[0], self.threads]
        for (t, _), a in zip(self.params, map(_host, args), strict=True):
            if t.endswith("*"):
                assert isinstance(a, np.ndarray)
                call.append(a.ctypes.data)  # (a view's first element: its strides passed)
            else:
                call.append(_NP[t](a).item())
        self.fn(*call)


_SPECS = (src.ROW_MAX, src.HOT_ROWS, src.ROW_HI, src.SHIFTED_EXP, src.SHIFTED_EXP_BOTH,
          src.SOFTMAX, src.LOG_SOFTMAX, src.LOG_SOFTMAX_BACKWARD, src.ROW_SUM, src.ROW_SUM_RADII)
_LIB: dict[str, Any] = {}


def source(specs: tuple[src.Elementwise | src.PerRow, ...] = _SPECS) -> str:
    """The host translation unit: the shim, the preamble and every kernel."""
    parts = [SHIM, src.PREAMBLE]
    for k in specs:
        parts.append(_elementwise_source(k) if isinstance(k, src.Elementwise)
                     else _per_row_source(k))
    return "\n".join(parts)


def compiled(text: str, stem: str) -> Any:
    """The C++ ``text`` compiled by g++ without contraction into a shared library (once
    per process and text; files named after ``stem``); None without g++."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    if digest in _LIB:
        return _LIB[digest]
    gxx = shutil.which("g++")
    if gxx is None:
        _LIB[digest] = None
        return None
    folder = Path(tempfile.gettempdir()) / f"numoracle_{stem}_harness"
    folder.mkdir(exist_ok=True)
    so = folder / f"{stem}_{digest}.so"
    if not so.exists():
        cpp = folder / f"{stem}_{digest}.{os.getpid()}.cpp"  # (parallel workers apart)
        cpp.write_text(text)
        tmp = folder / f"{stem}_{digest}.{os.getpid()}.so"
        subprocess.run([gxx, "-O2", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC",
                        "-std=c++20", "-pthread", "-o", str(tmp), str(cpp)], check=True,
                       capture_output=True, text=True)
        tmp.replace(so)
    _LIB[digest] = ctypes.CDLL(str(so))
    return _LIB[digest]


def library(specs: tuple[src.Elementwise | src.PerRow, ...] | None = None) -> Any:
    """The kernels (every one, or ``specs``) compiled into a shared library (once per
    process); None without g++."""
    return compiled(source(specs or _SPECS), "rows")


def build(spec: src.Elementwise | src.PerRow, threads: int = 1,
          specs: tuple[src.Elementwise | src.PerRow, ...] | None = None) -> Any:
    """The host's kernel of ``spec`` (``fused_cuda.build``'s stand-in), a block per row
    run by ``threads`` threads; with ``specs``, from a library of those kernels alone
    (a mutated kernel under its own name)."""
    lib = library(specs)
    assert lib is not None, "g++ is needed"
    if isinstance(spec, src.Elementwise):
        return _ElementwiseCall(lib, spec)
    return _PerRowCall(lib, spec, threads)


_PROBE = r"""
#include <cmath>
extern "C" void exp_probe(long long n, const double* x, double* e, double* m) {
    for (long long i = 0; i < n; ++i) { e[i] = std::exp(x[i]); m[i] = std::expm1(x[i]); }
}
"""
_EXP_AS_NUMPY: list[bool] = []


def exp_as_numpy() -> bool:
    """Whether the C library's ``exp`` and ``expm1`` give NumPy's bits on this machine
    (on a sample over softmax's range of arguments). Not everywhere: NumPy's own SIMD
    ``exp`` (AVX-512 on some x86-64 processors) may differ from the C library's in the
    last place; where it does, the kernels on the host are compared with the passes
    within the oracle's own error, as the device's kernels are."""
    if not _EXP_AS_NUMPY:
        lib = compiled(_PROBE, "exp_probe")
        if lib is None:
            _EXP_AS_NUMPY.append(False)
            return False
        rng = np.random.default_rng(0)
        x = np.concatenate([np.linspace(-745.0, 709.0, 100_001), rng.uniform(-50, 0, 100_000),
                            rng.standard_normal(100_000)])
        e, m = np.empty_like(x), np.empty_like(x)
        lib.exp_probe.argtypes = [ctypes.c_longlong] + [ctypes.c_void_p] * 3
        lib.exp_probe(x.size, x.ctypes.data, e.ctypes.data, m.ctypes.data)
        _EXP_AS_NUMPY.append(bool(np.array_equal(e, np.exp(x)) and np.array_equal(m, np.expm1(x))))
    return _EXP_AS_NUMPY[0]
