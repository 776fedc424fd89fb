"""Shared-library targets: a C-ABI symbol in a ``.so`` called through ctypes.

The kernel is called once per case with the arguments its
:class:`~numoracle.foreign.spec.ArgSpec` lists: array pointers (host pointers
for CPU kernels, device pointers of CuPy arrays or torch CUDA tensors for GPU
kernels; NULL for an array the case does not have), dimensions and scalars.
Outputs are allocated by numoracle in the declared layout and poisoned with NaN
before every call, so an element the kernel leaves unwritten fails. A GPU call
is synchronised and error-checked after it returns (the device's own error,
and the library's ``error_symbol`` when given).

Isolation
---------
A C kernel handed a spec that does not match it (``size_t`` dimensions where
the spec says ``int32``, two dimensions swapped) reads and writes out of
bounds. So a CPU call runs, by default, in the isolation worker process
(:mod:`numoracle.checking.isolate`): a segfault, an abort or a hang ends the
worker, and the case gets a failing verdict that says so, with a repro. The
worker is started when the target is made, so a script that cannot start it
(no ``if __name__ == "__main__":`` guard) learns that at once, before any
case. ``isolate=False`` calls the library in this process, an explicit
choice: a crash there ends the process. A GPU call cannot be isolated alone
(its arguments are this process's device pointers): :func:`numoracle.foreign.run`
runs a GPU target whole in the worker instead, which finds it again by its
spec file.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..cases.layouts import shape_in
from ..checking.diagnosis import FaultKind
from ..errors import InvalidArgument
from ..oracle.formats import format_of
from ..oracle.ops import get_op
from ..oracle.precision import PrecisionModel, get_model
from ..targets.backends import get_backend
from ..targets.target import Target
from .declare import declared_op, fixed_params, foreign_target
from .rebuild import write_source
from .spec import CTYPES, FLOAT_CTYPES, ArgSpec, ParamReader, host_dtype

__all__ = ["shared_library_target", "ForeignError", "load_symbol"]

DEVICES = {"cpu": ("numpy",), "cuda": ("cupy", "torch-cuda")}


class ForeignError(RuntimeError):
    """A foreign kernel reported an error (a status, a CUDA error, a crash, an
    exit status); the check turns it into a failing verdict. ``fault_kind``
    is the kind of that verdict's fault (``"crash"``, ``"hang"``: a runner
    budgets those; ``"raise"`` otherwise)."""

    def __init__(self, message: str, fault_kind: str = "raise") -> None:
        super().__init__(message)
        self.fault_kind = fault_kind

    def __reduce__(self) -> tuple[Any, ...]:
        return (ForeignError, (str(self), self.fault_kind))


def load_symbol(path: str | Path, symbol: str) -> Any:
    """The ctypes function ``symbol`` of the library at ``path``; InvalidArgument
    with the reason when the library cannot be loaded or lacks the symbol."""
    p = Path(path)
    if not p.is_file():
        raise InvalidArgument(f"shared library {str(path)!r} does not exist; build it first "
                              "(e.g. gcc -O2 -shared -fPIC kernel.c -o kernel.so) and give "
                              "its path")
    try:
        lib = ctypes.CDLL(str(p.resolve()))
    except OSError as exc:
        raise InvalidArgument(f"shared library {str(path)!r} cannot be loaded: {exc}; is it "
                              "a shared object for this machine, are its dependencies on "
                              "LD_LIBRARY_PATH (ldd shows them)?") from None
    try:
        return getattr(lib, symbol)
    except AttributeError:
        raise InvalidArgument(f"shared library {str(path)!r} has no symbol {symbol!r}; "
                              "`nm -D` lists what it exports (C++: declare it extern \"C\"; "
                              "Fortran: bind(c, name=...); Rust: #[no_mangle] pub extern "
                              "\"C\")") from None


def _as_memory(arr: Any, memory: str, backend: str) -> Any:
    """``arr`` with the memory order the kernel reads (a copy only where needed)."""
    if backend == "torch-cuda":
        if memory == "F":
            rev = tuple(range(arr.dim() - 1, -1, -1))
            return arr.permute(*rev).contiguous().permute(*rev)
        return arr.contiguous()
    xp: Any = np
    if backend == "cupy":
        import cupy  # noqa: PLC0415 - GPU only

        xp = cupy
    return xp.asfortranarray(arr) if memory == "F" else xp.ascontiguousarray(arr)


def _pointer(arr: Any, backend: str) -> int:
    if backend == "torch-cuda":
        return int(arr.data_ptr())
    if backend == "cupy":
        return int(arr.data.ptr)
    return int(arr.ctypes.data)


def _poisoned(shape: tuple[int, ...], dtype: str, memory: str, backend: str) -> Any:
    if backend == "numpy":
        return np.full(shape, np.nan, dtype=host_dtype(dtype), order=_order(memory))
    out = get_backend(backend).poisoned(shape[::-1] if memory == "F" else shape,
                                        format_of(dtype))
    if memory != "F":
        return out
    rev = tuple(range(len(shape) - 1, -1, -1))
    return out.permute(*rev) if backend == "torch-cuda" else out.transpose(rev)


def _order(memory: str) -> Any:
    return "F" if memory == "F" else "C"


def _stream(backend: str) -> int:
    if backend == "cupy":
        import cupy  # noqa: PLC0415 - GPU only

        return int(cupy.cuda.get_current_stream().ptr)
    if backend == "torch-cuda":
        import torch  # noqa: PLC0415 - GPU only

        return int(torch.cuda.current_stream().cuda_stream)
    return 0


class _Call:
    """The function a shared-library target runs: arguments by the spec, a ctypes call."""

    def __init__(self, spec: ArgSpec, path: str, symbol: str, backend: str,
                 returns: str | None, error_symbol: str | None, isolate: bool,
                 timeout: float, fixed: Mapping[str, Any] | None = None) -> None:
        self.foreign_spec = spec
        self.path, self.symbol, self.backend = path, symbol, backend
        self.returns, self.error_symbol = returns, error_symbol
        self.reader = ParamReader(spec.op)
        self.op = get_op(spec.op)
        self.isolate, self.timeout = isolate, timeout
        self.fixed = dict(fixed or {})
        self.func = load_symbol(path, symbol)
        self.func.restype = ctypes.c_int if returns == "status" else None
        self.func.argtypes = [ctypes.c_void_p if a.kind in ("array", "stream")
                              else CTYPES[a.ctype] for a in spec.args]
        self.check_error = load_symbol(path, error_symbol) if error_symbol else None
        if self.check_error is not None:
            self.check_error.restype = ctypes.c_int
            self.check_error.argtypes = []
        if isolate:
            from ..checking.isolate import start  # noqa: PLC0415 - multiprocessing on request

            start(_call_in_worker)  # a worker that cannot start is told now, not per case

    def __call__(self, **inputs: Any) -> dict[str, Any]:
        params = self.reader.read_fixed(inputs, self.fixed)
        spec = self.foreign_spec
        if not spec.stepped:
            return self._call(params, inputs, dict(self.op.output_shapes(params)))
        # one call per step: that step's rows in, the in-out arrays carried on
        stepped_in, stepped_out = spec.stepped_arrays
        out_shapes = {k: (v[1:] if k in stepped_out else v)
                      for k, v in self.op.output_shapes(params).items()}
        carried = {n: inputs[n] for n in spec.inouts if inputs.get(n) is not None}
        rows: dict[str, list[Any]] = {}
        for k in range(int(params["steps"])):
            step = {n: (v[k] if n in stepped_in and v is not None else v)
                    for n, v in inputs.items()}
            step.update(carried)
            got = self._call(params, step, out_shapes)
            for n, v in got.items():
                rows.setdefault(n, []).append(np.array(v))
            carried = {n: got[n] for n in carried if n in got}
        return {n: (np.stack(v) if n in stepped_out else v[-1]) for n, v in rows.items()}

    def _call(self, params: Mapping[str, Any], inputs: Mapping[str, Any],
              out_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Any]:
        """One call of the kernel on ``inputs``; its outputs, shaped ``out_shapes``."""
        defined = self.op.outputs(params)
        spec = self.foreign_spec
        inouts = spec.inouts
        values: list[Any] = []
        outs: dict[str, Any] = {}
        for a in spec.args:
            if a.kind == "array":
                order, memory = spec.order_and_memory(a.name)
                if a.name in inouts:  # a copy of the input, updated in place
                    arr = inputs.get(a.name)
                    if arr is None or a.name not in defined:
                        values.append(None)
                        continue
                    arr = np.array(arr, dtype=host_dtype(spec.dtype), order=_order(memory))
                    outs[a.name] = arr
                elif a.name in spec.outputs:
                    if a.name not in defined:
                        values.append(None)
                        continue
                    shape = shape_in(out_shapes[a.name], spec.axes(a.name), order)
                    arr = _poisoned(shape, spec.dtype, memory, self.backend)
                    outs[a.name] = arr
                else:
                    arr = inputs.get(a.name)
                    if arr is None:
                        values.append(None)
                        continue
                    arr = _as_memory(arr, memory, self.backend)
                values.append(arr)
            elif a.kind == "dim":
                values.append(("float" if a.ctype in FLOAT_CTYPES else "int", a.ctype,
                               a.dim_value(params)))
            elif a.kind == "scalar":
                values.append(("float" if a.ctype.startswith("float") else "int", a.ctype,
                               a.value))
            else:
                values.append(("stream", "", _stream(self.backend)))
        from ..checking.isolate import in_worker  # noqa: PLC0415 - multiprocessing on request

        if self.isolate and not in_worker():
            from ..checking.isolate import call_isolated  # noqa: PLC0415 - only on request

            wanted = {name: i for i, v in enumerate(values) for name, o in outs.items()
                      if v is o}
            result, fault = call_isolated(
                _call_in_worker, {"path": self.path, "symbol": self.symbol,
                                  "returns": self.returns, "values": values, "wanted": wanted},
                timeout=self.timeout)
            if fault is not None:
                kind = getattr(fault, "kind", "raise")
                hint = _CRASH_HINT if kind in (FaultKind.CRASH, FaultKind.HANG) else ""
                raise ForeignError(f"{self.symbol}: {fault}{hint}", kind)
            status, outs = result
        else:
            status = self.func(*[_c_value(v, self.backend) for v in values])
        if self.returns == "status" and status != 0:
            raise ForeignError(f"{self.symbol} returned status {status}")
        if self.backend != "numpy":
            try:
                get_backend(self.backend).synchronize()
            except Exception as exc:  # noqa: BLE001 - a CUDA error is a failing verdict
                raise ForeignError(f"CUDA error after {self.symbol}: {exc}") from None
            if self.check_error is not None:
                code = self.check_error()
                if code != 0:
                    raise ForeignError(f"{self.error_symbol}() reports error {code} "
                                       f"after {self.symbol}")
        return dict(outs.items())


_CRASH_HINT = ("; a C kernel crashes or hangs this way when the spec does not match its "
               "signature: check the order of the arguments and the integer width of each "
               "dimension (int32 unless the spec says ':int64' or ':size_t')")

_LOADED: dict[tuple[str, str, str | None], Any] = {}


def _call_in_worker(path: str, symbol: str, returns: str | None, values: list[Any],
                    wanted: dict[str, int]) -> tuple[int, dict[str, np.ndarray]]:
    """One library call in the isolation worker (:mod:`numoracle.checking.isolate`):
    host arrays in, the status and the output arrays out."""
    key = (path, symbol, returns)
    if key not in _LOADED:
        func = load_symbol(path, symbol)
        func.restype = ctypes.c_int if returns == "status" else None
        _LOADED[key] = func
    func = _LOADED[key]
    func.argtypes = [CTYPES[v[1]] if isinstance(v, tuple) and v[0] != "stream"
                     else ctypes.c_void_p for v in values]
    status = func(*[_c_value(v, "numpy") for v in values])
    return int(status or 0), {k: values[i] for k, i in wanted.items()}


def _c_value(v: Any, backend: str) -> Any:
    if v is None:
        return None
    if isinstance(v, tuple):
        return v[2] if v[0] != "stream" else (v[2] or None)
    return _pointer(v, backend)


def shared_library_target(
    path: str | Path,
    symbol: str,
    *,
    op: str | None = None,
    args: Sequence[str],
    precision: str | PrecisionModel | Mapping[str, Any] = "fp32",
    layouts: Mapping[str, str] | str | None = None,
    dtypes: Mapping[str, str] | str | None = None,
    name: str | None = None,
    device: str = "cpu",
    backend: str | None = None,
    returns: str | None = None,
    error_symbol: str | None = None,
    isolate: bool | None = None,
    timeout: float = 60.0,
    max_reduction: int | None = None,
    params: Mapping[str, Any] | None = None,
    spec_dir: str | Path | None = None,
    source: str | None = None,
    reference: Any = None,
    inputs: Any = None,
    dims: Mapping[str, Any] | None = None,
    grads: Sequence[str] = (),
) -> Target:
    """A :class:`~numoracle.targets.target.Target` that calls ``symbol`` in the library ``path``.

    Parameters
    ----------
    path : str or Path
        The shared library (``.so``).
    symbol : str
        The exported C-ABI function.
    op : str or None
        The op it computes (``linear``, ``matmul``, ``conv2d``); with
        ``reference``, the name of the traced op.
    args : sequence of str
        Its arguments in order (see :mod:`numoracle.foreign.spec`): arrays by op
        input/output name, dimensions by op parameter name, ``"stream"``, scalars.
    precision : str, PrecisionModel or dict
        The model it claims; its storage format is the arrays' dtype.
    layouts : mapping or str, optional
        Layout of each array (``"C"``, ``"F"``, ``"OIHW:F"``, ``"HWIO"``...), or
        ``"F"`` for every array (Fortran); default row-major.
    dtypes : mapping or str, optional
        The arrays' dtypes, checked against the storage format.
    name : str, optional
        Name in reports (default ``"<symbol>@<library file>"``).
    device : str
        ``"cpu"`` (host pointers) or ``"cuda"`` (device pointers).
    backend : str, optional
        For ``device="cuda"``: ``"cupy"`` (default) or ``"torch-cuda"``.
    returns : str or None
        ``"status"``: the function returns an int, non-zero meaning failure;
        None: it returns nothing.
    error_symbol : str, optional
        A function ``int f(void)`` in the same library called after a GPU call
        (``cudaGetLastError`` of the library's own runtime); non-zero fails.
    isolate : bool or None
        Make each library call in the isolation worker process: a crash or a
        hang becomes a failing verdict (see Isolation above). None (default):
        isolated on the CPU; a GPU target is isolated whole by
        :func:`numoracle.foreign.run`. False: calls in this process.
    timeout : float
        Seconds an isolated call may take.
    max_reduction : int or None
        Longest reduction to test.
    params : mapping, optional
        Op parameters the kernel fixes (``{"optimizer": "sgd", "momentum": 0.0}``
        for a plain SGD step): :func:`numoracle.foreign.run` draws only such
        cases, and a case with other values is not judged (UnsupportedCase).
    spec_dir : path, optional
        Where the spec file that repros rebuild the target from goes
        (default ``.numoracle/targets``).
    reference, inputs, dims, grads : optional
        A PyTorch reference that is the op (as for
        :func:`numoracle.check_kernel`): ``args`` then name its inputs, its
        outputs (``out``, ``out0``, ...) and its dimensions.

    Raises
    ------
    InvalidArgument
        For a spec that does not match the op, a library that cannot be loaded
        or a missing symbol: before any call.
    """
    op = declared_op(op, what="the symbol", reference=reference, inputs=inputs, dims=dims,
                     grads=grads)
    if not isinstance(symbol, str) or not symbol:
        raise InvalidArgument(f"symbol={symbol!r} must name the exported function")
    if device not in DEVICES:
        raise InvalidArgument(f"device={device!r} must be 'cpu' or 'cuda'")
    be = backend or DEVICES[device][0]
    if be not in DEVICES[device]:
        raise InvalidArgument(f"backend={be!r} does not run on device {device!r}; use one of "
                              f"{DEVICES[device]}")
    if returns not in (None, "status"):
        raise InvalidArgument(f"returns={returns!r} must be None (void) or 'status' (an int, "
                              "non-zero on failure)")
    if isolate not in (None, True, False):
        raise InvalidArgument(f"isolate={isolate!r} must be True, False or None (isolated "
                              "on the CPU)")
    if isolate and device != "cpu":
        raise InvalidArgument("isolate=True runs the call in a child process, which cannot "
                              "use this process's device pointers; isolate CPU kernels only "
                              "(numoracle.foreign.run isolates a GPU target whole)")
    isolate = device == "cpu" if isolate is None else isolate
    model = get_model(precision)
    spec = ArgSpec.build(op, args, precision=model, layouts=layouts, dtypes=dtypes)
    fixed = fixed_params(op, params)
    if (spec.stepped or spec.inouts) and be != "numpy":
        raise InvalidArgument(f"args={list(args)!r}: in-out arrays and one-step-per-call "
                              "kernels are supported on the CPU only")
    fn = _Call(spec, str(Path(path).resolve()), symbol, be, returns, error_symbol, isolate,
               timeout, fixed)
    name = name or f"{symbol}@{Path(path).name}"
    if source is None:
        source = write_source({"kind": "shared_library", "path": fn.path, "symbol": symbol,
                               "op": op, "args": [a.text for a in spec.args],
                               "precision": model.to_dict(), "layouts": dict(spec.layouts),
                               "name": name, "device": device, "backend": be,
                               "returns": returns, "error_symbol": error_symbol,
                               "isolate": isolate, "timeout": timeout,
                               "max_reduction": max_reduction,
                               "params": fixed or None}, spec_dir)
    return foreign_target(spec, fn, name=name, backend=be, model=model,
                          max_reduction=max_reduction, source=source,
                          description=f"{symbol} in {fn.path}",
                          available=get_backend(be).available)
