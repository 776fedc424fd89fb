"""The candidate's process: started per candidate, hardened, answering one case at a time.

:class:`Sandbox` starts a process of its own for one candidate file: forked
from the judge's template (:mod:`.template`, a process that imported torch and
nothing of the judge's, never a device: CUDA does not survive a fork, and the
judge's own process, whose memory holds the reference's outputs, is never
forked), or with ``template=False`` a fresh interpreter (``subprocess``). On
the CPU its first lines, while the process still has a single thread (a fork
has one; a fresh interpreter before it imports torch), move it into a network
namespace of its own where
the kernel allows an unprivileged one (a user and a network namespace: no
interface but a loopback that is down; not on a GPU, whose driver may talk to
its own services); then :func:`serve` hardens it further
(:func:`~.guard.harden`), pins the functions it relies on
(:class:`~.guard.Pins`), confines itself to the files it needs where the
kernel has Landlock (:mod:`.landlock`: the judge's files out of its reach),
imports the candidate's file, and answers cases.

The judge and the process share three channels: a Unix socket pair for small
messages (the case's small host arrays in, notes and where the outputs lie
out), a file in shared memory into which the judge writes the case's large
host arrays (inputs and parameters of at least :data:`SHARED_INPUT_BYTES`; the
process maps it and reads them in place: no pickled copies through the socket),
and a file in shared memory the judge allocates per case, into which the
process copies the outputs' bytes through raw memory (:mod:`.candidate`) and
from which the judge reads them itself. A crash, an exit, a hang past the timeout
or a CUDA error ends the process; the next case gets a fresh one. The process
tells the judge its start's seconds by phase (``Sandbox.laps``); told to stop,
it ends without the interpreter's teardown.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import mmap
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from ..checking.call import cuda_error
from ..checking.isolate import describe_exit, requests
from . import landlock
from .template import Child, template

__all__ = ["Sandbox", "InProcess", "serve", "STARTUP_TIMEOUT", "read_output", "warm",
           "forked", "SHARED_INPUT_BYTES", "SharedInput", "fault_kind"]

#: seconds a fresh process may take to start and import the candidate (imports,
#: device set-up, compiling an inline extension)
STARTUP_TIMEOUT = 600.0
_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000
#: a request's host array of at least this many bytes is handed over in the shared
#: inputs file rather than pickled through the socket
SHARED_INPUT_BYTES = 1 << 20
#: the request's arrays that may be handed over in the shared inputs file
_SHARED_KEYS = ("first", "second", "state")


class SharedInput:
    """Where a request's host array lies in the shared inputs file: byte offset,
    shape and NumPy dtype (its ``str``)."""

    __slots__ = ("offset", "shape", "dtype")

    def __init__(self, offset: int, shape: tuple[int, ...], dtype: str) -> None:
        self.offset, self.shape, self.dtype = offset, shape, dtype

    def __reduce__(self) -> tuple[Any, ...]:
        return (SharedInput, (self.offset, self.shape, self.dtype))

    def view(self, buf: Any) -> np.ndarray:
        """The array, a view of ``buf`` (the mapped file)."""
        dtype = np.dtype(self.dtype)
        count = int(np.prod(self.shape, dtype=np.int64))
        return np.frombuffer(buf, dtype=dtype, count=count, offset=self.offset
                             ).reshape(self.shape)


def _shared_arrays(request: Mapping[str, Any]) -> list[tuple[str, Any, np.ndarray]]:
    """The request's arrays handed over in the shared inputs file: (key, index or
    name, array), in order."""
    found = []
    for key in _SHARED_KEYS:
        values = request.get(key)
        items = values.items() if isinstance(values, Mapping) else \
            enumerate(values or ()) if isinstance(values, (list, tuple)) else ()
        for i, v in items:
            if isinstance(v, np.ndarray) and v.nbytes >= max(SHARED_INPUT_BYTES, 1) and \
                    v.dtype.kind in "biuf" and not v.dtype.hasobject:
                found.append((key, i, v))
    return found


def _opened(request: dict[str, Any]) -> tuple[dict[str, Any], mmap.mmap | None]:
    """The request with its shared arrays read from the inputs file it names (views of
    a private mapping: a write stays in this process), and the mapping."""
    where = request.pop("shared_inputs", None)
    if where is None:
        return request, None
    path, size = where
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
    for key in _SHARED_KEYS:
        values = request.get(key)
        if isinstance(values, dict):
            request[key] = {k: v.view(mapped) if isinstance(v, SharedInput) else v
                            for k, v in values.items()}
        elif isinstance(values, (list, tuple)):
            request[key] = [v.view(mapped) if isinstance(v, SharedInput) else v
                            for v in values]
    return request, mapped

#: the process's first lines: a network namespace while it has one thread, then serve
_BOOT = r"""
import time
began = time.perf_counter()
import ctypes, json, sys
fd, candidate, device, path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
(shared, readable), judge_dir = json.loads(sys.argv[5]), sys.argv[6]
sys.path[:] = json.loads(path)
netns = False
if device == "cpu":
    try:
        netns = ctypes.CDLL(None, use_errno=True).unshare(%d | %d) == 0
    except (OSError, AttributeError):
        pass
