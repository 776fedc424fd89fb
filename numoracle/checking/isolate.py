"""Kernels run in a worker process, so that a crash ends the worker, not the run.

One function does it: :func:`run_isolated` has the contract of
:func:`numoracle.checking.check.run_kernel` (it *is* ``run_kernel`` with
``isolate=True``): host inputs in, ``(host outputs, None)`` or ``(None, fault)``
out, where the fault is a :class:`~numoracle.checking.diagnosis.Fault` (a
sentence with a ``kind``). In the worker the inputs are moved to the target's device,
the kernel is called, the outputs are checked and brought back to the host
there; only host NumPy arrays cross the process boundary.

=========================  ========================================================  =====
what the kernel does       what comes back                                           kind
=========================  ========================================================  =====
segfault, abort            "the kernel's process died of SIGSEGV (...)"              crash
``os._exit(3)``            "the kernel's process exited with code 3 (...)"           crash
killed (OOM killer)        "... died of SIGKILL (...); killed from outside, ..."     crash
runs past ``timeout``      "the kernel did not return within ... was killed"         hang
CUDA error, sticky or not  "the kernel left a CUDA error: cudaErrorIllegalAddress"   cuda
=========================  ========================================================  =====

After a crash, a hang or a CUDA error the worker is gone (a CUDA error makes
the worker exit on its own: its context is unusable) and the next call gets a
fresh one, started at once in the background. Anything else (an exception, a
wrong output, an input written) is answered by the worker, which stays.

The worker
----------
One worker process serves the whole run (every target, every case), started
with the ``spawn`` method of :mod:`multiprocessing` (never ``fork``: CUDA and
threads do not survive a fork); requests and answers go through a
:func:`multiprocessing.Pipe`. Its device is initialised once, when it first
loads a target of that backend, and kept across cases, so a kernel's own
state (a cache, a compiled module, a stale buffer) persists between calls as
it does in-process. Worker start-up (imports, device set-up, loading the
target) is not counted in the kernel's timeout; it has :data:`STARTUP_TIMEOUT`.
SIGINT is ignored in the worker: Ctrl-C stops the parent, which kills it.

Sending the kernel
------------------
A target with a ``source`` (a module or ``.py`` path whose ``TARGETS`` holds
it, as the bug zoo's and the foreign targets have) is found again in the
worker by that source, its name and op. Any other target is pickled: its
function must be importable by reference (defined at module level, in a
module the worker can import; a ``functools.partial`` of such a function is
fine). A lambda, a closure or a function of an interactive session cannot be
sent: :func:`prepare` raises :class:`~numoracle.errors.InvalidArgument` saying
so, before any case is drawn (no silent fallback to in-process).

Other uses
----------
``call_isolated(fn, kwargs, timeout=...)`` runs any module-level function in
the worker and returns ``(result, None)`` or ``(None, fault)``, for callers
that are not array kernels of an op (a shared-library call, a command).
:func:`shutdown` stops the worker (done at exit as well).
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import multiprocessing as mp
import os
import pickle
import re
import signal
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from ..cases.case import Case
from ..errors import InvalidArgument
from ..targets.sources import find_in_source
from ..targets.target import Target
from .call import DEFAULT_TIMEOUT, call_here, call_kernel
from .diagnosis import Fault, FaultKind

__all__ = ["run_isolated", "call_isolated", "prepare", "start", "shutdown", "describe_exit",
           "in_worker", "requests", "STARTUP_TIMEOUT", "UNGUARDED_EXIT"]

#: seconds a fresh worker may take to start and load a target (imports, device set-up)
STARTUP_TIMEOUT = 300.0
#: exit status of a worker that found itself re-running a script without a
#: ``__main__`` guard (it would start workers of its own, without end)
UNGUARDED_EXIT = 87

_IN_WORKER = False


def in_worker() -> bool:
    """Whether this process is the isolation worker (a caller that would
    isolate a call makes it here directly instead)."""
    return _IN_WORKER


def _unguarded_message() -> str:
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None) or "your script"
    return (f"the worker process that runs isolated kernels re-imports {script}, and that "
            "script starts checks when it is imported: put the code that makes targets and "
            "runs checks under `if __name__ == \"__main__\":` (multiprocessing's spawn rule), "
            "or run the kernel in this process (isolate=False, --no-isolate)")

#: Target fields that travel to the worker (``available`` stays: a probe of this process)
_SENT_FIELDS = tuple(f.name for f in fields(Target) if f.name != "available")


# -- the worker process ---------------------------------------------------------------------


def _load(spec: tuple[Any, ...]) -> Any:
    """The target (or function) ``spec`` names, loaded in the worker."""
    kind = spec[0]
    if kind == "source":
        _, source, name, op = spec
        return find_in_source(name, op, source)
    if kind == "target":
        return Target(**pickle.loads(spec[1]))
    return pickle.loads(spec[1])  # "function"


def _init_device(target: Any) -> None:
    """Set up the target's device once in this worker (CUDA context, streams)."""
    if not isinstance(target, Target):
        return
    from ..targets.backends import get_backend  # noqa: PLC0415 - only in the worker

    backend = get_backend(target.backend)
    if backend.available() is None:
        backend.synchronize()


