"""Parallel shards of one harness command, each under a time limit.

A survey too long for one process (every KernelBench problem under three
claims, say) runs as ``shards`` copies of its own command line, the copy ``i``
given ``--shard i`` on top of the driver's arguments. A shard writes its rows
after every item to a file of its own, so one stopped at the time limit keeps
what it finished; the driver waits for all of them (killing the process group
of any still running at the limit), gathers their logs into one, and hands back
the shard files that exist for the command's merge.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

__all__ = ["run_shards"]

ROOT = Path(__file__).resolve().parents[1]


def _environment(shards: int) -> dict[str, str]:
    """The shards' environment: this checkout importable, output unbuffered, and the
    host's cores shared out among the shards (unless the caller fixed the threads)."""
    env = dict(os.environ)
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + path if path else "")
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 2) // max(shards, 1))))
    return env


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def run_shards(argv: Sequence[str], shards: int, seconds: float, folder: Path,
               stem: str) -> list[Path]:
    """Run ``python -m benchmarks *argv --shard i`` for ``i < shards`` side by side.

    Parameters
    ----------
    argv : sequence of str
        The harness command of one shard without ``--shard`` (it carries
        ``--shards`` itself, so each copy knows its share).
    shards : int
        How many copies run at once.
    seconds : float
        Wall-clock limit of the whole run: a shard still running then is killed
        with its child processes and keeps the rows it wrote.
    folder : Path
        Where the shards write ``{stem}_shard{i}.json`` (the command's own
        convention) and where the gathered log ``{stem}.log`` goes.
    stem : str
        The shard files' and the log's name.

    Returns
    -------
    list of Path
        The shard files that exist after the run, in shard order.
    """
    folder.mkdir(parents=True, exist_ok=True)
    env = _environment(shards)
    running: list[tuple[subprocess.Popen[bytes], IO[str]]] = []
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        for i in range(shards):
            shard_log: IO[str] = (folder / f"{stem}_shard{i}.log").open("w")
            cmd = [sys.executable, "-m", "benchmarks", *argv, "--shard", str(i)]
            running.append((subprocess.Popen(cmd, stdout=shard_log, stderr=subprocess.STDOUT,
                                             env=env, start_new_session=True), shard_log))
        deadline = time.monotonic() + seconds
        for proc, log in running:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.write(f"\n[shard stopped at the {seconds:g} s limit]\n")
    finally:
        # a shard runs in a session of its own (its time limit kills its children too), so
        # the driver stops them itself: at the limit, or when it is stopped
        for proc, log in running:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()
        signal.signal(signal.SIGTERM, previous)
    with (folder / f"{stem}.log").open("w") as gathered:
        for i in range(shards):
            part = folder / f"{stem}_shard{i}.log"
            gathered.write(f"== shard {i}\n{part.read_text()}")
            part.unlink()
    files = [folder / f"{stem}_shard{i}.json" for i in range(shards)]
    return [f for f in files if f.exists()]
