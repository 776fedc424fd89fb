"""Command targets: an external program that reads and writes ``.npy`` files.

For every case numoracle makes a case folder holding each input as
``NAME.npy`` (in its declared layout: the array's shape is in the layout's
axis order, and a column-major layout is saved with ``fortran_order``) and
``manifest.json`` (op, parameters, dtype, and for every input and expected
output its file, shape, layout and dtype). The program writes each output as
``NAME.npy`` beside them, shaped in the output's declared axis order.

Once per case (default)
    ``argv`` runs with ``{dir}`` replaced by the case folder (or the folder
    appended when ``argv`` has no ``{dir}``); a non-zero exit status, its
    stderr, or a run past ``timeout`` is a failing verdict.
Persistent (``persistent=True``)
    ``argv`` starts once; numoracle writes one line per case to its stdin, the
    absolute case folder, and reads one line back from its stdout: ``ok``, or
    ``error MESSAGE``. A process that dies is reported with its exit status and
    stderr and started again for the next case.
"""

from __future__ import annotations

import json
import os
import selectors
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..cases.layouts import shape_in
from ..errors import InvalidArgument
from ..oracle.ops import get_op
from ..oracle.precision import PrecisionModel, get_model
from ..targets.backends import get_backend
from ..targets.target import Target
from .declare import foreign_target
from .rebuild import write_source
from .sharedlib import ForeignError
from .spec import ArgSpec, ParamReader, array_names

__all__ = ["command_target", "write_case_folder", "read_outputs"]


def _jsonable(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}


