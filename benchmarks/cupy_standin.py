"""A counting stand-in for CuPy on a machine without a GPU: its arrays are NumPy's
(a subclass whose type lives in a module named ``cupy``, so that numoracle takes them
for CuPy's), its kernels and cuBLAS calls launch nothing (their outputs keep the zeros
they were made with), and every device call, array made and read back to the host
is counted in :data:`COUNTS`.

It runs the oracle's CuPy path (its control flow, the kernels' argument lists, the
host's bookkeeping), not its arithmetic: what it measures is how many Python calls,
device calls and host waits a reference makes, not their values nor their device
time. :func:`install` puts it in ``sys.modules`` (``cupy``, ``cupy.cuda``,
``cupy_backends.cuda.libs.cublas``) where CuPy does not import.
"""

from __future__ import annotations

import collections
import ctypes
import re
import sys
import types
from typing import Any

import numpy as np

#: what was called: ``launch:<what>`` (a device call), ``alloc`` (an array made),
#: ``sync:<how>`` (the host waiting for the device or reading from it)
COUNTS: collections.Counter[str] = collections.Counter()
#: NumPy functions that only make views (no launch on a device)
_VIEWS = frozenset(("swapaxes", "broadcast_to", "moveaxis", "ndim", "expand_dims", "reshape",
                    "transpose", "squeeze", "shape", "size", "may_share_memory"))
#: NumPy names taken as they are (types, constants, contexts)
_AS_IS = frozenset(("float64", "float32", "float16", "int32", "int64", "int8", "uint8",
                    "bool_", "int16", "uint32", "uint64", "inf", "nan", "pi", "e", "dtype",
                    "errstate", "newaxis", "finfo", "iinfo", "result_type", "can_cast",
                    "promote_types"))


def _base(a: Any) -> Any:
    if isinstance(a, ndarray):
        return a.view(np.ndarray)
    if isinstance(a, (list, tuple)) and a and isinstance(a[0], ndarray):
        return type(a)(_base(x) for x in a)
    return a


def _wrap(r: Any) -> Any:
    if isinstance(r, np.ndarray) and not isinstance(r, ndarray):
        return r.view(ndarray)
    return tuple(_wrap(x) for x in r) if isinstance(r, tuple) else r


class _Pointer:
    def __init__(self, a: np.ndarray) -> None:
        self.ptr = a.__array_interface__["data"][0]


class ndarray(np.ndarray):  # noqa: N801 - CuPy's name
    """A NumPy array numoracle takes for CuPy's."""

    def __new__(cls, shape: Any, dtype: Any = float, memptr: Any = None, strides: Any = None,
                order: str = "C") -> ndarray:
        COUNTS["alloc"] += 1
        return np.zeros(shape, dtype=dtype, order=order).view(cls)

    @property
    def data(self) -> _Pointer:  # type: ignore[override]
        return _Pointer(self)

    @property
    def device(self) -> Any:
        return types.SimpleNamespace(id=0)

    def get(self, *args: Any, **kwargs: Any) -> np.ndarray:
        COUNTS["sync:get"] += 1
        return np.array(self.view(np.ndarray))

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        COUNTS[f"launch:{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")] += 1
        if "out" in kwargs:
            kwargs["out"] = tuple(_base(o) for o in kwargs["out"])
        kwargs = {k: _base(v) for k, v in kwargs.items()}
        return _wrap(getattr(ufunc, method)(*(_base(i) for i in inputs), **kwargs))

    def __array_function__(self, func: Any, types_: Any, args: Any, kwargs: Any) -> Any:
        if func.__name__ not in _VIEWS:
            COUNTS[f"launch:{func.__name__}"] += 1
        return _wrap(func(*(_base(a) for a in args), **{k: _base(v) for k, v in kwargs.items()}))

    def _read(self, kind: Any) -> Any:
        COUNTS["sync:read"] += 1
        return kind(self.view(np.ndarray))

    def __bool__(self) -> bool:
        return self._read(bool)

    def __float__(self) -> float:
        return self._read(float)

    def __int__(self) -> int:
        return self._read(int)

    def item(self, *args: Any) -> Any:  # type: ignore[override]
        return self._read(lambda a: a.item(*args))

    def tolist(self) -> Any:  # type: ignore[override]
        return self._read(lambda a: a.tolist())

    def astype(self, dtype: Any, order: Any = "K", casting: Any = "unsafe",  # type: ignore
               subok: bool = True, copy: bool = True) -> Any:
        if copy or np.dtype(dtype) != self.dtype:
            COUNTS["launch:astype"] += 1
        return _wrap(self.view(np.ndarray).astype(dtype, order=order, copy=copy))

    def __matmul__(self, other: Any) -> Any:  # type: ignore[override]
        COUNTS["launch:matmul"] += 1
        return _wrap(np.matmul(_base(self), _base(other)))

    def __getitem__(self, key: Any) -> Any:
        r = self.view(np.ndarray)[_base(key)]
        return _wrap(r if isinstance(r, np.ndarray) else np.asarray(r))

    def fill(self, value: Any) -> None:
        COUNTS["launch:fill"] += 1
        self.view(np.ndarray).fill(value)

    def copy(self, order: str = "C") -> Any:  # type: ignore[override]
        COUNTS["launch:copy"] += 1
        return _wrap(self.view(np.ndarray).copy(order=order))


