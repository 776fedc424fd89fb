"""Checking one case on one target: inputs in, kernel run, outputs judged.

:func:`check_case` never raises for a misbehaving kernel: a kernel that
raises, hangs, returns the wrong shape, dtype or device, or leaves outputs
unwritten gets a failing :class:`~numoracle.checking.verdict.Verdict` that says so.
"""

from __future__ import annotations

import re
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from ..cases.case import Case
from ..cases.layouts import accepts, from_order, layouts_for, parse, shape_in, to_order
from ..cases.target import Target
from ..errors import InvalidArgument, UnsupportedCase
from ..kernels.backends import get_backend
from ..oracle.ops import get_op
from ..oracle.precision import PrecisionModel
from ..oracle.tracked import Tracked
from ..oracle.xp import release_cached_memory
from .diagnosis import FATAL_KINDS, Fault
from .verdict import Verdict, advise, compare, diagnose

__all__ = ["check_case", "run_kernel", "judge", "earlier_parameters", "DEFAULT_TIMEOUT", "Fault",
           "cuda_error", "isolation"]

#: seconds a kernel may run before it counts as hung
DEFAULT_TIMEOUT = 120.0


_SCOPE: ContextVar[tuple[bool, float | None] | None] = ContextVar("numoracle_isolation",
                                                                  default=None)


@contextmanager
def isolation(isolate: bool, timeout: float | None = DEFAULT_TIMEOUT) -> Iterator[None]:
    """Within the block, :func:`check_case` calls that leave ``isolate`` and
    ``timeout`` at their defaults use these (a check's replay of stored repros,
    ``numoracle replay``): code that does not know about isolation still runs a
    hostile kernel in a worker process."""
    token = _SCOPE.set((isolate, timeout))
    try:
        yield
    finally:
        _SCOPE.reset(token)


class _Hung(Exception):
    pass


class _Worker:
    """One long-lived daemon thread for in-process kernel calls (thread-local
    state of the array libraries is set up once). A call is handed over with a
    pair of plain locks (the caller releases ``go``, the worker releases
    ``done``; both C-level, no queue and no condition variable per call). A
    thread that hangs cannot be stopped: it is abandoned (a daemon thread does
    not hold up interpreter exit) with its own locks and slot, so that a late
    return cannot be taken for a later call's, and a new one takes over.
    Isolated runs kill the worker process instead
    (:mod:`numoracle.checking.isolate`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # one call at a time
        self._start()

    def _start(self) -> None:
        self.go, self.done = threading.Lock(), threading.Lock()
        self.go.acquire()
        self.done.acquire()
        #: the job (fn, kwargs), then the outcome (ok, value or exception)
        self.slot: list[Any] = [None, None]
        self.thread = threading.Thread(target=self._loop, args=(self.go, self.done, self.slot),
                                       name="numoracle-kernel", daemon=True)
        self.thread.start()

    @staticmethod
    def _loop(go: threading.Lock, done: threading.Lock, slot: list[Any]) -> None:
        while True:
            go.acquire()
            fn, kwargs = slot[0]
            slot[0] = None
            try:
                with np.errstate(all="ignore"):  # IEEE exceptions of a kernel are not failures
                    slot[1] = (True, fn(**kwargs))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, SystemExit included
                slot[1] = (False, exc)
            done.release()

    def call(self, fn: Any, kwargs: Mapping[str, Any], timeout: float | None) -> Any:
        with self.lock:
            slot, done = self.slot, self.done
            slot[0] = (fn, kwargs)
            self.go.release()
            wait = -1 if timeout is None else min(max(timeout, 0.0), threading.TIMEOUT_MAX)
            try:
                returned = done.acquire(timeout=wait)
            except BaseException:  # interrupted (KeyboardInterrupt): its result must not
                self._start()      # be taken for the next call's, so the thread goes
                raise
            if not returned:
                self._start()  # the hung thread is left behind (a daemon), never reused
                raise _Hung(f"the kernel did not return within the timeout of {timeout:g} s "
                            "(hung? set timeout= or --timeout)")
            ok, value = slot[1]
            slot[1] = None
        if ok:
            return value
        raise value


_WORKER: _Worker | None = None  # started on the first in-process call


def _call_with_timeout(fn: Any, kwargs: Mapping[str, Any], timeout: float | None) -> Any:
    """Run ``fn(**kwargs)`` in the worker thread; raise _Hung past ``timeout``."""
    global _WORKER  # one worker thread per process, made on first use
    if _WORKER is None:
        _WORKER = _Worker()
    return _WORKER.call(fn, kwargs, timeout)


def _call_here(fn: Any, kwargs: Mapping[str, Any], timeout: float | None) -> Any:
    """Run ``fn(**kwargs)`` in this thread (a worker process, whose parent keeps the time)."""
    with np.errstate(all="ignore"):
        return fn(**kwargs)


_CUDA_NAME = re.compile(r"\b(cudaError\w+|CUDA_ERROR_\w+|CUBLAS_STATUS_\w+|CUDNN_STATUS_\w+)")


def cuda_error(exc: BaseException) -> str | None:
    """The name of the CUDA error ``exc`` reports (``cudaErrorIllegalAddress``,
    or ``CUDA error: an illegal memory access was encountered`` as torch words
    it), or None when it is no CUDA error."""
    text = f"{type(exc).__name__}: {exc}"
    m = _CUDA_NAME.search(text)
    if m:
        return m.group(1)
    m = re.search(r"CUDA error: ([^\n]*)", text)
    if m:
        return f"CUDA error: {m.group(1).strip()}"
    if type(exc).__name__ in ("CUDARuntimeError", "CUDADriverError", "AcceleratorError"):
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


_OOM = re.compile(r"cudaErrorMemoryAllocation|ALLOC_FAILED|CUDA_ERROR_OUT_OF_MEMORY|"
                  r"out of memory|OutOfMemoryError", re.IGNORECASE)


def device_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says the GPU ran out of memory (CUDA, cuBLAS, cuDNN, torch,
    CuPy wordings): a fact about the machine and what else runs on it, not about
    the kernel's arithmetic."""
    return not isinstance(exc, MemoryError) and bool(_OOM.search(f"{type(exc).__name__}: {exc}"))