def write_case_folder(folder: Path, spec: ArgSpec, params: Mapping[str, Any],
                      inputs: Mapping[str, np.ndarray], extra: Mapping[str, Any] | None = None,
                      ) -> dict[str, Any]:
    """Write ``inputs`` (already in their declared axis order and memory order)
    and ``manifest.json`` into ``folder``; returns the manifest."""
    op = get_op(spec.op)
    folder.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"op": spec.op, "params": _jsonable(params), "dtype": spec.dtype,
                                "inputs": {}, "outputs": {}}
    for name, arr in inputs.items():
        np.save(folder / f"{name}.npy", arr)
        manifest["inputs"][name] = {"file": f"{name}.npy", "shape": list(arr.shape),
                                    "layout": spec.layout(name), "dtype": spec.dtype}
    shapes = op.output_shapes(params)
    for name in spec.outputs:
        if name in shapes:
            order, _ = spec.order_and_memory(name)
            manifest["outputs"][name] = {
                "file": f"{name}.npy", "layout": spec.layout(name), "dtype": spec.dtype,
                "shape": list(shape_in(shapes[name], spec.axes(name), order))}
    manifest.update(extra or {})
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def read_outputs(folder: Path, manifest: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The outputs a program wrote into ``folder`` (ForeignError naming what is
    missing or malformed)."""
    out = {}
    for name, info in manifest["outputs"].items():
        path = folder / info["file"]
        if not path.is_file():
            written = sorted(p.name for p in folder.iterdir())
            raise ForeignError(f"the program wrote no {info['file']} (the folder holds "
                               f"{written})")
        try:
            arr = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise ForeignError(f"{info['file']} is not a readable .npy file: {exc}") from None
        if arr.dtype != np.dtype(info["dtype"]):
            raise ForeignError(f"{info['file']} has dtype {arr.dtype}, expected {info['dtype']}")
        out[name] = arr
    return out


class _Process:
    """The persistent program: one line in per case, one line out."""

    def __init__(self, argv: list[str], cwd: str | None, env: Mapping[str, str] | None) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            cwd=cwd, env=None if env is None else {**os.environ, **env}, text=True, bufsize=1)
        self.buffer = ""

    def ask(self, folder: str, timeout: float) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(folder + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died() from None
        fd = self.proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while "\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                self.proc.kill()
                self.close()
                raise ForeignError(f"the persistent program did not answer within {timeout:g} s "
                                   "(hung?)")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise self._died()
            self.buffer += chunk.decode(errors="replace")
        line, _, self.buffer = self.buffer.partition("\n")
        return line.strip()

    def _died(self) -> ForeignError:
        code = self.proc.wait()
        return ForeignError(f"the persistent program died (exit status {code})"
                            + self.stderr_tail())

    def stderr_tail(self) -> str:
        self.stderr.seek(0)
        err = self.stderr.read().decode(errors="replace").strip()[-2000:]
        return f"; stderr: {err}" if err else ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        """End the program (EOF on its stdin, killed after 2 s) and close its pipes."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=2)
            except (subprocess.TimeoutExpired, OSError):
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()
        self.stderr.close()


class _Run:
    """The function a command target runs: a case folder, the program, the outputs."""

    def __init__(self, spec: ArgSpec, argv: list[str], persistent: bool, timeout: float,
                 cwd: str | None, env: Mapping[str, str] | None, keep: bool) -> None:
        self.foreign_spec = spec
        self.argv, self.persistent, self.timeout = argv, persistent, timeout
        self.cwd, self.env, self.keep = cwd, env, keep
        self.reader = ParamReader(spec.op)
        self.proc: _Process | None = None
        self.lock = threading.Lock()

    def __call__(self, **inputs: Any) -> dict[str, np.ndarray]:
        params = self.reader.read(inputs)
        spec = self.foreign_spec
        arrays = {k: (np.asfortranarray(v) if spec.order_and_memory(k)[1] == "F"
                      else np.ascontiguousarray(v))
                  for k, v in inputs.items() if k != "params" and v is not None}
        folder = Path(tempfile.mkdtemp(prefix="numoracle-case-"))
        try:
            manifest = write_case_folder(folder, spec, params, arrays)
            if self.persistent:
                self._ask(str(folder))
            else:
                self._once(str(folder))
            return read_outputs(folder, manifest)
        finally:
            if not self.keep:
                shutil.rmtree(folder, ignore_errors=True)

    def _once(self, folder: str) -> None:
        argv = [a.replace("{dir}", folder) for a in self.argv]
        if not any("{dir}" in a for a in self.argv):
            argv.append(folder)
        try:
            done = subprocess.run(argv, capture_output=True, timeout=self.timeout,
                                  cwd=self.cwd, check=False,
                                  env=None if self.env is None else {**os.environ, **self.env})
        except subprocess.TimeoutExpired:
            raise ForeignError(f"the command did not finish within {self.timeout:g} s "
                               "(hung?)") from None
        except OSError as exc:
            raise ForeignError(f"the command {shlex.join(argv)} cannot run: {exc}") from None
        if done.returncode != 0:
            err = done.stderr.decode(errors="replace").strip()[-2000:]
            raise ForeignError(f"the command exited with status {done.returncode}"
                               + (f"; stderr: {err}" if err else ""))

    def _ask(self, folder: str) -> None:
        with self.lock:
            if self.proc is None or not self.proc.alive():
                if self.proc is not None:
                    self.proc.close()
                try:
                    self.proc = _Process(self.argv, self.cwd, self.env)
                except OSError as exc:
                    raise ForeignError(f"the command {shlex.join(self.argv)} cannot start: "
                                       f"{exc}") from None
            answer = self.proc.ask(folder, self.timeout)
        if answer == "ok":
            return
        if answer.startswith("error"):
            raise ForeignError(f"the program reported: {answer[5:].strip()}")
        raise ForeignError(f"the program answered {answer!r}; the protocol is one line, 'ok' "
                           "or 'error MESSAGE', per case folder")

    def close(self) -> None:
        """Stop the persistent process."""
        if not hasattr(self, "lock"):
            return
        with self.lock:
            if self.proc is not None:
                self.proc.close()
                self.proc = None

    def __del__(self) -> None:
        self.close()


def command_target(
    argv: Sequence[str] | str,
    *,
    op: str,
    precision: str | PrecisionModel | Mapping[str, Any] = "fp32",
    outputs: Sequence[str] | None = None,
    layouts: Mapping[str, str] | str | None = None,
    name: str | None = None,
    persistent: bool = False,
    timeout: float = 60.0,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    keep_folders: bool = False,
    max_reduction: int | None = None,
    spec_dir: str | Path | None = None,
    source: str | None = None,
) -> Target:
    """A :class:`~numoracle.targets.target.Target` that runs an external program.

    Parameters
    ----------
    argv : sequence of str or str
        The command (a string is split like a shell would); ``{dir}`` stands
        for the case folder.
    op : str
        The op it computes.
    precision : str, PrecisionModel or dict
        The model it claims (its storage format is the files' dtype).
    outputs : sequence of str, optional
        The outputs it writes (default: every output of the op).
    layouts : mapping or str, optional
        Layout of each array (see :mod:`numoracle.foreign.spec`).
    name : str, optional
        Name in reports (default: the program's file name).
    persistent : bool
        One long-running process with the line protocol on stdin/stdout.
    timeout : float
        Seconds per case.
    cwd, env : optional
        Working directory and extra environment variables of the program.
    keep_folders : bool
        Keep the case folders (in the temporary directory) for inspection.
    max_reduction : int or None
        Longest reduction to test.
    spec_dir : path, optional
        Where the spec file that repros rebuild the target from goes.
    """
    if isinstance(argv, str):
        argv = shlex.split(argv)
    if isinstance(argv, (bytes, Mapping)) or not argv or \
            not all(isinstance(a, str) for a in argv):
        raise InvalidArgument(f"argv={argv!r} must be a non-empty list of strings (or a "
                              "command line), e.g. ['./kernel', '{dir}']")
    argv = list(argv)
    if persistent and any("{dir}" in a for a in argv):
        raise InvalidArgument(f"argv={argv!r}: a persistent program reads case folders from "
                              "stdin; leave {dir} out")
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise InvalidArgument(f"timeout={timeout!r} must be a positive number of seconds")
    model = get_model(precision)
    ins, outs = array_names(op)
    if outputs is not None and (isinstance(outputs, str) or not outputs):
        raise InvalidArgument(f"outputs={outputs!r} must be a non-empty list of output names, "
                              f"from {outs}")
    unknown = [o for o in outputs or () if o not in outs]
    if unknown:
        raise InvalidArgument(f"outputs={list(outputs or ())!r} names {unknown}, which {op} "
                              f"does not compute; its outputs are {outs}")
    wanted = list(outputs if outputs is not None else outs)
    spec = ArgSpec.build(op, list(ins) + [o for o in wanted if o not in ins],
                         precision=model, layouts=layouts, check_dims=False)
    cwd = str(Path(cwd or os.getcwd()).resolve())
    fn = _Run(spec, argv, persistent, float(timeout), cwd, env, keep_folders)
    program = argv[1] if len(argv) > 1 and Path(argv[0]).name.startswith("python") else argv[0]
    name = name or Path(program).name
    if source is None:
        source = write_source({"kind": "command", "argv": argv, "op": op,
                               "precision": model.to_dict(), "outputs": list(spec.outputs),
                               "layouts": dict(spec.layouts), "name": name,
                               "persistent": persistent, "timeout": timeout, "cwd": cwd,
                               "env": dict(env) if env else None,
                               "max_reduction": max_reduction}, spec_dir)
    return foreign_target(spec, fn, name=name, backend="numpy", model=model,
                          max_reduction=max_reduction, source=source,
                          description=f"command {shlex.join(argv)}"
                          + (" (persistent)" if persistent else ""),
                          available=get_backend("numpy").available)