from numoracle.kernelbench.sandbox import serve
serve(fd, candidate, device, netns, shared, judge_dir, readable, began)
sys.stdout.flush(); sys.stderr.flush()
import os
os._exit(0)  # told to stop: no interpreter teardown (torch's takes seconds)
""" % (_CLONE_NEWUSER, _CLONE_NEWNET)


def serve(fd: int, candidate: str, device: str, netns: bool, shared: Sequence[str] = (),
          judge_dir: str = "", readable: Sequence[str] = (), began: float | None = None
          ) -> None:
    """The candidate's process: harden, pin, confine, import the candidate, answer
    cases (``shared``: the folders the judge hands outputs over in; ``judge_dir``:
    the judge's working directory; ``readable``: files it may read beside the
    candidate's; ``began``: when its first line ran, ``time.perf_counter()``)."""
    import faulthandler  # noqa: PLC0415 - the worker's imports, before the candidate's

    import torch  # noqa: PLC0415

    from . import candidate as run  # noqa: PLC0415
    from . import draws, guard  # noqa: PLC0415

    clock = _Clock(time.perf_counter() if began is None else began)
    clock.lap("imports")

    conn = Connection(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    faulthandler.enable()
    done = guard.harden()
    if netns:
        done.append("a network namespace of its own")
    clock.lap("hardening")
    if device.startswith("cuda"):
        torch.cuda.init()
    clock.lap("device set-up")
    with run.OpRecorder(), run.KernelRecorder(device):  # what their first use imports
        torch.ones(1, device=device).add(1)  # (and wraps) is there before the pins
    clock.lap("recorders")
    done.append(_confine([candidate, *readable], shared, judge_dir))
    pins = guard.Pins([sys.modules[__name__], run, guard, draws])
    memory = guard.RawMemory(device)
    clock.lap("confining and pinning")
    cls: Any = None
    status: tuple[str, str] = ("ok", "")
    try:
        cls = run.load_candidate(candidate)
    except run.MissingPackage as exc:
        status = ("missing", str(exc))
    except Exception as exc:  # noqa: BLE001 - told to the judge as one sentence
        status = ("bad", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    clock.lap("loading the candidate")
    changed = pins.changed()
    conn.send(("ready", done, status, changed, clock.laps))
    mapped: tuple[str, int, Any] | None = None
    for message, path, size in requests(conn):
        if mapped is None or mapped[:2] != (path, size):
            if mapped is not None:
                mapped[2].close()
            with open(path, "r+b") as f:
                mapped = (path, size, mmap.mmap(f.fileno(), size))
        request, inputs = _opened(message)
        del message
        try:
            answer = run.run_case(cls, request, memory=memory, buf=mapped[2], pins=pins)
        except guard.RawMemoryError as exc:  # the judge's own failure: not judged
            answer = {"fault": f"the judge could not copy the outputs: {exc}",
                      "fault_kind": "judge", "notes": []}
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: a failure to report
            answer = {"fault": f"the candidate raised {type(exc).__name__}: {exc}",
                      "fault_kind": fault_kind(exc), "notes": []}
        del request
        if inputs is not None:
            with contextlib.suppress(BufferError):  # a view kept alive: closed when freed
                inputs.close()
        if device.startswith("cuda") and answer.get("fault_kind") != "cuda":
            # the case's tensors are freed: their cached blocks go back to the device
            # before the judge's oracle takes its memory (the process waits idle)
            with contextlib.suppress(Exception):
                torch.cuda.empty_cache()
        conn.send(("answer", answer))
        if answer.get("fault_kind") == "cuda":
            return


def fault_kind(exc: BaseException) -> str:
    """How an exception that left the candidate's case counts: ``exit`` (SystemExit),
    ``cuda`` (a CUDA error: the process's context is lost), ``oom`` (the device or the
    host out of memory, outside the call itself too, as copying its outputs: the
    machine, not the candidate) or ``raise``."""
    import torch  # noqa: PLC0415 - imported already in the candidate's process

    if isinstance(exc, SystemExit):
        return "exit"
    if cuda_error(exc) is not None:
        return "cuda"
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return "oom"
    return "raise"


def warm() -> None:
    """Start this process's template (:mod:`.template`) now, so that its imports
    overlap the judge's own work."""
    template()


def forked(fd: int, candidate: str, device: str, shared: Sequence[str], judge_dir: str,
           readable: Sequence[str], env: Mapping[str, str]) -> None:
    """A candidate's process forked from the template (:mod:`.template`): the network
    namespace while it has one thread (a fork has one), the judge's environment, then
    :func:`serve`; it ends without the interpreter's teardown."""
    began = time.perf_counter()
    netns = False
    if device == "cpu":
        try:
            netns = ctypes.CDLL(None, use_errno=True).unshare(
                _CLONE_NEWUSER | _CLONE_NEWNET) == 0
        except (OSError, AttributeError):
            pass
    os.environ.clear()
    os.environ.update(env)
    serve(fd, candidate, device, netns, shared, judge_dir, readable, began)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class _Clock:
    """Seconds per phase of the process's start, told to the judge with ``ready``."""

    def __init__(self, began: float) -> None:
        self.now, self.last = time.perf_counter, began
        self.laps: dict[str, float] = {}
        #: seconds spent starting the process, in all (its starts included in ``run``)
        self.started_in = 0.0

    def lap(self, name: str) -> None:
        now = self.now()
        self.laps[name] = round(now - self.last, 3)
        self.last = now


def _confine(readable: Sequence[str], shared: Sequence[str], judge_dir: str) -> str:
    """Send temporary files and build caches into the working folder, then confine the
    process to its files (:func:`~.landlock.confine`)."""
    work = os.getcwd()
    env = landlock.writable_env(work, os.environ.items())
    os.environ.update(env)
    tempfile.tempdir = work
    write = [work, *shared, *(os.environ[k] for k in ("TORCH_EXTENSIONS_DIR",
                                                      "TRITON_CACHE_DIR", "CUDA_CACHE_PATH"))]
    for folder in write:
        with contextlib.suppress(OSError):
            os.makedirs(folder, exist_ok=True)
    try:
        return landlock.confine(read=readable, write=write, judge_dir=judge_dir)
    except OSError as exc:  # noqa: BLE001 - told, not fatal: the other hardening holds
        return f"Landlock failed ({exc}): not confined"


def read_output(buf: Any, pieces: Sequence[Sequence[Any]], dtype: str,
                stacked: bool) -> np.ndarray:
    """An output rebuilt from its pieces in the shared buffer (its rows stacked where
    ``stacked``), as float32 (bfloat16, float16) or in its own NumPy dtype."""
    raw = np.dtype({"bfloat16": np.uint16, "float16": np.float16}.get(dtype, dtype))
    parts = []
    for offset, shape, strides in pieces:
        n = 0 if 0 in shape else 1 + sum((d - 1) * s for d, s in zip(shape, strides,
                                                                      strict=True))
        if n:
            flat = np.frombuffer(buf, dtype=raw, count=n, offset=offset)
            arr = np.lib.stride_tricks.as_strided(
                flat, tuple(shape), tuple(s * raw.itemsize for s in strides)).copy()
        else:
            arr = np.zeros(tuple(shape), dtype=raw)
        if dtype == "bfloat16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        elif dtype == "float16":
            arr = arr.astype(np.float32)
        parts.append(arr)
    return np.stack(parts) if stacked else parts[0]


def _read_all(buf: Any, request: Mapping[str, Any], result: dict[str, Any]) -> None:
    """Rebuild the outputs (``outputs``) and gradients (``gradients``) ``result`` names."""
    if "pieces" in result:
        result["outputs"] = [read_output(buf, p, spec[1], bool(request["rows"]))
                             for p, spec in zip(result["pieces"], request["outputs"],
                                                strict=True)]
    if "backward_pieces" in result:
        stacked = bool(request.get("grad_rows"))
        result["gradients"] = {k: read_output(buf, p, request["dtype"], stacked)
                               for k, p in result["backward_pieces"].items()}


class InProcess:
    """The candidate run in the judge's own process (no isolation, no pins that hold:
    for debugging a candidate), with :class:`Sandbox`'s interface."""

    def __init__(self, candidate: str | Path, device: str) -> None:
        from . import candidate as run  # noqa: PLC0415 - torch-heavy, as the judge is
        from . import guard  # noqa: PLC0415

        self.run_module, self.hardening = run, []
        self.memory = guard.RawMemory(device)
        self.pins = guard.Pins([run, guard], hooks=False)
        self.cls: Any = None
        self.failed: dict[str, Any] | None = None
        try:
            self.cls = run.load_candidate(candidate)
        except run.MissingPackage as exc:
            self.failed = {"fault": str(exc), "fault_kind": "missing", "notes": []}
        except Exception as exc:  # noqa: BLE001 - told as one sentence
            self.failed = {"fault": str(exc).splitlines()[0], "fault_kind": "bad", "notes": []}

    def run(self, request: Mapping[str, Any], capacity: int) -> dict[str, Any]:
        if self.failed is not None:
            return dict(self.failed)
        buf = bytearray(max(capacity, 1))
        result: dict[str, Any] = self.run_module.run_case(
            self.cls, request, memory=self.memory, buf=buf, pins=self.pins)
        _read_all(buf, request, result)
        return result

    def close(self) -> None:
        pass


class Sandbox:
    """The process that runs one candidate file (see the module's docstring).

    Parameters
    ----------
    candidate : path
        The candidate file.
    device : str
        ``"cpu"`` or a CUDA device.
    timeout : float
        Seconds one case may take.
    readable : sequence of path
        Files the process may read beside the candidate's own (the problem's file).
    template : bool or None
        Fork the process from this judge's template (:mod:`.template`: torch imported
        once, a fresh process without the imports' seconds) rather than start a new
        interpreter; None: unless the environment variable
        ``NUMORACLE_KERNELBENCH_TEMPLATE`` is ``0``. Where the template cannot fork,
        a new interpreter is started.
    """

    def __init__(self, candidate: str | Path, device: str, timeout: float,
                 readable: Sequence[str | Path] = (), template: bool | None = None) -> None:
        self.template = template if template is not None else \
            os.environ.get("NUMORACLE_KERNELBENCH_TEMPLATE", "1") != "0"
        self.candidate, self.device, self.timeout = str(Path(candidate).resolve()), device, \
            timeout
        #: further files the process may read (the problem's file: the candidate's task)
        self.readable = [str(Path(p).resolve()) for p in readable]
        self.proc: subprocess.Popen[bytes] | Child | None = None
        self.conn: Connection | None = None
        self.hardening: list[str] = []
        #: seconds per phase of the last start of the process (:func:`serve`'s clock)
        self.laps: dict[str, float] = {}
        #: seconds spent starting the process, in all (its starts included in ``run``)
        self.started_in = 0.0
        # the folders the outputs are handed over in: shared memory, or where it has no
        # room the temporary folder (the process may read and write these alone)
        self.folders = [tempfile.mkdtemp(prefix="numoracle-outputs-", dir=d)
                        for d in ("/dev/shm", None) if d is None or os.path.isdir(d)]
        fd, self.path = tempfile.mkstemp(prefix="outputs-", dir=self.folders[0])
        os.close(fd)
        self.size = 0
        self.buf: mmap.mmap | None = None
        #: the shared inputs file (made on the first case with a large array)
        self.inputs: str | None = None

    def _start(self) -> tuple[str, str] | None:
        """Start the process; None when it is ready, else (kind, sentence)."""
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        self.proc = None
        if self.template:
            try:
                self.proc = template().fork(os.dup(theirs.fileno()), {
                    "candidate": self.candidate, "device": self.device,
                    "shared": self.folders, "judge_dir": os.getcwd(),
                    "readable": self.readable, "env": env})
                theirs.close()
            except OSError:  # no template: a new interpreter instead
                self.template = False
        if self.proc is None:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(theirs.fileno()), self.candidate,
                 self.device, json.dumps(sys.path), json.dumps([self.folders, self.readable]),
                 os.getcwd()], pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL)
            theirs.close()
        self.conn = Connection(ours.detach())
        try:
            answer = self._receive(STARTUP_TIMEOUT)
        except EOFError:
            answer = None
        if answer is None or answer[0] != "ready":
            code = self._stop()
            return ("crash", f"the candidate's process did not start: {describe_exit(code)}")
        _, self.hardening, (status, text), changed, self.laps = answer
        if status == "missing":
            return ("missing", text)
        if status == "bad":
            return ("bad", text)
        if changed:
            return ("tamper", "the candidate replaced what the judge's worker relies on ("
                    + ", ".join(changed[:6]) + (", ..." if len(changed) > 6 else "")
                    + ") when its file was imported")
        return None

    def prepare(self) -> str | None:
        """Start the process without running a case (importing the candidate: an
        inline extension is compiled, into ``TORCH_EXTENSIONS_DIR`` where that is
        set); None when it is ready, else why it is not (a sentence)."""
        if self.proc is not None and self.proc.poll() is None:
            return None
        began = time.perf_counter()
        failed = self._start()
        self.started_in += time.perf_counter() - began
        if failed is not None:
            self._stop()
            return failed[1]
        return None

    def _receive(self, timeout: float) -> Any:
        """The process's next message; None past ``timeout``; EOFError when it died."""
        assert self.conn is not None
        try:
            if not self.conn.poll(timeout):
                return None
            return self.conn.recv()
        except OSError as exc:
            raise EOFError from exc

    def _stop(self) -> int | None:
        """End the process; its exit code."""
        proc, conn = self.proc, self.conn
        self.proc = self.conn = None
        if conn is not None:
            with contextlib.suppress(OSError, ValueError):
                conn.send(None)
            conn.close()
        if proc is None:
            return None
        try:
            return proc.wait(2)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(10)

    def _buffer(self, size: int) -> None:
        """A zeroed shared buffer of ``size`` bytes (in memory where ``/dev/shm`` has
        room for it, else in a file of the temporary folder)."""
        size = max(size, mmap.PAGESIZE)
        if self.buf is not None:
            self.buf.close()
            self.buf = None
        folder = os.path.dirname(self.path)
        if os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize + self.size < size \
                and folder != self.folders[-1]:
            os.unlink(self.path)  # /dev/shm too small: a file on disk instead
            fd, self.path = tempfile.mkstemp(prefix="outputs-", dir=self.folders[-1])
            os.close(fd)
        with open(self.path, "r+b") as f:
            f.truncate(0)  # a truncated file reads as zeros: no stale bytes of a case
            f.truncate(size)
            self.buf = mmap.mmap(f.fileno(), size)
        self.size = size

    def run(self, request: Mapping[str, Any], capacity: int) -> dict[str, Any]:
        """One case: the process's answer with ``outputs`` (host arrays) read from the
        shared buffer, or with ``fault`` and ``fault_kind``."""
        if self.proc is None or self.proc.poll() is not None:
            began = time.perf_counter()
            failed = self._start()
            self.started_in += time.perf_counter() - began
            if failed is not None:
                self._stop()
                return {"fault": failed[1], "fault_kind": failed[0], "notes": []}
        assert self.conn is not None and self.proc is not None
        self._buffer(capacity)
        assert self.buf is not None
        try:
            self.conn.send((self._shared(request), self.path, self.size))
        except (OSError, ValueError):
            return self._died()
        try:
            answer = self._receive(self.timeout)
        except EOFError:
            return self._died()
        if answer is None:
            self.proc.kill()
            self._stop()
            return {"fault": f"the candidate did not return within the timeout of "
                             f"{self.timeout:g} s (hung? set timeout= or --timeout); its "
                             "process was killed", "fault_kind": "hang", "notes": []}
        result: dict[str, Any] = dict(answer[1])
        _read_all(self.buf, request, result)
        if result.get("fault_kind") in ("cuda", "exit"):
            self._stop()
        return result

    def _shared(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The request to send: its large arrays written to the shared inputs file in
        ``/dev/shm`` and named there (:class:`SharedInput`); where ``/dev/shm`` has no
        room for them (or there is none) the request as it is, pickled."""
        out = dict(request)
        arrays = _shared_arrays(request)
        if not arrays:
            return out
        places, end = [], 0
        for _, _, a in arrays:
            places.append(end)
            end += -(-a.nbytes // 64) * 64
        folder = self.folders[0]
        stat = os.statvfs(folder)
        held = 0
        if self.inputs is not None:
            with contextlib.suppress(OSError):
                held = os.path.getsize(self.inputs)
        if len(self.folders) < 2 or stat.f_bavail * stat.f_frsize + held < end + (1 << 28):
            return out  # no room in shared memory: pickled through the socket, as before
        if self.inputs is None:
            fd, self.inputs = tempfile.mkstemp(prefix="inputs-", dir=folder)
            os.close(fd)
        try:
            with open(self.inputs, "r+b") as f:
                f.truncate(0)
                f.truncate(end)
                for (_, _, a), at in zip(arrays, places, strict=True):
                    f.seek(at)
                    f.write(memoryview(np.ascontiguousarray(a)).cast("B"))
        except OSError:  # filled meanwhile (other judgements beside): pickled instead
            with contextlib.suppress(OSError):
                os.truncate(self.inputs, 0)
            return out
        for key in _SHARED_KEYS:
            if isinstance(out.get(key), Mapping):
                out[key] = dict(out[key])
            elif isinstance(out.get(key), (list, tuple)):
                out[key] = list(out[key])
        for (key, i, a), at in zip(arrays, places, strict=True):
            out[key][i] = SharedInput(at, tuple(a.shape), a.dtype.str)
        out["shared_inputs"] = (self.inputs, end)
        return out

    def _died(self) -> dict[str, Any]:
        code = self._stop()
        return {"fault": describe_exit(code), "fault_kind": "crash", "notes": []}

    def close(self) -> None:
        """End the process and free the shared buffer."""
        self._stop()
        if self.buf is not None:
            self.buf.close()
            self.buf = None
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        if self.inputs is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.inputs)
            self.inputs = None
        for folder in self.folders:
            with contextlib.suppress(OSError):
                os.rmdir(folder)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
