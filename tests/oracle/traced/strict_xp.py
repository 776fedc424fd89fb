"""A strict array namespace for tests on the CPU: NumPy underneath, refusing what CuPy
refuses, so that code meant for a GPU's CuPy is tried without one.

Its arrays (:class:`StrictArray`) wrap NumPy arrays and, as CuPy's:

* refuse host arrays beside them (``Unsupported type <class 'numpy.ndarray'>``) in
  their operators, in the namespace's functions and ufuncs, and in NumPy's functions
  and ufuncs handed one of them (NEP 13, NEP 18); host index arrays are taken;
* refuse a number or NumPy scalar where a function wants an array first
  (``broadcast_to(np.bool_(True), shape)``, ``clip(0.0, lo, hi)``), and a ufunc
  given numbers only;
* refuse an implicit conversion to NumPy (``np.asarray``); ``get()`` and the
  namespace's ``asnumpy`` convert explicitly;
* give reductions as 0-d arrays, never NumPy scalars.

Element reads (``bool``, ``float``, ``item``) work, as on CuPy (each a
synchronisation there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np

__all__ = ["STRICT", "StrictArray", "StrictNumPy"]

#: functions that make arrays from host data (host arrays and numbers welcome)
_CREATION = frozenset({"asarray", "array", "asanyarray", "zeros", "ones", "empty", "full",
                       "arange", "eye", "identity", "linspace", "frombuffer"})
#: functions taking host index arrays (as CuPy's take them), by the index's position
_HOST_INDEX = {"take": 1, "take_along_axis": 1, "put_along_axis": 1}
#: functions whose first argument need not be an array
_ANY_FIRST = frozenset({"broadcast_shapes", "result_type", "can_cast", "promote_types",
                        "dtype", "finfo", "iinfo", "isscalar", "ndim", "shape", "size",
                        "issubdtype", "errstate"})


def _refused(what: Any, where: str) -> TypeError:
    return TypeError(f"Unsupported type {type(what)} in {where}: a host array beside the "
                     "strict namespace's (CuPy refuses it too)")


def _no_host(obj: Any, where: str) -> None:
    """Raise where ``obj`` (nested in tuples, lists, dicts) holds a host array."""
    if isinstance(obj, np.ndarray):
        raise _refused(obj, where)
    if isinstance(obj, (tuple, list)):
        for o in obj:
            _no_host(o, where)
    elif isinstance(obj, dict):
        for o in obj.values():
            _no_host(o, where)


def _unwrap(obj: Any) -> Any:
    if isinstance(obj, StrictArray):
        return obj.a
    if isinstance(obj, tuple):
        return tuple(_unwrap(o) for o in obj)
    if isinstance(obj, list):
        return [_unwrap(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _unwrap(v) for k, v in obj.items()}
    return obj


def _wrap(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return StrictArray(obj)
    if isinstance(obj, np.generic):
        return StrictArray(np.asarray(obj))
    if isinstance(obj, tuple):
        return tuple(_wrap(o) for o in obj)
    if isinstance(obj, list):
        return [_wrap(o) for o in obj]
    return obj


def _ufunc_call(ufunc: np.ufunc, method: str, inputs: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    where = f"{ufunc.__name__}.{method}"
    _no_host(inputs, where)
    _no_host(kwargs, where)
    if method == "__call__" and not any(isinstance(i, StrictArray) for i in inputs):
        raise TypeError(f"Unsupported type {type(inputs[0])} in {where}: a ufunc of numbers "
                        "only (CuPy's ufuncs need one of its arrays)")
    out = getattr(ufunc, method)(*_unwrap(inputs), **_unwrap(kwargs))
    return None if method == "at" else _wrap(out)


class StrictArray:
    """A NumPy array behind CuPy's manners (see the module docstring)."""

    __slots__ = ("a",)
    __array_priority__ = 1000
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __array_namespace__(self, api_version: Any = None) -> StrictNumPy:
        return STRICT

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("Implicit conversion to a NumPy array is not allowed (as CuPy's); "
                        "use get() or the namespace's asnumpy")

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _ufunc_call(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return getattr(STRICT, func.__name__)(*args, **kwargs)

    # -- attributes ------------------------------------------------------------------
    shape = property(lambda self: self.a.shape)
    ndim = property(lambda self: self.a.ndim)
    size = property(lambda self: self.a.size)
    dtype = property(lambda self: self.a.dtype)
    strides = property(lambda self: self.a.strides)
    itemsize = property(lambda self: self.a.itemsize)
    nbytes = property(lambda self: self.a.nbytes)
    flags = property(lambda self: self.a.flags)
    T = property(lambda self: StrictArray(self.a.T))
    base = property(lambda self: None if self.a.base is None else self)
    data = property(lambda self: SimpleNamespace(ptr=self.a.__array_interface__["data"][0]))

    def get(self) -> np.ndarray:
        """The host copy (CuPy's explicit conversion)."""
        return self.a.copy()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # (no __array_interface__: NumPy would take the memory)
            raise AttributeError(name)
        method = getattr(self.a, name)
        if not callable(method):
            return _wrap(method)

        def call(*args: Any, **kwargs: Any) -> Any:
            _no_host((args, kwargs), f"ndarray.{name}")
            return _wrap(method(*_unwrap(args), **_unwrap(kwargs)))
        return call

    # -- element reads (a synchronisation on a GPU) -----------------------------------
    def __bool__(self) -> bool:
        return bool(self.a)

    def __float__(self) -> float:
        return float(self.a)

    def __int__(self) -> int:
        return int(self.a)

    def __index__(self) -> int:
        return self.a.__index__()

    def item(self, *args: Any) -> Any:
        return self.a.item(*args)

    def tolist(self) -> Any:
        return self.a.tolist()

    def __len__(self) -> int:
        return len(self.a)

    def __iter__(self) -> Iterator[Any]:
        return (_wrap(r) for r in self.a)

    def __repr__(self) -> str:
        return f"strict({self.a!r})"

    # -- indexing: host index arrays taken, host values refused ------------------------
    def __getitem__(self, key: Any) -> Any:
        return _wrap(self.a[_unwrap(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        _no_host(value, "__setitem__")
        self.a[_unwrap(key)] = _unwrap(value)

    # -- operators ------------------------------------------------------------------------
    def __neg__(self) -> Any:
        return _ufunc_call(np.negative, "__call__", (self,), {})

    def __pos__(self) -> Any:
        return _ufunc_call(np.positive, "__call__", (self,), {})

    def __abs__(self) -> Any:
        return _ufunc_call(np.absolute, "__call__", (self,), {})

    def __invert__(self) -> Any:
        return _ufunc_call(np.invert, "__call__", (self,), {})


def _binary(ufunc: np.ufunc) -> tuple[Callable[..., Any], Callable[..., Any],
                                       Callable[..., Any]]:
    def op(self: StrictArray, other: Any) -> Any:
        return _ufunc_call(ufunc, "__call__", (self, other), {})

    def rop(self: StrictArray, other: Any) -> Any:
        return _ufunc_call(ufunc, "__call__", (other, self), {})

    def iop(self: StrictArray, other: Any) -> Any:
        _ufunc_call(ufunc, "__call__", (self, other), {"out": (self,)})
        return self
    return op, rop, iop


for _name, _ufunc in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                      ("truediv", np.true_divide), ("floordiv", np.floor_divide),
                      ("mod", np.remainder), ("pow", np.power), ("matmul", np.matmul),
                      ("and", np.bitwise_and), ("or", np.bitwise_or),
                      ("xor", np.bitwise_xor), ("lshift", np.left_shift),
                      ("rshift", np.right_shift)):
    _op, _rop, _iop = _binary(_ufunc)
    setattr(StrictArray, f"__{_name}__", _op)
    setattr(StrictArray, f"__r{_name}__", _rop)
    setattr(StrictArray, f"__i{_name}__", _iop)
for _name, _ufunc in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                      ("ge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal)):
    setattr(StrictArray, f"__{_name}__", _binary(_ufunc)[0])


class _StrictUfunc:
    """A NumPy ufunc taking strict arrays only (numbers beside them)."""

    def __init__(self, ufunc: np.ufunc) -> None:
        self._u = ufunc
        self.__name__ = ufunc.__name__
        self.nin, self.nout = ufunc.nin, ufunc.nout

    def __call__(self, *inputs: Any, **kwargs: Any) -> Any:
        return _ufunc_call(self._u, "__call__", inputs, kwargs)

    def reduce(self, *inputs: Any, **kwargs: Any) -> Any:
        return _ufunc_call(self._u, "reduce", inputs, kwargs)

    def accumulate(self, *inputs: Any, **kwargs: Any) -> Any:
        return _ufunc_call(self._u, "accumulate", inputs, kwargs)

    def at(self, a: Any, indices: Any, b: Any = None) -> None:
        _no_host(b, f"{self.__name__}.at")
        getattr(self._u, "at")(_unwrap(a), _unwrap(indices),
                               *(() if b is None else (_unwrap(b),)))


class StrictNumPy:
    """The namespace of :class:`StrictArray` (one instance, :data:`STRICT`)."""

    __name__ = "strict"
    ndarray = StrictArray
    errstate = np.errstate

    def __init__(self) -> None:
        self.lib = SimpleNamespace(stride_tricks=SimpleNamespace(
            as_strided=self._checked(np.lib.stride_tricks.as_strided, "as_strided")))

    def asnumpy(self, a: Any) -> np.ndarray:
        """``a`` on the host (CuPy's explicit conversion)."""
        return a.a.copy() if isinstance(a, StrictArray) else np.asarray(a)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(np, name)
        if isinstance(attr, np.ufunc):
            return _StrictUfunc(attr)
        if isinstance(attr, type) or not callable(attr):
            return attr
        return self._checked(attr, name)

    @staticmethod
    def _checked(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if name not in _CREATION:
                pos = _HOST_INDEX.get(name)
                _no_host(([a for i, a in enumerate(args) if i != pos], kwargs), name)
                first = args[0] if args else None
                if name not in _ANY_FIRST:
                    items = first if isinstance(first, (list, tuple)) else (first,)
                    bad = [i for i in items if not isinstance(i, StrictArray)]
                    if bad:
                        raise TypeError(f"Argument 'array' has incorrect type (expected "
                                        f"StrictArray, got {type(bad[0]).__name__}) in {name}")
            return _wrap(fn(*_unwrap(args), **_unwrap(kwargs)))
        call.__name__ = name
        return call

    def __repr__(self) -> str:
        return "<strict array namespace (NumPy behind CuPy's manners)>"


STRICT = StrictNumPy()