def _raised(exc: BaseException, backend: Any, during: str) -> Fault:
    """The fault an exception out of the kernel (or out of the synchronisation
    after it) stands for."""
    if device_out_of_memory(exc):
        return Fault(f"the GPU ran out of memory during the kernel: {type(exc).__name__}: "
                     f"{str(exc).splitlines()[0] if str(exc) else ''}", "oom")
    name = cuda_error(exc)
    if name is not None:
        return Fault(f"the kernel {'raised' if during == 'call' else 'left'} a CUDA error: "
                     f"{name}", "cuda")
    if isinstance(exc, SystemExit):
        return Fault(f"the kernel called sys.exit({exc.code!r})", "raise", exception="SystemExit")
    if isinstance(exc, ValueError) and "read-only" in str(exc):
        where = _kernel_line(exc)
        return Fault("the kernel wrote to one of its inputs, which are read-only: "
                     f"ValueError: {exc}{where}", "input")
    return Fault(f"the kernel raised {type(exc).__name__}: {exc}", "raise",
                 exception=type(exc).__name__)


def _kernel_line(exc: BaseException) -> str:
    """`` (at file:line)`` of the innermost frame outside NumPy, or empty."""
    tb = traceback.extract_tb(exc.__traceback__)
    frames = [f for f in tb if "numpy" not in f.filename.replace("\\", "/").split("/")]
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def run_kernel(case: Case, target: Target, inputs: Mapping[str, np.ndarray],
               timeout: float | None = DEFAULT_TIMEOUT, *,
               isolate: bool = False) -> tuple[dict[str, np.ndarray] | None, Fault | None]:
    """Run ``target`` on the case's inputs; return (host outputs, None) or
    (None, a :class:`Fault` saying what went wrong).

    Parameters
    ----------
    case, target, inputs
        The case, the kernel under test and the case's host inputs.
    timeout : float or None
        Seconds the kernel may take before it counts as hung (None: no limit).
        In-process a hung call is abandoned in its daemon thread; isolated, its
        worker process is killed.
    isolate : bool
        Run the kernel in a worker process (:mod:`numoracle.checking.isolate`):
        a segfault, abort, ``os._exit``, a kill or a sticky CUDA error ends that
        process only and comes back as a failure.

    A kernel that writes to an input fails: NumPy inputs are handed over
    read-only, and every input is compared with its values after the call.
    """
    if isolate:
        from .isolate import run_isolated  # noqa: PLC0415 - isolate imports this module

        return run_isolated(case, target, inputs, timeout=timeout)
    return _run_kernel(case, target, inputs, timeout, _call_with_timeout)