def _function(name: str) -> Any:
    f = getattr(np, name)

    def call(*args: Any, **kwargs: Any) -> Any:
        if name not in _VIEWS:
            COUNTS[f"launch:{name}"] += 1
        return _wrap(f(*(_base(a) for a in args), **{k: _base(v) for k, v in kwargs.items()}))
    call.__name__ = name
    return call


def _module_attribute(name: str) -> Any:
    """What ``cupy.<name>`` is where the stand-in does not define it: NumPy's types and
    constants as they are, its functions counted; no dunder (``__file__``: the stand-in
    is no file)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(np, name) if name in _AS_IS else _function(name)


def _params(spec: str) -> list[str]:
    return [p.split()[-2] if len(p.split()) > 1 else p for p in spec.split(",") if p.strip()]


class ElementwiseKernel:
    """Counts its launches, checks its argument count, makes its missing outputs."""

    def __init__(self, in_params: str, out_params: str, operation: str, name: str = "kernel",
                 **kwargs: Any) -> None:
        self.n_in, self.out_types, self.name = len(_params(in_params)), _params(out_params), name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        COUNTS[f"launch:kernel {self.name}"] += 1
        if not self.n_in <= len(args) <= self.n_in + len(self.out_types):
            raise TypeError(f"{self.name}: {len(args)} arguments for {self.n_in} in and "
                            f"{len(self.out_types)} out")
        outs = list(args[self.n_in:])
        shapes = [a.shape for a in args[:self.n_in] if isinstance(a, np.ndarray)]
        for kind in self.out_types[len(outs):]:
            outs.append(ndarray(np.broadcast_shapes(*shapes) if shapes else (),
                                dtype={"float32": np.float32, "bool": np.bool_,
                                       "int32": np.int32}.get(kind, np.float64)))
        return outs[0] if len(outs) == 1 else tuple(outs)


class RawKernel:
    """Counts its launches and checks its argument count against its C signature."""

    def __init__(self, code: str, name: str, **kwargs: Any) -> None:
        found = re.search(r"void\s+" + name + r"\s*\(([^)]*)\)", code)
        if found is None:
            raise ValueError(f"no kernel {name} in its source")
        self.n, self.name = len(found.group(1).split(",")), name

    def __call__(self, grid: Any, block: Any, args: Any, **kwargs: Any) -> None:
        COUNTS[f"launch:raw {self.name}"] += 1
        if len(args) != self.n:
            raise TypeError(f"{self.name}: {len(args)} arguments for {self.n}")


def _asarray(a: Any, dtype: Any = None, order: Any = None) -> Any:
    if isinstance(a, ndarray) and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    COUNTS["launch:asarray"] += 1
    return np.array(_base(a), dtype=dtype, order=order or "K").view(ndarray)


def _gemm_ex(*args: Any) -> None:
    COUNTS["launch:cublas gemmEx"] += 1
    if len(args) != 19:
        raise TypeError(f"gemmEx: {len(args)} arguments for 19")


def _memcpy_async(dst: int, src: int, size: int, kind: int, stream: int) -> None:
    COUNTS["launch:memcpyAsync"] += 1
    ctypes.memmove(dst, src, size)


def _pinned(size: int) -> bytearray:
    COUNTS["pinned"] += 1
    return bytearray(size)


class _Device:
    mem_info = (1 << 30, 1 << 34)

    def __init__(self, index: int = 0) -> None:
        self.id = index

    def __enter__(self) -> _Device:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def synchronize(self) -> None:
        COUNTS["sync:device"] += 1

    def use(self) -> None:
        return None


class _Stream:
    ptr = 0

    def record(self, event: Any = None) -> Any:
        return types.SimpleNamespace(synchronize=lambda: COUNTS.update(["sync:event"]))

    def synchronize(self) -> None:
        COUNTS["sync:stream"] += 1

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class _Pool:
    def total_bytes(self) -> int:
        return 0

    used_bytes = total_bytes

    def free_all_blocks(self) -> None:
        return None

    def set_limit(self, **kwargs: Any) -> None:
        return None


def install() -> bool:
    """The stand-in as ``cupy`` (and the parts of CuPy numoracle calls) in
    ``sys.modules``; False (nothing changed) where CuPy imports."""
    try:
        import cupy  # noqa: F401, PLC0415 - the real one wins
    except ImportError:
        pass
    else:
        return False
    stream = _Stream()
    cuda = types.ModuleType("cupy.cuda")
    runtime = types.ModuleType("cupy.cuda.runtime")
    runtime.__dict__.update(memcpyDeviceToHost=2, getDevice=lambda: 0,
                            memcpyAsync=_memcpy_async, getDeviceCount=lambda: 1,
                            getDeviceProperties=lambda i: {"name": b"stand-in"})
    device = types.ModuleType("cupy.cuda.device")
    device.__dict__.update(get_cublas_handle=lambda: 1)
    stream_type = type("Stream", (_Stream,), {"from_external": classmethod(lambda c, s: stream)})
    cuda.__dict__.update(Device=_Device, runtime=runtime, device=device, Stream=stream_type,
                         ExternalStream=stream_type, get_current_stream=lambda *a: stream,
                         alloc_pinned_memory=_pinned)
    cp = types.ModuleType("cupy")
    cp.__dict__.update(ndarray=ndarray, ElementwiseKernel=ElementwiseKernel,
                       ReductionKernel=ElementwiseKernel, RawKernel=RawKernel,
                       asarray=_asarray, array=lambda a, dtype=None, copy=True, order="K":
                       _asarray(np.array(_base(a), dtype=dtype, order=order)),
                       asnumpy=lambda a: np.array(_base(a)), cuda=cuda, COUNTS=COUNTS,
                       get_default_memory_pool=_Pool, get_default_pinned_memory_pool=_Pool,
                       __version__="stand-in")
    cp.__getattr__ = _module_attribute
    ndarray.__module__ = "cupy"
    cublas = types.ModuleType("cupy_backends.cuda.libs.cublas")
    cublas.gemmEx = _gemm_ex
    modules = {"cupy": cp, "cupy.cuda": cuda, "cupy.cuda.runtime": runtime,
               "cupy.cuda.device": device, "cupy_backends": types.ModuleType("cupy_backends"),
               "cupy_backends.cuda": types.ModuleType("cupy_backends.cuda"),
               "cupy_backends.cuda.libs": types.ModuleType("cupy_backends.cuda.libs"),
               "cupy_backends.cuda.libs.cublas": cublas}
    for parent, child in (("cupy_backends", "cuda"), ("cupy_backends.cuda", "libs"),
                          ("cupy_backends.cuda.libs", "cublas")):
        setattr(modules[parent], child, modules[f"{parent}.{child}"])
    sys.modules.update(modules)
    return True
