"""The array namespaces the oracle computes in: NumPy, CuPy, and torch's.

The oracle is written once against the NumPy API; every function takes its
namespace from its operands (:func:`array_module`), as mpmath's functions take
their context, and creates its arrays there. Three namespaces serve it:

* NumPy, on the host;
* CuPy, on a GPU (its arrays are CuPy's);
* torch's NumPy API (:mod:`torch._numpy`, the implementation of the NumPy API
  over tensors that ``torch.compile`` uses for NumPy code), on whatever device
  torch runs: its arrays wrap float64 (or integer, boolean) tensors, on the CPU or
  on a GPU, and every operation is a torch operation on that device. A few
  functions it lacks are completed here (:class:`TorchNumPy`).

Arrays of one computation stay in one namespace: a rule creates its arrays with
its operands' namespace, never with NumPy's. :func:`as_namespace` moves host
arrays into a namespace (once, for the inputs) and :func:`to_numpy` brings
results back. The fast paths (numba loops on the host, CuPy kernels on a GPU)
are chosen per namespace in one place (:mod:`~numoracle.oracle.fused`).

On a GPU the oracle evaluates in torch's namespace on that device, or in CuPy
where chosen (its operations are CUDA kernels called with little host work, and the
fused kernels of :mod:`~numoracle.oracle.fused` serve it): :func:`gpu_namespace`
is the one switch (:data:`GPU_NAMESPACE_VARIABLE` chooses). Tensors and CuPy arrays cross between the two through DLPack,
without a copy.
"""

from __future__ import annotations

import inspect
import math
import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from functools import lru_cache
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np

from ..errors import InvalidArgument

__all__ = ["array_module", "as_namespace", "to_numpy", "like", "device_of", "keeps_subnormals",
           "special", "namespace_named", "on_device", "same_memory", "add_at", "is_torch",
           "TorchNumPy", "NAMESPACES", "reads_are_free", "fill_where", "gpu_namespace",
           "on_gpu", "GPU_NAMESPACE_VARIABLE", "filled", "TORCH_ARRAYS",
           "release_cached_memory", "CACHED_MEMORY_KEPT", "thorough", "thoroughly"]

#: bytes of freed device memory the oracle's CuPy pool may keep between cases
CACHED_MEMORY_KEPT = 2**28
#: the namespaces by name (``torch``'s on the device torch computes on by default)
NAMESPACES = ("numpy", "cupy", "torch")
#: the environment variable that forces the namespace of a GPU evaluation (``cupy`` or
#: ``torch``); unset, :func:`gpu_namespace` takes torch's
GPU_NAMESPACE_VARIABLE = "NUMORACLE_GPU_NAMESPACE"


