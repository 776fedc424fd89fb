"""The template the candidates' processes are forked from: torch imported once.

A candidate's process (:mod:`.sandbox`) spends most of its start importing torch
and the machinery of the dispatch modes and the profiler it records with,
seconds per process on a busy machine, paid again for every candidate and after
every crash. :class:`Template` starts, once per judge's process, a Python process
that imports those modules (:data:`PRELOAD`) and does nothing else: it never
initialises a device, never sees a case, a reference output or a candidate.
For each candidate's process the judge sends it one end of a fresh socket pair
and what the process needs (the candidate, the device, the folders, the
judge's environment and working directory); the template forks, and the child
becomes the candidate's process (:func:`~.sandbox.forked`) with nothing of the
judge's in its memory. A fork has one thread, so on the CPU the child can still
move into a network namespace of its own before it runs anything else.

The template reaps its children and tells the judge how each ended (the exit
code as ``subprocess`` gives it: negative for a signal); :class:`Child` gives a
forked process the part of ``Popen``'s interface the sandbox uses. When the
judge's end of the control socket closes (the judge ended), the template kills
its children and ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Template", "Child", "PRELOAD", "template"]

#: what the template imports once: torch, the dispatch modes' and the profiler's
#: machinery (their first use imports them), the worker's own modules
PRELOAD = ("torch", "torch._dynamo", "torch.profiler", "numpy", "numoracle.kernelbench.guard",
           "numoracle.kernelbench.candidate", "numoracle.kernelbench.landlock",
           "numoracle.kernelbench.sandbox")

#: the template process's program: its imports, then :func:`main`
_BOOT = r"""
import importlib, json, sys
fd, path, preload = int(sys.argv[1]), sys.argv[2], sys.argv[3]
sys.path[:] = json.loads(path)
for name in json.loads(preload):
    importlib.import_module(name)
from numoracle.kernelbench.sandbox import forked
from numoracle.kernelbench.template import main
main(fd, forked)
"""
#: the largest message either side reads (a request carries the judge's environment)
_MESSAGE = 1 << 20


def main(fd: int, forked: Callable[..., None]) -> None:
    """The template's loop: fork a candidate's process per request (``forked(fd,
    **args)`` in the child, which never returns), report exits."""
    control = socket.socket(fileno=fd)
    children: set[int] = set()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                control.send(json.dumps(["exit", pid,
                                         os.waitstatus_to_exitcode(status)]).encode())
        ready, _, _ = select.select([control], [], [], 0.05)
        if not ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(control, _MESSAGE, 1)
        except OSError:
            data, fds = b"", []
        if not data:  # the judge is gone: so are its candidates' processes
            for pid in children:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            os._exit(0)
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            control.close()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            try:
                os.chdir(request["cwd"])
                forked(fds[0], **request["args"])
            finally:
                os._exit(1)
        os.close(fds[0])
        children.add(pid)
        control.send(json.dumps(["pid", pid]).encode())


class Template:
    """The template process of this judge's process (see the module's docstring)."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, str(theirs.fileno()), json.dumps(sys.path),
             json.dumps(PRELOAD)], pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        theirs.close()
        self.control = ours
        #: exit codes of the forked processes that ended, by pid
        self.exits: dict[int, int] = {}
        #: the process that started it (a forked judge starts its own)
        self.owner = os.getpid()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read(self, timeout: float) -> list[Any] | None:
        """The template's next message within ``timeout`` seconds (an exit is kept)."""
        ready, _, _ = select.select([self.control], [], [], max(timeout, 0.0))
        if not ready:
            return None
        data = self.control.recv(_MESSAGE)
        if not data:
            raise OSError("the template process ended")
        message: list[Any] = json.loads(data)
        if message[0] == "exit":
            self.exits[int(message[1])] = int(message[2])
        return message

    def fork(self, fd: int, args: Mapping[str, Any], timeout: float = 600.0) -> Child:
        """A candidate's process forked with ``args`` (:func:`~.sandbox.forked`'s) and
        the socket ``fd`` (closed here once sent)."""
        try:
            socket.send_fds(self.control, [json.dumps({"cwd": os.getcwd(),
                                                       "args": dict(args)}).encode()], [fd])
        finally:
            os.close(fd)
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(deadline - time.monotonic())
            if message is None:
                raise OSError(f"the template did not fork within {timeout:g} s")
            if message[0] == "pid":
                return Child(self, int(message[1]))

    def poll(self, pid: int, timeout: float = 0.0) -> int | None:
        """``pid``'s exit code once it ended (waiting up to ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while pid not in self.exits:
            try:
                if self._read(deadline - time.monotonic()) is None:
                    break
            except OSError:
                return -signal.SIGKILL  # the template died: its children were killed
        return self.exits.get(pid)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.control.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


class Child:
    """A process forked from the template, with the part of ``Popen``'s interface the
    sandbox uses (``poll``, ``wait``, ``kill``)."""

    def __init__(self, owner: Template, pid: int) -> None:
        self.owner, self.pid = owner, pid

    def poll(self) -> int | None:
        return self.owner.poll(self.pid)

    def wait(self, timeout: float | None = None) -> int:
        code = self.owner.poll(self.pid, 1e9 if timeout is None else timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"candidate process {self.pid}", timeout or 0.0)
        return code

    def kill(self) -> None:
        if self.owner.poll(self.pid) is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


_TEMPLATE: list[Template] = []


def template() -> Template:
    """This process's template, started on first use (and again if it died)."""
    if not _TEMPLATE or _TEMPLATE[0].owner != os.getpid() or not _TEMPLATE[0].alive():
        _TEMPLATE[:] = [Template()]
    return _TEMPLATE[0]
