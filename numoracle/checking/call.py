"""Calling a kernel on one case: inputs to its device, the call, outputs back.

:func:`call_kernel` does what :func:`numoracle.checking.check.run_kernel`
promises, for a caller that chooses where the call happens:
:func:`call_in_thread` runs it in this process, in one long-lived thread with
a timeout; :func:`call_here` runs it in the calling thread (the isolation
worker process, :mod:`numoracle.checking.isolate`, whose parent keeps the
time). What went wrong comes back as a :class:`Fault`, a sentence with its
kind, never as an exception: a kernel that raises, hangs, writes to its
inputs, or returns the wrong shape, dtype or device is a failing verdict.

This module is the bottom of the checking layer: :mod:`.check` and
:mod:`.isolate` both import it, and it imports neither.
"""

from __future__ import annotations

import ctypes
import re
import threading
import traceback
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..cases.case import Case
from ..cases.layouts import accepts, from_order, layouts_for, parse, shape_in, to_order
from ..errors import UnsupportedCase
from ..oracle.ops import get_op
from ..oracle.xp import release_cached_memory
from ..targets.backends import get_backend
from ..targets.target import Target
from .diagnosis import Fault, FaultKind

__all__ = ["DEFAULT_TIMEOUT", "call_kernel", "call_in_thread", "call_here", "cuda_error",
           "device_out_of_memory"]

#: seconds a kernel may run before it counts as hung
DEFAULT_TIMEOUT = 120.0


class _Hung(Exception):
    pass


class _Abandoned(BaseException):
    """Raised inside an abandoned kernel thread to stop it (a ``BaseException``,
    so that a kernel's own ``except Exception`` does not swallow it)."""


class _Worker:
    """One long-lived daemon thread for in-process kernel calls (thread-local
    state of the array libraries is set up once). A call is handed over with a
    pair of plain locks (the caller releases ``go``, the worker releases
    ``done``; both C-level, no queue and no condition variable per call). A
    thread that hangs is abandoned with its own locks and slot, so that a late
    return cannot be taken for a later call's, and a new one takes over. The
    abandoned thread is asked to stop: :class:`_Abandoned` is raised in it
    (``PyThreadState_SetAsyncExc``), which ends a kernel looping in Python at
    its next bytecode, so it does not keep a core and the GIL busy under the
    checks that follow. A thread stuck inside native code cannot be stopped
    that way (it stops when the native call returns); isolated runs kill the
    worker process instead (:mod:`numoracle.checking.isolate`), which is why
    foreign kernels are isolated by default."""

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
        try:
            while True:
                go.acquire()
                fn, kwargs = slot[0]
                slot[0] = None
                try:
                    with np.errstate(all="ignore"):  # IEEE exceptions of a kernel: no failure
                        slot[1] = (True, fn(**kwargs))
                except _Abandoned:
                    return
                except BaseException as exc:  # noqa: BLE001 - handed to the caller, SystemExit too
                    slot[1] = (False, exc)
                done.release()
        except _Abandoned:  # the stop request arrived between two calls
            return

    @staticmethod
    def _stop(thread: threading.Thread) -> None:
        """Ask an abandoned thread to stop (see the class docstring)."""
        if thread.ident is not None and thread.is_alive():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                       ctypes.py_object(_Abandoned))

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
                self._stop(self.thread)
                self._start()  # the hung thread is left behind (a daemon), never reused
                raise _Hung(f"the kernel did not return within the timeout of {timeout:g} s "
                            "(hung? set timeout= or --timeout)")
            ok, value = slot[1]
            slot[1] = None
        if ok:
            return value
        raise value


_WORKER: _Worker | None = None  # started on the first in-process call


def call_in_thread(fn: Any, kwargs: Mapping[str, Any], timeout: float | None) -> Any:
    """Run ``fn(**kwargs)`` in the worker thread; raise _Hung past ``timeout``."""
    global _WORKER  # one worker thread per process, made on first use
    if _WORKER is None:
        _WORKER = _Worker()
    return _WORKER.call(fn, kwargs, timeout)