def _run_kernel(case: Case, target: Target, inputs: Mapping[str, np.ndarray],
                timeout: float | None,
                call: Any) -> tuple[dict[str, np.ndarray] | None, Fault | None]:
    """:func:`run_kernel` with the kernel called through ``call(fn, kwargs, timeout)``."""
    op = get_op(case.op)
    backend = get_backend(target.backend)
    storage = target.precision.storage
    args: dict[str, Any] = {}
    handed: dict[str, np.ndarray] = {}  # each input as the kernel should still see it
    for name, arr in inputs.items():
        axes = op.input_axes.get(name)
        args[name], order = _to_target(backend, storage, arr, case.layout(name),
                                       target.accepted_layouts(name), axes)
        if isinstance(args[name], np.ndarray):
            args[name].flags.writeable = False
        handed[name] = to_order(np.asarray(arr, dtype=np.float64), axes, order)
    if op.passes_params:
        args["params"] = dict(case.params)
    release_cached_memory()  # the kernel gets the device memory the oracle no longer uses
    try:
        out = call(target.fn, args, timeout)
    except _Hung as exc:
        return None, Fault(str(exc), "hang")
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a raising kernel is a failing verdict
        return None, _raised(exc, backend, "call")
    try:
        backend.synchronize()
    except Exception as exc:  # noqa: BLE001 - a sticky error after the call is the kernel's
        return None, _raised(exc, backend, "sync")
    written = _written_inputs(backend, args, handed)
    if written:
        return None, Fault(written, "input")
    if not isinstance(out, Mapping):
        return None, Fault(f"the kernel returned {type(out).__name__}; it must return a dict "
                           "of outputs by name", "output")
    defined = op.outputs(case.params)  # e.g. no grad_bias for a case without a bias
    wanted = [k for k in (target.outputs or defined) if k in defined]
    missing = [k for k in wanted if k not in out]
    if missing:
        return None, Fault(f"the kernel did not return {missing} (returned {sorted(out)})",
                           "output")
    expected = op.output_shapes(case.params)
    host: dict[str, np.ndarray] = {}
    for name in wanted:
        arr = out[name]
        axes = op.output_axes.get(name)
        order = target.output_layouts.get(name) if axes is not None else None
        problem = backend.check_output(arr, storage=storage,
                                       shape=shape_in(expected[name], axes, order))
        if problem:
            where = f" (in the target's axis order {order})" if order not in (None, axes) else ""
            return None, Fault(f"output {name!r}{where}: {problem}", "output")
        host[name] = np.ascontiguousarray(from_order(backend.to_host(arr), axes, order))
    return host, None


def _written_inputs(backend: Any, args: Mapping[str, Any],
                    handed: Mapping[str, np.ndarray]) -> str | None:
    """A sentence naming the first input whose values changed during the call, or None."""
    for name, before in handed.items():
        try:
            now = backend.to_host(args[name])
        except Exception:  # noqa: BLE001 - an input the kernel replaced or freed: not comparable
            continue
        if now.shape != before.shape:
            continue
        same = (now == before) | (np.isnan(now) & np.isnan(before))
        changed = int(now.size - np.count_nonzero(same))
        if changed:
            return (f"the kernel wrote to its input {name!r} at {changed} element"
                    f"{'s' if changed != 1 else ''} of {now.size}: inputs must not be changed")
    return None