def requests(conn: Any) -> Iterator[Any]:
    """The messages a worker process is sent, one at a time, until the parent
    closes the pipe or sends ``None`` (the worker's loop: ``for msg in
    requests(conn)``; the isolation worker's and the KernelBench sandbox's)."""
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        yield msg


def _worker_main(conn: Any, dump: str | None = None) -> None:
    """Serve requests until the parent closes the pipe or sends None. A crash
    writes the kernel's Python stack to ``dump`` (the parent names the last
    line in the verdict), not into the parent's output."""
    global _IN_WORKER  # this process is the worker from now on
    _IN_WORKER = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if dump is not None:
        faulthandler.enable(file=open(dump, "w"))  # noqa: SIM115 - open until the process dies
    else:
        faulthandler.enable()
    loaded: dict[tuple[Any, ...], Any] = {}
    conn.send(("ready", None, None))
    for what, spec, payload in requests(conn):
        try:
            if spec not in loaded:
                loaded[spec] = _load(spec)
                _init_device(loaded[spec])
        except BaseException as exc:  # noqa: BLE001 - told to the parent, which raises
            conn.send(("load-error", f"{type(exc).__name__}: {exc}", None))
            continue
        obj = loaded[spec]
        if what == "load":
            conn.send(("ok", None, None))
            continue
        if what == "call":
            try:
                result: Any = (call_here(obj, payload, None), None)
            except BaseException as exc:  # noqa: BLE001 - SystemExit too: a failure to report
                result = (None, Fault(f"the function raised {type(exc).__name__}: {exc}",
                                      exception=type(exc).__name__))
        else:
            case, inputs = payload
            result = call_kernel(case, obj, inputs, None, call_here)
        try:
            conn.send(("ok", *result))
        except Exception as exc:  # noqa: BLE001 - an unpicklable result is the function's
            conn.send(("ok", None, Fault(f"its result could not be sent back: "
                                         f"{type(exc).__name__}: {exc}", FaultKind.OUTPUT)))
        if isinstance(result[1], Fault) and result[1].kind is FaultKind.CUDA:
            return  # the CUDA context is unusable: the next case gets a fresh process


# -- the parent side ------------------------------------------------------------------------


def describe_exit(code: int | None) -> str:
    """What a worker's exit code says, as a verdict's sentence.

    Examples
    --------
    >>> describe_exit(-11)
    "the kernel's process died of SIGSEGV (Segmentation fault)"
    >>> describe_exit(3)
    "the kernel's process exited with code 3 (os._exit or exit in native code)"
    """
    if code is None:
        return "the kernel's process stopped answering"
    if code < 0:
        try:
            sig = signal.Signals(-code)
        except ValueError:
            return f"the kernel's process died of signal {-code}"
        text = f"the kernel's process died of {sig.name} ({signal.strsignal(sig)})"
        if sig == signal.SIGKILL:
            text += "; killed from outside, as the out-of-memory killer does"
        return text
    return f"the kernel's process exited with code {code} (os._exit or exit in native code)"


class _Died(Exception):
    pass