def call_here(fn: Any, kwargs: Mapping[str, Any], timeout: float | None) -> Any:
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
                     f"{str(exc).splitlines()[0] if str(exc) else ''}", FaultKind.OOM)
    name = cuda_error(exc)
    if name is not None:
        return Fault(f"the kernel {'raised' if during == 'call' else 'left'} a CUDA error: "
                     f"{name}", FaultKind.CUDA)
    kind = getattr(exc, "fault_kind", None)  # a foreign call's own crash or hang
    if kind in (FaultKind.CRASH, FaultKind.HANG):
        return Fault(f"the kernel raised {type(exc).__name__}: {exc}", kind,
                     exception=type(exc).__name__)
    if isinstance(exc, SystemExit):
        return Fault(f"the kernel called sys.exit({exc.code!r})", FaultKind.RAISE,
                     exception="SystemExit")
    if isinstance(exc, ValueError) and "read-only" in str(exc):
        where = _kernel_line(exc)
        return Fault("the kernel wrote to one of its inputs, which are read-only: "
                     f"ValueError: {exc}{where}", FaultKind.INPUT)
    return Fault(f"the kernel raised {type(exc).__name__}: {exc}", FaultKind.RAISE,
                 exception=type(exc).__name__)


def _kernel_line(exc: BaseException) -> str:
    """`` (at file:line)`` of the innermost frame outside NumPy, or empty."""
    tb = traceback.extract_tb(exc.__traceback__)
    frames = [f for f in tb if "numpy" not in f.filename.replace("\\", "/").split("/")]
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def call_kernel(case: Case, target: Target, inputs: Mapping[str, np.ndarray],
                timeout: float | None,
                call: Any) -> tuple[dict[str, np.ndarray] | None, Fault | None]:
    """Hand the case's inputs to ``target`` (on its device, in the layout it
    takes, read-only), call it through ``call(fn, kwargs, timeout)``
    (:func:`call_in_thread` in-process, :func:`call_here` in a worker process),
    and bring its outputs back to the host in canonical axis order; return
    ``(outputs, None)`` or ``(None, fault)``.

    A kernel that writes to an input fails: NumPy inputs are handed over
    read-only, and every input is compared with its values after the call.
    """
    op = get_op(case.op)
    backend = get_backend(target.backend)
    storage = target.precision.storage
    args: dict[str, Any] = {}
    handed: dict[str, np.ndarray] = {}  # each input as the kernel should still see it
    integers = op.integer_inputs(case.params)
    for name, arr in inputs.items():
        axes = op.input_axes.get(name)
        args[name], order = _to_target(backend, storage, arr, case.layout(name),
                                       target.accepted_layouts(name), axes,
                                       integers[name].dtype if name in integers else None)
        if isinstance(args[name], np.ndarray):
            args[name].flags.writeable = False
        handed[name] = to_order(np.asarray(arr, dtype=np.float64), axes, order)
    if op.passes_params:
        args["params"] = dict(case.params)
    release_cached_memory()  # the kernel gets the device memory the oracle no longer uses
    try:
        out = call(target.fn, args, timeout)
    except _Hung as exc:
        return None, Fault(str(exc), FaultKind.HANG)
    except UnsupportedCase as exc:  # the target declines the case (e.g. parameters it fixes)
        return None, Fault(f"the target does not take this case: {exc}", FaultKind.UNSUPPORTED)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a raising kernel is a failing verdict
        return None, _raised(exc, backend, "call")
    try:
        backend.synchronize()
    except Exception as exc:  # noqa: BLE001 - a sticky error after the call is the kernel's
        return None, _raised(exc, backend, "sync")
    written = _written_inputs(backend, args, handed)
    if written:
        return None, Fault(written, FaultKind.INPUT)
    if not isinstance(out, Mapping):
        return None, Fault(f"the kernel returned {type(out).__name__}; it must return a dict "
                           "of outputs by name", FaultKind.OUTPUT)
    defined = op.outputs(case.params)  # e.g. no grad_bias for a case without a bias
    wanted = [k for k in (target.outputs or defined) if k in defined]
    missing = [k for k in wanted if k not in out]
    if missing:
        return None, Fault(f"the kernel did not return {missing} (returned {sorted(out)})",
                           FaultKind.OUTPUT)
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
            return None, Fault(f"output {name!r}{where}: {problem}", FaultKind.OUTPUT)
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
               accepted: tuple[str, ...], axes: str | None,
               integer: str | None = None) -> tuple[Any, str | None]:
    """``host`` (canonical axis order ``axes``) as the target takes it: in the
    case's layout where the target accepts it, else in its first accepted one
    (in the ``integer`` dtype for an integer input, else in ``storage``); and
    the axis order it is in."""
    if not accepts(accepted, layout, axes):
        valid = [a for a in accepted if a in layouts_for(axes)]
        layout = valid[0] if valid else "C"
    lay = parse(layout, axes)
    if integer is not None:
        return backend.to_device_integers(to_order(host, axes, lay.order), integer,
                                          lay.memory), lay.order
    return backend.to_device(to_order(host, axes, lay.order), storage, lay.memory), lay.order