def _to_target(backend: Any, storage: Any, host: np.ndarray, layout: str,
               accepted: tuple[str, ...], axes: str | None) -> tuple[Any, str | None]:
    """``host`` (canonical axis order ``axes``) as the target takes it: in the
    case's layout where the target accepts it, else in its first accepted one;
    and the axis order it is in."""
    if not accepts(accepted, layout, axes):
        valid = [a for a in accepted if a in layouts_for(axes)]
        layout = valid[0] if valid else "C"
    lay = parse(layout, axes)
    return backend.to_device(to_order(host, axes, lay.order), storage, lay.memory), lay.order


#: multiply-adds above which the float64 reference runs on a GPU, when CuPy has one
GPU_REFERENCE_WORK = 1 << 26


def _reference_inputs(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, Any]:
    """The inputs where the reference should be computed: on the GPU (CuPy,
    float64) for large cases when one is usable, else on the host."""
    op = get_op(case.op)
    shapes = op.output_shapes(case.params)
    work = sum(int(np.prod(shapes[k])) * n for k, n in op.reductions(case.params).items())
    if work < GPU_REFERENCE_WORK or get_backend("cupy").available() is not None:
        return inputs
    import cupy  # noqa: PLC0415 - optional, and only for large cases

    return {k: cupy.asarray(v) for k, v in inputs.items()}


def judge(case: Case, model: PrecisionModel, inputs: Mapping[str, np.ndarray],
          got: Mapping[str, np.ndarray], *, with_diagnosis: bool = True) -> dict[str, Any]:
    """Compare host outputs with the reference under ``model``; per output verdicts."""
    op = get_op(case.op)
    names = tuple(got)
    ref_inputs = _reference_inputs(case, inputs)

    computed: dict[PrecisionModel, dict[str, Tracked]] = {}

    def reference_for(m: PrecisionModel) -> dict[str, Tracked]:
        if m not in computed:  # every output's diagnosis tries the same models
            refs = op.reference(ref_inputs, case.params, m, names)
            computed[m] = {k: v.to_host() for k, v in refs.items()}
        return computed[m]

    # the claimed model's verdicts where the reference lives (on a GPU: the
    # outputs go there, not the reference's arrays to the host); a diagnosis,
    # which tries several models, works on the host
    claimed = op.reference(ref_inputs, case.params, model, names)
    spread = model.nan_spreads and not all(bool(np.isfinite(v).all()) for v in inputs.values())
    verdicts = {name: compare(name, got[name], claimed[name], probabilistic=model.probabilistic,
                              nan_may_spread=spread) for name in names}
    if with_diagnosis or not all(v.passed for v in verdicts.values()):
        computed[model] = {k: v.to_host() for k, v in claimed.items()}
    del claimed
    for name, v in verdicts.items():
        if with_diagnosis or not v.passed:
            def output_reference(m: PrecisionModel, _n: str = name) -> Tracked:
                return reference_for(m)[_n]

            diagnose(v, got[name], model, output_reference, ladder=op.precision_ladder,
                     nan_may_spread=spread)
    return verdicts