def last_frame(dump: str) -> str:
    """``"; its last Python line: FILE:LINE in FUNCTION"`` from a faulthandler
    dump: the innermost frame of the crashed thread outside Python's and the
    installed packages' own files (the kernel's line, not ``ctypes``'), else
    the innermost; ``""`` when the dump names none.

    Examples
    --------
    >>> last_frame('Fatal Python error: Segmentation fault\\n\\nCurrent thread 0x1 (most '
    ...            'recent call first):\\n  File "/k/bad.py", line 7 in segfault\\n')
    '; its last Python line: bad.py:7 in segfault'
    """
    crashed = dump[dump.find("Current thread"):] if "Current thread" in dump else dump
    frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', crashed)
    if not frames:
        return ""
    libraries = {sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")}
    libraries.add(str(Path(__file__).resolve().parents[1]))  # numoracle's own calls
    own = [f for f in frames if not any(f[0].startswith(lib) for lib in libraries)]
    path, line, function = (own or frames)[0]
    return f"; its last Python line: {Path(path).name}:{line} in {function}"


def _needs_main(spec: tuple[Any, ...]) -> bool:
    """Whether the worker must import the parent's main script to load ``spec``:
    a kernel pickled from it does; a target found by its source file and
    numoracle's own functions do not."""
    return spec[0] != "source" and b"__main__" in spec[1]


@contextlib.contextmanager
def _main_hidden() -> Iterator[None]:
    """Within the block, a spawned process does not import the parent's main
    script: multiprocessing's spawn re-runs the script named by the main
    module's ``__spec__`` or ``__file__``, so both are set aside while the
    process starts (a worker that loads targets by source, or numoracle's own
    functions, needs nothing of it; a script without a ``__main__`` guard then
    works as written)."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved: dict[str, Any] = {k: main.__dict__[k] for k in ("__file__", "__spec__")
                             if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__dict__["__spec__"] = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)

class _Pool:
    """The one worker process, started lazily and replaced after a fault."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.proc: Any = None
        self.conn: Any = None
        self.ready = False
        self.loaded: set[tuple[Any, ...]] = set()
        #: whether the worker imported the parent's main script (spawn's rule)
        self.with_main = False
        #: the file the worker's faulthandler writes to, and the last dead worker's dump
        self.dump: str | None = None
        self.last_dump = ""

    def _spawn(self, with_main: bool | None = None) -> None:
        if getattr(mp.current_process(), "_inheriting", False):
            # a worker still importing the parent's main script was asked for a
            # worker: the script runs checks at import (no __main__ guard)
            sys.stderr.write(f"numoracle: {_unguarded_message()}\n")
            sys.stderr.flush()
            os._exit(UNGUARDED_EXIT)
        with_main = self.with_main if with_main is None else with_main
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        fd, self.dump = tempfile.mkstemp(prefix="numoracle-worker-", suffix=".txt")
        os.close(fd)
        proc = ctx.Process(target=_worker_main, args=(child, self.dump),
                           name="numoracle-kernel", daemon=True)
        with contextlib.nullcontext() if with_main else _main_hidden():
            proc.start()
        child.close()
        self.proc, self.conn, self.ready, self.loaded = proc, parent, False, set()
        self.with_main = with_main

    def _kill(self) -> int | None:
        """Stop the worker (if still alive) and start its successor; its exit code."""
        proc, conn = self.proc, self.conn
        code = None
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(10)
            code = proc.exitcode
            conn.close()
        self.last_dump = self._drop_dump()
        self._spawn()  # starts importing now, while the parent judges the case
        return code

    def _drop_dump(self) -> str:
        """The dead worker's faulthandler dump (removed from disk), or ``""``."""
        text = ""
        if self.dump is not None:
            with contextlib.suppress(OSError):
                text = Path(self.dump).read_text(errors="replace")
            with contextlib.suppress(OSError):
                os.unlink(self.dump)
            self.dump = None
        return text

    def _receive(self, timeout: float | None) -> tuple[Any, ...] | None:
        """The worker's answer; None past ``timeout``; _Died when it died."""
        try:
            if not self.conn.poll(timeout):
                return None
            return self.conn.recv()
        except (EOFError, OSError) as exc:
            raise _Died from exc

    def _exchange(self, msg: tuple[Any, ...], timeout: float | None) -> tuple[Any, ...] | None:
        try:
            self.conn.send(msg)
        except (OSError, ValueError) as exc:
            raise _Died from exc
        return self._receive(timeout)

    def _ensure(self, spec: tuple[Any, ...]) -> None:
        """A live worker that has loaded ``spec``; InvalidArgument when it cannot."""
        needs = _needs_main(spec)
        if needs and not self.with_main and self.proc is not None:
            self.with_main = True
            self._kill()  # its successor imports the main script
        if self.proc is None or not self.proc.is_alive():
            self.with_main = self.with_main or needs
            self._kill()
        for attempt in (1, 2):  # a worker that died idle is replaced once
            try:
                if not self.ready:
                    if self._receive(STARTUP_TIMEOUT) is None:
                        raise _Died
                    self.ready = True
                if spec not in self.loaded:
                    answer = self._exchange(("load", spec, None), STARTUP_TIMEOUT)
                    if answer is None:
                        raise _Died
                    if answer[0] == "load-error":
                        raise InvalidArgument(
                            f"the worker process could not load the kernel ({answer[1]}); "
                            "an isolated kernel must be importable there: define it at module "
                            "level in an importable module (not a lambda, a closure or "
                            "__main__ of an interactive session), or run it in-process "
                            "(isolate=False, --no-isolate)")
                    self.loaded.add(spec)
                return
            except _Died:
                code = self._kill()
                if code == UNGUARDED_EXIT:
                    raise InvalidArgument(_unguarded_message()) from None
                if attempt == 2:
                    raise InvalidArgument(f"the worker process could not start or load the "
                                          f"kernel: {describe_exit(code)}") from None

    def request(self, what: str, spec: tuple[Any, ...], payload: Any,
                timeout: float | None) -> tuple[Any, Fault | None]:
        with self.lock:
            self._ensure(spec)
            try:
                answer = self._exchange((what, spec, payload), timeout)
            except _Died:
                code = self._kill()
                return None, Fault(describe_exit(code) + last_frame(self.last_dump),
                                   FaultKind.CRASH)
            if answer is None:
                self._kill()
                return None, Fault(f"the kernel did not return within the timeout of "
                                   f"{timeout:g} s (hung? set timeout= or --timeout); its "
                                   "worker process was killed", FaultKind.HANG)
            _, result, fault = answer
            if isinstance(fault, Fault) and fault.kind is FaultKind.CUDA:
                self._kill()  # the worker exits by itself; wait for it, start the next
            return result, fault

    def shutdown(self) -> None:
        with self.lock:
            proc, conn = self.proc, self.conn
            self.proc = self.conn = None
            if proc is None:
                return
            with contextlib.suppress(OSError, ValueError):
                conn.send(None)
            proc.join(1)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
            conn.close()
            self._drop_dump()


_POOL = _Pool()
atexit.register(_POOL.shutdown)


def _spec(target: Target) -> tuple[Any, ...]:
    """How the worker finds ``target``: by its source, or its pickled fields."""
    if target.source:
        source = target.source
        if source.endswith(".py"):
            source = str(Path(source).resolve())
        return ("source", source, target.name, target.op)
    values = {name: getattr(target, name) for name in _SENT_FIELDS}
    if isinstance(values["layouts"], Mapping):
        values["layouts"] = dict(values["layouts"])
    values["output_layouts"] = dict(values["output_layouts"])
    try:
        return ("target", pickle.dumps(values))
    except Exception as exc:  # noqa: BLE001 - PicklingError, AttributeError, TypeError alike
        raise InvalidArgument(
            f"kernel {target.name!r} ({target.fn!r}) cannot be sent to a worker process "
            f"({type(exc).__name__}: {exc}); define it at module level (not a lambda or a "
            "closure), or run it in-process (isolate=False, --no-isolate)") from None


def prepare(target: Target) -> None:
    """Start the worker and load ``target`` in it now (its device set up).

    Raises
    ------
    InvalidArgument
        When the kernel cannot be sent to or loaded by the worker.
    """
    with _POOL.lock:
        _POOL._ensure(_spec(target))


def run_isolated(case: Case, target: Target, inputs: Mapping[str, np.ndarray], *,
                 timeout: float | None = DEFAULT_TIMEOUT
                 ) -> tuple[dict[str, np.ndarray] | None, Fault | None]:
    """:func:`~numoracle.checking.check.run_kernel` in the worker process.

    Parameters
    ----------
    case : Case
        The case.
    target : Target
        The kernel under test (see "Sending the kernel" above).
    inputs : mapping of str to numpy.ndarray
        The case's host inputs (float64, canonical axis order).
    timeout : float or None
        Seconds the call may take in the worker (start-up not counted); past
        it the worker is killed and the result is a ``"hang"`` fault.

    Returns
    -------
    (outputs, None) or (None, Fault)
        Host outputs by name, or what went wrong.
    """
    payload = (case, {k: np.asarray(v) for k, v in inputs.items()})
    return _POOL.request("kernel", _spec(target), payload, timeout)


def _function_spec(fn: Callable[..., Any]) -> tuple[Any, ...]:
    try:
        return ("function", pickle.dumps(fn))
    except Exception as exc:  # noqa: BLE001 - PicklingError, AttributeError, TypeError alike
        raise InvalidArgument(f"{fn!r} cannot be sent to a worker process ({exc}); define it "
                              "at module level") from None


def start(fn: Callable[..., Any]) -> None:
    """Start the worker and load the module-level function ``fn`` in it now,
    before any case: a target that will make its calls through
    :func:`call_isolated` learns here, as an InvalidArgument, that the worker
    cannot start (a script without a ``__main__`` guard), never later as a
    verdict on its kernel."""
    if _IN_WORKER:
        return
    with _POOL.lock:
        _POOL._ensure(_function_spec(fn))


def call_isolated(fn: Callable[..., Any], kwargs: Mapping[str, Any], *,
                  timeout: float | None = DEFAULT_TIMEOUT) -> tuple[Any, Fault | None]:
    """``fn(**kwargs)`` in the worker process: ``(result, None)`` or ``(None, fault)``.

    ``fn``, ``kwargs`` and the result must pickle (``fn`` by reference: a
    module-level function). A crash, a hang or an exit of ``fn`` comes back as
    a fault as for :func:`run_isolated`; an exception as a ``"raise"`` fault.
    """
    return _POOL.request("call", _function_spec(fn), dict(kwargs), timeout)


def shutdown() -> None:
    """Stop the worker process (the next isolated call starts a fresh one)."""
    _POOL.shutdown()