class TorchNumPy:
    """torch's NumPy API (:mod:`torch._numpy`), completed with what the oracle uses
    and it lacks (``frexp``, ``errstate``, ``asnumpy``; ``add.at`` is :func:`add_at`).
    One instance, :data:`TORCH`; its arrays are ``torch._numpy.ndarray``, each
    holding a tensor (``.tensor``)."""

    __name__ = "torch"

    def __init__(self) -> None:
        import torch  # noqa: PLC0415 - only where torch arrays are used
        import torch._numpy as tnp  # noqa: PLC0415

        self._torch = torch
        self._tnp = tnp
        self.ndarray = tnp.ndarray
        self.errstate = np.errstate  # torch raises no floating-point warnings
        self.lib = SimpleNamespace(stride_tricks=SimpleNamespace(as_strided=self._as_strided))
        self._speak_numpy()
        _signatures_kept()

    def _speak_numpy(self) -> None:
        """Let NumPy's functions and ufuncs take this namespace's arrays, as CuPy's
        arrays do (NEP 13 and NEP 18): ``np.where(mask, a, 0.0)``, ``host * a`` and
        ``np.expand_dims(a, 0)`` run in torch, host operands moved to ``a``'s
        device. torch's NumPy arrays otherwise have no such protocol, and NumPy
        makes object arrays of them."""
        cls = self.ndarray
        if getattr(cls, "__array_function__", None) is not None:
            return
        ns = self

        def array_function(arr: Any, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
            fn = ns._numpy_twin(func.__name__)
            if fn is None:
                return NotImplemented
            dev = ns.tensor(arr).device
            return fn(*ns._onto(args, dev), **ns._onto(kwargs, dev))

        def array_ufunc(arr: Any, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
            dev = ns.tensor(arr).device
            inputs, kwargs = ns._onto(inputs, dev), ns._onto(kwargs, dev)
            if method == "at" and ufunc.__name__ == "add":
                add_at(*inputs)
                return None
            fn = ns._numpy_twin(ufunc.__name__)
            if fn is None or method not in ("__call__", "reduce"):
                return NotImplemented
            if method == "reduce":
                red = {"maximum": "max", "minimum": "min", "add": "sum",
                       "logical_or": "any", "logical_and": "all"}.get(ufunc.__name__)
                if red is None:
                    return NotImplemented
                first = inputs[0]
                if isinstance(first, (list, tuple)):
                    first = ns._tnp.stack(list(first))
                return getattr(ns._tnp, red)(first, **kwargs)
            out = kwargs.pop("out", None)
            if isinstance(out, tuple):
                out = out[0] if len(out) == 1 else out
            return fn(*inputs, **kwargs) if out is None else fn(*inputs, out=out, **kwargs)

        cls.__array_function__ = array_function
        cls.__array_ufunc__ = array_ufunc
        cls.__array_priority__ = 100
        for name in _OPERATORS:  # NumPy scalars (np.log(2.0), a float64 element) taken
            setattr(cls, name, _scalars_as_python(getattr(cls, name), self._torch))
        cls.flags = property(_flags)

    def _numpy_twin(self, name: str) -> Any:
        own = {"frexp": self.frexp, "ldexp": self.ldexp, "as_strided": self._as_strided,
               "cumsum": self.cumsum, "pad": self.pad, "where": self.where,
               "moveaxis": self.moveaxis, "isfinite": self.isfinite}
        return own.get(name) or getattr(self._tnp, name, None)

    def _onto(self, obj: Any, device: Any) -> Any:
        """Host arrays in ``obj`` (nested in tuples, lists and dicts) as arrays of this
        namespace on ``device``; everything else unchanged."""
        if isinstance(obj, np.ndarray):
            return self.from_tensor(self._torch.as_tensor(_own(obj), device=device))
        if isinstance(obj, np.generic):  # torch's NumPy API takes no NumPy scalars
            return obj.item()
        if isinstance(obj, (tuple, list)):
            return type(obj)(self._onto(o, device) for o in obj)
        if isinstance(obj, dict):
            return {k: self._onto(v, device) for k, v in obj.items()}
        return obj

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tnp, name)

    def __repr__(self) -> str:
        return "<array namespace torch (torch._numpy)>"

    def pad(self, array: Any, pad_width: Any, mode: str = "constant",
            constant_values: Any = 0) -> Any:
        """``array`` padded with ``constant_values`` (NumPy's ``pad``; its other modes
        on the host), the widths kept host integers (torch's NumPy API makes a tensor
        of them, which a traced evaluation would read back)."""
        t = self.tensor(self._tnp.asarray(array))
        if mode != "constant":  # (NumPy's other modes, on the host, then back)
            host = np.pad(t.cpu().numpy(), pad_width, mode=mode)
            return self.from_tensor(self._torch.as_tensor(host, device=t.device))
        widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (t.ndim, 2))
        flat = tuple(int(w) for w in widths[::-1].reshape(-1))
        value = float(constant_values) if t.is_floating_point() else int(constant_values)
        return self.from_tensor(self._torch.nn.functional.pad(t, flat, value=value))

    def where(self, condition: Any, x: Any = None, y: Any = None) -> Any:
        """NumPy's ``where``; ``where(mask, number, array)`` of a contiguous float64 array
        and a contiguous mask of its shape by one ``masked_fill`` (torch's NumPy API makes
        a tensor of the number first): the same values, laid out the same (contiguous:
        a sum over the result adds in the same order)."""
        if type(x) in (int, float) and type(y) is self.ndarray and type(condition) is self.ndarray:
            c, t = condition.tensor, y.tensor
            if (t.dtype == self._torch.float64 and c.dtype == self._torch.bool
                    and c.shape == t.shape and t.is_contiguous() and c.is_contiguous()):
                return self.ndarray(t.masked_fill(c, x))
        return self._tnp.where(condition, x, y)

    def isfinite(self, x: Any) -> Any:
        """NumPy's ``isfinite``; of a floating-point array as ``|x| < inf`` (NaN compares
        false): two tensor operations where torch's makes four."""
        if type(x) is self.ndarray and x.tensor.is_floating_point():
            return self.ndarray(x.tensor.abs() < math.inf)
        return self._tnp.isfinite(x)

    def moveaxis(self, a: Any, source: Any, destination: Any) -> Any:
        """NumPy's ``moveaxis``; an axis moved where it is gives ``a``'s tensor again (no
        operation: torch's NumPy API permutes)."""
        t = self.tensor(a)
        if isinstance(source, int) and isinstance(destination, int) and t.dim() and (
                source % t.dim() == destination % t.dim()):
            return self.ndarray(t)
        return self._tnp.moveaxis(a, source, destination)

    def frexp(self, x: Any) -> tuple[Any, Any]:
        """``x = m 2^e`` with ``|m|`` in ``[0.5, 1)`` (``m = x``, ``e = 0`` for 0,
        infinities and NaN), as NumPy's."""
        t = self._tnp.asarray(x).tensor
        m, e = self._torch.frexp(t)
        odd = ~self._torch.isfinite(t)  # (unconditionally: a test would read the device)
        m = self._torch.where(odd, t, m)
        e = self._torch.where(odd, self._torch.zeros_like(e), e)
        return self._tnp.asarray(m), self._tnp.asarray(e)

    def ldexp(self, x: Any, e: Any, out: Any = None) -> Any:
        """``x 2^e`` rounded once, as NumPy's (torch's multiplies by ``2.0**e``, which
        is 0 or infinite beyond float64's range of powers): ``m 2^(k+e)`` from
        ``x = m 2^k``, the power of two built from its bits."""
        torch = self._torch
        t = self._tnp.asarray(x).tensor
        t = t.to(torch.float64) if not t.is_floating_point() else t
        ex = self._tnp.asarray(e).tensor
        if ex.device != t.device:  # (a 0-d operand goes where the other is: no array moves)
            if t.dim() == 0:
                t = t.to(ex.device)
            else:
                ex = ex.to(t.device)
        m, k = torch.frexp(t)
        # x 2^e = (2m) 2^p with 2m in [1, 2): one rounding where 2^p is a float64 (p at
        # least -1074); at p = -1075, m 2^-1074 (one rounding); below, 0 (under half
        # the smallest subnormal); above 1023, an infinity
        p = (k.to(torch.int64) + ex.to(torch.int64) - 1).clamp(-1076, 1024)
        half = p == -1075
        mant = torch.where(half, m, 2.0 * m)
        pp = torch.where(half, -1074, p)
        normal = ((pp.clamp(-1022, 1023) + 1023) << 52).view(torch.float64)
        sub = (torch.ones_like(pp) << (pp.clamp(-1074, -1023) + 1074)).view(torch.float64)
        power = torch.where(pp > 1023, torch.inf, torch.where(
            pp >= -1022, normal, torch.where(pp >= -1074, sub, 0.0)))
        r = torch.where(torch.isfinite(t) & (t != 0), mant * power, t)
        if out is not None:
            self._tnp.asarray(out).tensor.copy_(r)
            return out
        return self._tnp.asarray(r)

    def _as_strided(self, x: Any, shape: Any, strides: Any) -> Any:
        """NumPy's ``as_strided`` (strides in bytes) of an array of this namespace."""
        t = self.tensor(x)
        size = t.element_size()
        return self.from_tensor(self._torch.as_strided(
            t, tuple(shape), tuple(s // size for s in strides), t.storage_offset()))

    def cumsum(self, a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        """NumPy's ``cumsum``: booleans counted as integers (torch sums no booleans)."""
        a = self._tnp.asarray(a)
        if a.dtype == self._tnp.bool_ and dtype is None:
            a = a.astype(self._tnp.int64)
        return self._tnp.cumsum(a, axis=axis, dtype=dtype, out=out)

    def asnumpy(self, x: Any) -> np.ndarray:
        """``x`` as a host NumPy array."""
        a = self._tnp.asarray(x).tensor.detach()
        return a.cpu().numpy() if a.device.type != "cpu" else a.numpy().copy()

    def from_tensor(self, t: Any) -> Any:
        """A tensor as an array of this namespace (no copy; wrapped directly, as
        ``asarray`` wraps it after its checks)."""
        if isinstance(t, self._torch.Tensor):
            return self.ndarray(t)
        return self._tnp.asarray(t)

    def tensor(self, x: Any) -> Any:
        """The tensor an array of this namespace holds (a tensor itself; anything else
        as ``asarray`` makes it)."""
        if type(x) is self.ndarray:
            return x.tensor
        if isinstance(x, self._torch.Tensor):
            return x
        return self._tnp.asarray(x).tensor


class _KeptSignatures(ModuleType):
    """:mod:`inspect` with ``signature`` kept per function: what torch's NumPy API
    asks of every function on every call (its argument normaliser), a third of the
    host time of an evaluation in its namespace. A signature is immutable."""

    signature = staticmethod(lru_cache(maxsize=None)(inspect.signature))

    def __getattr__(self, name: str) -> Any:
        return getattr(inspect, name)


def _signatures_kept() -> None:
    """Let torch's NumPy API find each function's signature once (where its
    normaliser reads them through its module's ``inspect``)."""
    from torch._numpy import _normalizations  # noqa: PLC0415 - only with torch's namespace

    if getattr(_normalizations, "inspect", None) is inspect:
        _normalizations.inspect = _KeptSignatures("inspect")


#: the operators of torch's NumPy arrays that meet NumPy scalars (which they refuse)
_OPERATORS = tuple(f"__{op}__" for op in (
    "add", "radd", "iadd", "sub", "rsub", "isub", "mul", "rmul", "imul", "truediv",
    "rtruediv", "itruediv", "floordiv", "rfloordiv", "mod", "pow", "rpow", "lt", "le",
    "gt", "ge", "eq", "ne", "and", "rand", "or", "ror", "xor", "rxor", "setitem"))


#: the operators that, on a float64 array and a Python number or another float64 array,
#: call the tensor's own: the same result (float64 arithmetic rounds once either way; a
#: comparison is exact), without the 0-d tensor torch's NumPy API makes of a number
#: (an operation of its own in a recorded graph) or its ``~(a == b)`` for ``a != b``.
#: Not ``__rtruediv__``: the tensor's is a reciprocal and a product (two roundings)
_DIRECT = frozenset(f"__{op}__" for op in (
    "add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "lt", "le", "gt", "ge", "eq",
    "ne"))
#: the in-place operators as the tensor's in-place operations: torch's NumPy API computes
#: into a new tensor and copies it back (three operations, a pass more over memory)
_IN_PLACE = {"__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_",
             "__itruediv__": "div_"}


def _scalars_as_python(method: Any, torch: Any) -> Any:
    """``method`` with NumPy scalar arguments given as Python numbers; an operator of
    :data:`_DIRECT` or :data:`_IN_PLACE` on float64 operands (a Python ``int`` or
    ``float`` the other) made by the tensor's own operator."""
    name = getattr(method, "__name__", "operator")
    direct = getattr(torch.Tensor, name) if name in _DIRECT else None
    in_place = getattr(torch.Tensor, _IN_PLACE[name]) if name in _IN_PLACE else None
    f64 = torch.float64

    def wrapped(self: Any, *args: Any) -> Any:
        args = tuple(a.item() if isinstance(a, np.generic) else a for a in args)
        if (direct or in_place) is not None and len(args) == 1 and self.tensor.dtype == f64:
            other = args[0]
            if type(other) is type(self) and other.tensor.dtype == f64:
                other = other.tensor
                if in_place is not None and _overlap(self.tensor, other):
                    return method(self, *args)  # (torch refuses to write what it reads)
            elif type(other) not in (int, float):
                return method(self, *args)
            if direct is not None:
                return type(self)(direct(self.tensor, other))
            in_place(self.tensor, other)
            return self
        return method(self, *args)
    wrapped.__name__ = name
    return wrapped


def _flags(a: Any) -> Any:
    """A torch NumPy array's ``flags``, as torch's NumPy API gives them, its Fortran order
    read from the strides (torch's NumPy API transposes the array: an operation of a
    recorded graph)."""
    from torch._numpy._ndarray import Flags  # noqa: PLC0415 - only with torch's namespace

    t = a.tensor
    return Flags({"C_CONTIGUOUS": t.is_contiguous(), "F_CONTIGUOUS": _fortran(t),
                  "OWNDATA": t._base is None, "WRITEABLE": True})


def _fortran(t: Any) -> bool:
    """Whether tensor ``t`` is laid out in Fortran order: its transpose contiguous, as
    torch decides contiguity (sizes of 1 skipped; an empty tensor is)."""
    if t.numel() == 0:
        return True
    expected = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


def _overlap(a: Any, b: Any) -> bool:
    """Whether tensors ``a`` and ``b`` share storage."""
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


_TORCH: TorchNumPy | None = None


def _torch_namespace() -> TorchNumPy:
    global _TORCH
    if _TORCH is None:
        _TORCH = TorchNumPy()
    return _TORCH


def _own(a: np.ndarray) -> np.ndarray:
    """``a``, or a contiguous writeable copy where it is not one (torch shares the
    memory of a NumPy array it converts, and refuses read-only memory)."""
    return a if a.flags.writeable and a.flags.c_contiguous else np.array(a, order="C")


def is_torch(xp: Any) -> bool:
    """Whether ``xp`` is torch's namespace."""
    return isinstance(xp, TorchNumPy)


def array_module(a: Any) -> Any:
    """The namespace of ``a``: NumPy, CuPy for a CuPy array (CuPy imported only
    then), torch's for a ``torch._numpy`` array or a tensor; another array's own
    (its ``__array_namespace__()``, the array API's protocol). Known by its type
    after the first (the oracle asks it dozens of times a contraction)."""
    kind = type(a)
    xp = _BY_TYPE.get(kind)
    if xp is not None:
        return xp
    mod = kind.__module__
    if mod.startswith("cupy"):
        import cupy  # noqa: PLC0415 - optional, only for device arrays

        xp = cupy
    elif mod.startswith("torch"):
        xp = _torch_namespace()
    elif isinstance(a, (np.ndarray, np.generic)) or not hasattr(kind, "__array_namespace__"):
        xp = np  # (NumPy's own subclasses too)
    else:
        return a.__array_namespace__()  # (an instance's own: not kept by type)
    _BY_TYPE[kind] = xp
    return xp


#: the namespaces of the types :func:`array_module` has met (decided by the type alone)
_BY_TYPE: dict[type, Any] = {}


def namespace_named(name: str) -> Any:
    """The namespace called ``name`` (one of :data:`NAMESPACES`)."""
    if name == "numpy":
        return np
    if name == "cupy":
        import cupy  # noqa: PLC0415 - optional

        return cupy
    if name == "torch":
        return _torch_namespace()
    raise InvalidArgument(f"namespace={name!r} is unknown; use one of {NAMESPACES}")


def as_namespace(a: Any, xp: Any, device: Any = None) -> Any:
    """``a`` (a host or device array, a tensor, a number) as an array of ``xp``;
    for torch's on ``device`` (torch's default device when None). A float array
    keeps its dtype; the caller asks float64 where it wants it."""
    if xp is np:
        return np.asarray(to_numpy(a))
    if is_torch(xp):
        torch = xp._torch
        if isinstance(a, torch.Tensor):
            t = a.detach()
        elif type(a).__module__.startswith("torch"):
            t = xp.tensor(a)
        elif type(a).__module__.startswith("cupy"):  # shared through DLPack, no host copy
            t = torch.from_dlpack(a)
        else:  # (made on the device asked for, not on torch's default device)
            t = torch.as_tensor(_own(np.asarray(a)), device=device)
        if device is not None and t.device != torch.device(device):
            t = t.to(device)
        return xp.from_tensor(t)
    if type(a).__module__.startswith("torch"):  # torch's array to CuPy: DLPack, no copy
        t = a if isinstance(a, _torch_namespace()._torch.Tensor) else _torch_namespace().tensor(a)
        t = t.detach()
        if t.device.type != "cuda":  # a host tensor (a graph's constant): copied over
            return xp.asarray(t.numpy())
        return xp.from_dlpack(t.contiguous())
    return xp.asarray(a)


def keeps_subnormals(xp: Any) -> bool:
    """Whether elementwise float64 arithmetic of ``xp`` keeps subnormal results
    rather than flushing them to zero: NumPy and torch do; CuPy compiles its
    kernels with ``-ftz=true``, which flushes single-precision subnormals only,
    so its float64 keeps them where a probe on its device finds so (a subnormal
    product and quotient, computed by its ufuncs, exact). Where they are kept,
    the error-free transformations that find exact elements (TwoProduct) hold."""
    if xp is np or is_torch(xp):
        return True
    return xp.__name__ == "cupy" and _cupy_state()[1]


_CUPY: tuple[Any, bool] | None = None


def _cupy_state() -> tuple[Any, bool]:
    """CuPy where it imports and computes on its current device (else None), and
    whether its float64 ufuncs keep subnormal results: one probe per process."""
    global _CUPY
    if _CUPY is None:
        try:
            import cupy  # noqa: PLC0415 - optional, only where a GPU evaluates

            a = cupy.asarray([2.0**-1000, 3.0], dtype=cupy.float64)
            b = cupy.asarray([2.0**-60, 2.0**-1073], dtype=cupy.float64)
            got = cupy.stack([a * b, b / 2.0]).get()  # one transfer
            keeps = bool(got[0, 0] == 2.0**-1060 and got[0, 1] == 3.0 * 2.0**-1073
                         and got[1, 1] == 2.0**-1074)
            _CUPY = (cupy, keeps)
        except Exception:  # noqa: BLE001 - not installed, no device, no driver: not used
            _CUPY = (None, False)
    return _CUPY


def gpu_namespace() -> Any:
    """The namespace a reference on a GPU is evaluated in: CuPy where it imports and
    computes (its elementwise and reduction kernels cost a fraction of torch's NumPy
    API per operation), else torch's. :data:`GPU_NAMESPACE_VARIABLE` set to ``cupy``
    insists on CuPy (where it does not import or compute, that raises), ``torch``
    chooses torch's."""
    forced = os.environ.get(GPU_NAMESPACE_VARIABLE, "").strip().lower()
    if forced not in ("", "cupy", "torch"):
        raise InvalidArgument(f"{GPU_NAMESPACE_VARIABLE}={forced!r} is unknown; use cupy or "
                              "torch, or leave it unset (CuPy where it works, else torch's)")
    if forced == "torch":
        return _torch_namespace()
    cupy = _cupy_state()[0]
    if cupy is not None:
        return cupy
    if forced == "cupy":
        raise InvalidArgument(f"{GPU_NAMESPACE_VARIABLE}=cupy, but CuPy does not import or "
                              "compute on this machine; unset it to use torch's namespace")
    return _torch_namespace()


def on_gpu(index: int) -> tuple[Any, Any]:
    """The namespace (:func:`gpu_namespace`) and its device for an evaluation on GPU
    ``index``: CuPy's device number, or torch's ``cuda:index``."""
    xp = gpu_namespace()
    if is_torch(xp):
        return xp, xp._torch.device("cuda", index)
    return xp, index


def reads_are_free(xp: Any) -> bool:
    """Whether code may read values of ``xp``'s arrays (``bool(xp.any(m))``) for
    nothing: on the host (NumPy). Elsewhere a read waits for the device (a
    synchronisation), so where it would only skip a few passes, the passes are
    made unconditionally there."""
    return xp is np


#: set while an evaluation is recorded (:mod:`~numoracle.oracle.traced.recording`)
_THOROUGH: ContextVar[bool] = ContextVar("numoracle_thorough", default=False)


def thorough() -> bool:
    """Whether a test whose only use is to skip work (work that, where it finds nothing,
    leaves every bit as it was) is to be answered "do the work" without reading the
    device: while an evaluation is recorded, so that the recording holds for any case,
    not only for those that answer the test as the recorded one did."""
    return _THOROUGH.get()


@contextmanager
def thoroughly() -> Iterator[None]:
    """Within: :func:`thorough` is true."""
    token = _THOROUGH.set(True)
    try:
        yield
    finally:
        _THOROUGH.reset(token)


def fill_where(a: Any, mask: Any, value: float) -> Any:
    """``a[mask] = value`` in place (``a`` returned), in ``a``'s namespace, without a
    synchronisation: NumPy's masked assignment on the host; CuPy's ``copyto`` with
    ``where=`` and torch's ``masked_fill_`` on a device (their boolean indexing
    counts the mask's elements on the host first)."""
    xp = array_module(a)
    if xp is np:
        a[mask] = value
    elif is_torch(xp):
        t = xp.tensor(a)
        t.masked_fill_(xp.tensor(as_namespace(mask, xp, t.device)), value)
    else:
        xp.copyto(a, value, where=xp.asarray(mask))
    return a


def device_of(a: Any) -> Any:
    """The device of an array (a torch device for torch's namespace; None on the
    host and for CuPy, whose current device is where its arrays are made)."""
    xp = array_module(a)
    return xp.tensor(a).device if is_torch(xp) else None


def filled(xp: Any, shape: tuple[int, ...], value: float, like: Any, dtype: Any = None) -> Any:
    """An array of ``xp`` of ``shape`` (float64 unless ``dtype``) holding ``value``,
    made where ``like`` (an array of ``xp``) is: on its device for torch's namespace
    (not torch's default device, nor the host), CuPy's current device, the host for
    NumPy. Nothing crosses between the host and a device."""
    if is_torch(xp):
        torch = xp._torch
        return xp.from_tensor(torch.full(shape, value, dtype=dtype or torch.float64,
                                         device=xp.tensor(like).device))
    return xp.full(shape, value, dtype=dtype or xp.float64)


#: the module of torch's NumPy arrays (``torch._numpy.ndarray``): an array whose type's
#: module it is holds a tensor (``.tensor``), and ``type(a)(tensor)`` wraps one again,
#: for an indexing or a view made on the tensor directly (torch's NumPy API normalises
#: the arguments of every call: a hundred Python calls each)
TORCH_ARRAYS = "torch._numpy._ndarray"


def like(a: Any, ref: Any) -> Any:
    """``a`` (a host array, a mask, a number) as an array of the namespace and on the
    device of ``ref``: what an operation between them needs."""
    xp = array_module(ref)
    if xp is np or (array_module(a) is xp and not is_torch(xp)):
        return a
    return as_namespace(a, xp, device_of(ref))


def to_numpy(a: Any) -> Any:
    """``a`` on the host as NumPy (itself when it is already; numbers unchanged)."""
    mod = type(a).__module__
    if mod.startswith("cupy"):
        return a.get()
    if mod.startswith("torch"):
        return _torch_namespace().asnumpy(a)
    if not isinstance(a, (np.ndarray, np.generic)) and hasattr(type(a), "__array_namespace__"):
        return a.__array_namespace__().asnumpy(a)  # another namespace's (as CuPy's asnumpy)
    return a


def on_device(xp: Any, device: Any) -> AbstractContextManager[Any]:
    """Where arrays that ``xp`` creates from nothing (zeros, ones, arange) land:
    torch's default device set to ``device`` for torch's namespace; CuPy's
    current device for CuPy; nothing to do on NumPy (nor in another namespace
    without devices)."""
    if device is None or xp is np:
        return nullcontext()
    if is_torch(xp):
        return xp._torch.device(device)  # type: ignore[no-any-return]
    if xp.__name__ != "cupy":
        return nullcontext()
    return xp.cuda.Device(device)  # type: ignore[no-any-return]


def same_memory(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` start at the same address (views of one buffer)."""
    xp = array_module(a)
    if xp is np:
        return bool(a.__array_interface__["data"][0] == b.__array_interface__["data"][0])
    if is_torch(xp):
        return bool(xp.tensor(a).data_ptr() == xp.tensor(b).data_ptr())
    return bool(a.data.ptr == b.data.ptr)


def add_at(out: Any, index: Any, values: Any) -> None:
    """``out[index] += values`` with repeated indices adding up (NumPy's
    ``add.at``), in ``out``'s namespace."""
    xp = array_module(out)
    if is_torch(xp):
        t = xp.tensor(out)
        idx = index if isinstance(index, tuple) else (index,)
        tidx = tuple(xp.tensor(as_namespace(i, xp, t.device)) for i in idx)
        vals = xp.tensor(as_namespace(values, xp, t.device)).to(t.dtype)
        t.index_put_(tidx, vals, accumulate=True)
        return
    xp.add.at(out, index, values)


def special(x: Any, name: str) -> Any:
    """The special function ``name`` (``"erf"``, ``"erfc"``) of float64 ``x`` in its
    namespace: torch's (accurate to a few float64 ulps) on the host and for torch's
    namespace, CuPy's (``cupyx.scipy.special``) on CuPy."""
    xp = array_module(x)
    if xp is np:
        import torch  # noqa: PLC0415 - the host's special functions are torch's

        t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))
        return getattr(torch.special, name)(t).numpy()
    if is_torch(xp):
        return xp.from_tensor(getattr(xp._torch.special, name)(xp.tensor(x)))
    if xp.__name__ != "cupy":  # another namespace: the host's, the result moved back
        return xp.asarray(special(np.asarray(to_numpy(x), dtype=np.float64), name))
    import cupyx.scipy.special  # noqa: PLC0415 - optional, only for CuPy arrays

    return getattr(cupyx.scipy.special, name)(x)


def release_cached_memory(keep: int = CACHED_MEMORY_KEPT) -> int:
    """Hand the device memory CuPy's default pool holds but no array uses back to
    the driver, when there is more than ``keep`` bytes of it; returns the bytes
    released (0 without CuPy loaded).

    The oracle's references on a GPU leave freed blocks in that pool, which a
    kernel allocating through another allocator (torch's, cuDNN's workspace)
    cannot use: with a realistic-size reference before it, cuDNN may find no
    engine that fits and raise. Called before every kernel call.
    """
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return 0
    pool = cupy.get_default_memory_pool()
    free = int(pool.free_bytes())
    if free <= keep:
        return 0
    pool.free_all_blocks()  # a free block split from a chunk still in use stays
    return free - int(pool.free_bytes())
