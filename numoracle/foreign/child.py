"""Isolated shared-library calls: the library is called in a child process.

``python -m numoracle.foreign.child`` reads calls from stdin and answers on
stdout (length-prefixed pickles of host arrays and values). When the library
crashes the child (a segfault, an abort, ``exit()``), the parent sees the pipe
close and raises :class:`~numoracle.foreign.sharedlib.ForeignError` with the
exit status and the child's stderr: the case fails with a repro and the next
call starts a fresh child. A call past its timeout kills the child.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import selectors
import signal
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

__all__ = ["Child", "call_isolated"]


def _read_exact(stream: Any, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = stream.read(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def _send(stream: Any, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


class Child:
    """One child process serving calls of one library symbol."""

    def __init__(self, path: str, symbol: str, returns: str | None) -> None:
        self.key = (path, symbol, returns)
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "numoracle.foreign.child", path, symbol, returns or ""],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)

    def call(self, values: list[Any], wanted: dict[str, int], timeout: float) -> tuple[int, dict]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            _send(self.proc.stdin, (values, wanted))
            sel = selectors.DefaultSelector()
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + timeout
            if not sel.select(max(0.0, deadline - time.monotonic())):
                self.close()
                raise _crash(f"the isolated call did not return within {timeout:g} s (hung?)")
            (n,) = struct.unpack("<Q", _read_exact(self.proc.stdout, 8))
            status, outs = pickle.loads(_read_exact(self.proc.stdout, n))
            return status, outs
        except (EOFError, BrokenPipeError, struct.error):
            code = self.proc.wait()
            self.stderr.seek(0)
            err = self.stderr.read().decode(errors="replace").strip()[-2000:]
            what = (f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}")
            raise _crash(f"the library call crashed its process ({what})"
                         + (f"; stderr: {err}" if err else "")) from None

    def close(self) -> None:
        """Stop the child (if running) and close its pipes."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.stderr.close()


def _crash(message: str) -> Exception:
    from .sharedlib import ForeignError  # noqa: PLC0415 - cycle

    return ForeignError(message)


def call_isolated(child: Child | None, path: str, symbol: str, returns: str | None,
                  values: list[Any], wanted: dict[str, int],
                  timeout: float) -> tuple[Child | None, int, dict[str, Any]]:
    """Run one call in ``child`` (started when None or dead); returns the child
    to use next time (None after a crash), the status and the outputs."""
    if child is None or child.proc.poll() is not None or child.key != (path, symbol, returns):
        if child is not None:
            child.close()
        child = Child(path, symbol, returns)
    try:
        status, outs = child.call(values, wanted, timeout)
    except Exception:
        child.close()
        raise
    return child, status, outs


def _serve(path: str, symbol: str, returns: str) -> None:
    func = getattr(ctypes.CDLL(path), symbol)
    func.restype = ctypes.c_int if returns == "status" else None
    types = {"int32": ctypes.c_int32, "int64": ctypes.c_int64,
             "float32": ctypes.c_float, "float64": ctypes.c_double}
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            (n,) = struct.unpack("<Q", _read_exact(stdin, 8))
        except EOFError:
            return
        values, wanted = pickle.loads(_read_exact(stdin, n))
        args: list[Any] = []
        for v in values:
            if v is None:
                args.append(ctypes.c_void_p(None))
            elif isinstance(v, np.ndarray):
                args.append(ctypes.c_void_p(v.ctypes.data))
            else:
                args.append(types[v[1]](v[2]) if v[0] != "stream" else ctypes.c_void_p(None))
        status = func(*args)
        _send(stdout, (int(status or 0), {k: values[i] for k, i in wanted.items()}))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONFAULTHANDLER", "1")
    _serve(sys.argv[1], sys.argv[2], sys.argv[3])