def earlier_parameters(case: Case, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The case's inputs as a target saw them before a parameter update: every
    parameter of the op (its ``parameters``: a layer's weight and bias) replaced
    by other values of the storage format (negated, zeros made ones), the
    data inputs unchanged."""
    names = get_op(case.op).parameters
    out = dict(inputs)
    for name in names:
        if name in inputs:
            arr = inputs[name]
            out[name] = np.where(arr == 0, np.ones_like(arr), -arr)
    return out


def _engine(case: Case, target: Target, inputs: Mapping[str, np.ndarray],
            timeout: float | None) -> str | None:
    """Which engine the library ran for this case: the kernel called once more,
    in this process, under the target's probe."""
    assert target.engine is not None
    try:
        return target.engine(lambda: run_kernel(case, target, inputs, timeout))
    except Exception as exc:  # noqa: BLE001 - a probe that fails only loses the note
        return f"unknown ({type(exc).__name__}: {exc})"


def check_case(case: Case, target: Target, *, timeout: float | None = DEFAULT_TIMEOUT,
               with_diagnosis: bool = False, update_first: bool = True,
               inputs: Mapping[str, np.ndarray] | None = None,
               isolate: bool | None = None) -> Verdict:
    """Run one case on one target and judge every output it returns.

    For ops with trained parameters (conv2d's weight and bias) the target is
    first called with other values of them (:func:`earlier_parameters`) and
    that result is dropped: the judged call comes after a parameter update,
    so a kernel that keeps stale parameters (a cached weight buffer or
    descriptor) fails on a single case, and its repro replays in any process.

    Parameters
    ----------
    case : Case
        The case; its storage format must be the target's.
    target : Target
        The kernel under test.
    timeout : float or None
        Seconds before a kernel counts as hung (None: no limit); left at the
        default, the enclosing :func:`isolation` block's.
    with_diagnosis : bool
        Also diagnose passing outputs (failing ones always are).
    update_first : bool
        Make the earlier call with other parameter values (ops with parameters only).
    inputs : dict of arrays, optional
        The inputs to use instead of the case's generated ones (a case supplied
        from outside, as ``numoracle shrink`` takes it); shapes must be the case's.
    isolate : bool or None
        Run the kernel in a worker process (:func:`run_kernel`); None: as the
        enclosing :func:`isolation` block says (in-process outside one).

    Raises
    ------
    UnsupportedCase
        When the oracle cannot judge the case, or the GPU ran out of memory in
        the kernel or the oracle (what else runs on the GPU decides that, not
        the kernel's arithmetic): a runner counts the case as unjudged.
    """
    if case.op != target.op:
        raise InvalidArgument(f"case is for op {case.op!r} but target {target.name!r} "
                              f"computes {target.op!r}")
    if case.storage != target.precision.storage.name:
        raise InvalidArgument(
            f"case storage {case.storage!r} differs from target {target.name!r}'s storage "
            f"{target.precision.storage.name!r}; draw cases with storage="
            f"{target.precision.storage.name!r}"
        )
    t0 = time.perf_counter()
    scope = _SCOPE.get()
    if isolate is None:
        isolate = scope is not None and scope[0]
    if scope is not None and timeout == DEFAULT_TIMEOUT:
        timeout = scope[1]
    inputs = case.inputs() if inputs is None else dict(inputs)
    got: dict[str, np.ndarray] | None = None
    error: Fault | None = None
    if update_first and get_op(case.op).parameters:
        _, error = run_kernel(case, target, earlier_parameters(case, inputs), timeout,
                              isolate=isolate)  # outputs dropped
        if isinstance(error, Fault) and error.kind in FATAL_KINDS:  # one timeout per case
            error = Fault(f"{error} (in the call before the judged one, with other "
                          "parameter values)", error.kind)
        else:
            error = None
    if error is None:
        got, error = run_kernel(case, target, inputs, timeout, isolate=isolate)
    if isinstance(error, Fault) and error.kind == "oom":
        raise UnsupportedCase(f"{error}; the case is not judged (a GPU shared by fewer "
                              "processes, or smaller cases, leave it the memory it needs)")
    verdict = Verdict(case=case, target=target.name, op=target.op,
                      precision=target.precision.name, passed=False, error=error, got=got,
                      model=target.precision)
    if got is not None:
        try:
            verdict.outputs = judge(case, target.precision, inputs, got,
                                    with_diagnosis=with_diagnosis)
        except Exception as exc:
            if not device_out_of_memory(exc):
                raise
            raise UnsupportedCase(f"the oracle ran out of GPU memory for this case "
                                  f"({type(exc).__name__}); the case is not judged") from exc
        verdict.passed = all(v.passed for v in verdict.outputs.values())
        advise(verdict, target.backend)  # e.g. CuPy's flush-to-zero: what to claim
        if not verdict.passed and target.engine is not None and not isolate:
            verdict.engine = _engine(case, target, inputs, timeout)
    verdict.seconds = time.perf_counter() - t0
    return verdict
