"""A judging worker of the official run: problems judged one after the other in one
process (torch imported once), each with its own ``Model`` as the candidate, and
the row each judgement comes to (how its official instance was judged, its
seconds per phase, its peak device memory).

``python -m benchmarks.kernelbench.official serve`` runs :func:`serve`; the driver
(:mod:`benchmarks.kernelbench.official`) writes one JSON line per problem on its
stdin and reads the rows back from files.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.kernelbench.admission import GIB

__all__ = ["HOW", "GIB", "classify", "judge_one", "serve", "write_whole", "log_tail",
           "free_device_memory", "device_usable", "PeakPool", "host_peak", "cap",
           "warm_device", "WARM_PROBLEM", "warm_after_first"]

#: how an official instance may be judged, in table order
HOW = ("whole", "sampled rows", "reduced sizes", "not finished", "refused")


def classify(row: dict[str, Any]) -> str:
    """How the official instance of a judged ``row`` (a judgement's dict) was judged:
    whole in pieces of rows counts as whole (every element judged against its exact
    value; the row's ``official_how`` says ``pieces``)."""
    if row["status"] in ("abstain", "refused", "not judged"):
        return "refused"
    official = row.get("official_how")
    return {"sampled": "sampled rows", "reduced": "reduced sizes"}.get(official, "whole")


def judge_one(problem: Path, out: Path, *, device: str, max_bytes: int | None,
              examples: int, limit: float, fall_back: bool = True,
              peaks: Any = None) -> dict[str, Any]:
    """Judge ``problem`` with its own ``Model`` as the candidate; the row, also
    written to ``out`` (JSON). ``fall_back`` False: an official instance the oracle
    runs out of device memory on is ``not judged`` (the driver judges it again,
    alone), not judged smaller. ``peaks``: the CuPy pool's :class:`PeakPool`."""
    import torch  # noqa: PLC0415 - torch-heavy, in the problem's own process

    from benchmarks.kernelbench.candidates import official_how, write_candidate  # noqa: PLC0415
    from numoracle.kernelbench.judge import (  # noqa: PLC0415
        DEFAULT_MAX_BYTES,
        judge,
        whole_bytes,
    )

    t0 = time.perf_counter()
    budget = whole_bytes(device) if max_bytes is None else max_bytes
    failed = ""
    with tempfile.TemporaryDirectory() as tmp:
        cand = write_candidate(Path(tmp), problem, "model")
        try:
            j = judge(problem, cand, precision="fp32", examples=examples, device=device,
                      timeout=limit, max_bytes=budget, shrink=False, fall_back=fall_back)
        except Exception as exc:  # noqa: BLE001 - the oracle on the device broke: said, and
            # the problem judged again with the oracle on the host
            failed = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            if not fall_back and "memory" in failed.lower():
                return _oom_row(out, failed, time.perf_counter() - t0, budget)
            module = sys.modules["numoracle.kernelbench.judge"]
            module.oracle_device = lambda device: None  # type: ignore[attr-defined]
            j = judge(problem, cand, precision="fp32", examples=examples, device=device,
                      timeout=limit, max_bytes=DEFAULT_MAX_BYTES, shrink=False)
    row = j.as_dict()
    if failed:
        row["notes"].insert(0, f"the oracle on the device raised {failed[:200]}; judged with "
                               "the oracle on the host")
        row["device_oracle_error"] = failed
    row["official_how"] = official_how(j) if j.status not in ("refused", "abstain") else ""
    row["how"] = classify(row)
    row["seconds"] = round(time.perf_counter() - t0, 2)
    row["max_bytes"] = budget
    if device.startswith("cuda") and torch.cuda.is_available():
        row.update(_peaks(peaks))
    _put(out, row)
    return row


def _oom_row(out: Path, failed: str, seconds: float, budget: int) -> dict[str, Any]:
    row = {"status": "not judged", "how": "refused", "seconds": round(seconds, 2),
           "notes": [], "max_bytes": budget,
           "reason": f"not judged: the oracle on the device ran out of memory ({failed[:200]})"}
    _put(out, row)
    return row


def _peaks(peaks: Any) -> dict[str, float]:
    """The judge's process's peak device memory: reserved (``peak_gib``: torch's
    allocator's and CuPy's pool's, cached blocks too; what other processes cannot
    use) and in use (``live_gib``: what the judgement needed), each the sum of the
    two peaks (an upper bound of the peak of both)."""
    import torch  # noqa: PLC0415 - torch-heavy, in the problem's own process

    t, tl = torch.cuda.max_memory_reserved() / GIB, torch.cuda.max_memory_allocated() / GIB
    c = 0.0 if peaks is None else peaks.peak / GIB
    cl = 0.0 if peaks is None else peaks.live / GIB
    return {"peak_gib": round(t + c, 2), "live_gib": round(tl + cl, 2),
            "peak_torch_gib": round(t, 2), "peak_cupy_gib": round(c, 2)}


class PeakPool:
    """CuPy's default memory pool behind an allocator that keeps the most bytes the
    pool held (:attr:`peak`) and had in use (:attr:`live`); :meth:`reset` starts
    again. CuPy's pool has no peak of its own, and torch's counts only torch's
    allocations."""

    def __init__(self, cupy: Any) -> None:
        self.pool = cupy.get_default_memory_pool()
        self.peak = self.live = 0
        cupy.cuda.set_allocator(self.malloc)

    def malloc(self, size: int) -> Any:
        mem = self.pool.malloc(size)
        self.peak = max(self.peak, self.pool.total_bytes())
        self.live = max(self.live, self.pool.used_bytes())
        return mem

    def reset(self) -> None:
        self.peak, self.live = self.pool.total_bytes(), self.pool.used_bytes()


def _put(out: Path, row: dict[str, Any]) -> None:
    write_whole(out, json.dumps(row) + "\n")


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a driver reads it when it appears)."""
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    os.replace(part, path)


def log_tail(log: Path, lines: int = 6) -> str:
    """The last lines of a child's log, on one line."""
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " / ".join(t.strip() for t in text[-lines:] if t.strip())[-600:]


def free_device_memory(cuda: bool) -> None:
    """After a judgement in a worker: its garbage collected and, on a GPU, the memory
    torch's and CuPy's pools cached handed back (other problems run beside it)."""
    import gc  # noqa: PLC0415

    gc.collect()
    if cuda:
        import torch  # noqa: PLC0415 - torch-heavy, in a worker's process

        from numoracle.oracle.xp import release_cached_memory  # noqa: PLC0415

        release_cached_memory(0)
        torch.cuda.empty_cache()


def serve(device: str) -> int:
    """A judging worker: judges the problems the driver writes on stdin (one JSON line
    each: ``problem``, ``out``, ``examples``, ``limit``, ``max_bytes``) one after the
    other, torch imported once; each problem's candidate still runs in a process of
    its own (the judge's sandbox). Ends at the end of stdin, or after a problem whose
    judgement raised (its row says so; the driver starts a fresh worker)."""
    import torch  # noqa: PLC0415 - torch-heavy, in the worker's own process

    from numoracle.kernelbench import judge as _  # noqa: F401, PLC0415 - imported once
    from numoracle.kernelbench.sandbox import warm  # noqa: PLC0415

    warm()  # the candidates' template imports while this worker waits for a problem
    warm_capture()
    module = sys.modules["numoracle.kernelbench.judge"]
    oracle_device = module.oracle_device  # type: ignore[attr-defined]
    cuda = device.startswith("cuda") and torch.cuda.is_available()
    if cuda and os.environ.get("KB_WARM_DEVICE", "1") != "0":
        warm_after_first(lambda: warm_device(device), os.environ.get("KB_WARM_LOCK"))
        module.oracle_device = oracle_device  # type: ignore[attr-defined]
    peaks = None
    if cuda:
        try:
            import cupy  # noqa: PLC0415 - optional: its pool's peak where it is there

            peaks = PeakPool(cupy)
        except Exception:  # noqa: BLE001 - not installed or no driver: torch's peak alone
            peaks = None
    for line in sys.stdin:
        job = json.loads(line)
        out = Path(job["out"])
        out.with_name(out.name + ".began").touch()  # the driver's clock starts now
        if cuda:
            torch.cuda.reset_peak_memory_stats()
            if peaks is not None:
                peaks.reset()
        host_peak(reset=True)
        capped = cuda and job.get("cap") is not None
        if capped:
            cap(job["cap"], peaks)
        ends = False
        try:
            row = judge_one(Path(job["problem"]), out.with_name(out.name + ".row"),
                            device=device, max_bytes=job["max_bytes"],
                            examples=job["examples"], limit=job["limit"],
                            fall_back=job.get("fall_back", True), peaks=peaks)
        except Exception as exc:  # noqa: BLE001 - said in the row; the worker ends
            row = {"status": "not judged", "how": "refused", "seconds": 0.0, "notes": [],
                   "reason": f"the judge raised {type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:200] if str(exc) else ''}"}
            ends = True
        finally:
            module.oracle_device = oracle_device  # type: ignore[attr-defined]
            free_device_memory(cuda)
            if capped:
                cap(None, peaks)
        # a CUDA error left in this process: the driver gives the next to a fresh worker
        row["worker_ends"] = ends or (cuda and not device_usable())
        high = host_peak()
        if high is not None:
            row["host_peak_gib"] = round(high / GIB, 2)
        _put(out, row)
        if row["worker_ends"]:
            return 1
    return 0


def cap(limit: int | None, peaks: PeakPool | None) -> None:
    """Cap this process's device memory at ``limit`` bytes (None: no cap): torch's
    per-process fraction and CuPy's pool limit, each at ``limit``. An allocator at
    its cap gives its cached blocks back and tries again before it runs out."""
    import torch  # noqa: PLC0415 - torch-heavy, in a worker's process

    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    torch.cuda.set_per_process_memory_fraction(1.0 if limit is None else
                                               min(1.0, limit / total))
    if peaks is not None:
        peaks.pool.set_limit(size=0 if limit is None else int(limit))


def host_peak(reset: bool = False) -> int | None:
    """This process's peak resident bytes since the last reset (Linux's ``VmHWM``;
    ``reset`` starts it again from the resident size now); None where the system does
    not say."""
    try:
        if reset:
            Path("/proc/self/clear_refs").write_text("5")
            return None
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def warm_capture() -> None:
    """Capture a two-op reference on the host once: the first capture's imports and
    set-up (about 2 s: torch's tracing and decompositions, which the judge's planning
    also uses) happen while the worker waits for its first problem."""
    import numpy as np  # noqa: PLC0415 - in a worker's process
    import torch  # noqa: PLC0415

    from numoracle.oracle.traced.capture import Reference, capture  # noqa: PLC0415

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    ref = Reference(model, ["x"])
    params = dict(model.named_parameters())
    tensors: dict[str, Any] = {"x": np.ones((2, 4))}
    tensors.update({name: params[p].detach().double().numpy()
                    for name, p in ref.state.items()})
    capture(ref, tensors)


#: the problem :func:`warm_device` judges: a convolution, a linear layer, a mean, ReLU
#: and softmax, at a few kilobytes
WARM_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.lin = nn.Linear(8, 16)

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return torch.softmax(self.lin(y), dim=-1)


def get_inputs():
    return [torch.rand(4, 3, 10, 10)]


def get_init_inputs():
    return []
"""


def warm_device(device: str) -> float:
    """Judge :data:`WARM_PROBLEM` on ``device`` once, its row thrown away: the
    kernels a judgement on a GPU compiles at first use (CuPy's elementwise and
    reduction kernels of the rules and of the comparison, cuDNN's and cuBLAS's
    set-up, the candidate's recorders) are compiled, and written to CuPy's kernel
    cache, while the worker waits for its first problem (the driver plans the
    problems meanwhile), not on the clock of the first problem it judges. The
    seconds it took (nothing raised here: a warm-up that fails leaves the first
    problem to compile them)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        problem = Path(tmp) / "warm_problem.py"
        problem.write_text(WARM_PROBLEM)
        try:
            judge_one(problem, Path(tmp) / "row.json", device=device, max_bytes=None,
                      examples=0, limit=60.0)
            _compare_in_pieces_once()
        except Exception:  # noqa: BLE001 - a warm-up only: the problems compile instead
            pass
    free_device_memory(True)
    return time.perf_counter() - t0


def warm_after_first(warm: Callable[[], Any], lock: str | None) -> bool:
    """``warm()`` once the first worker's warm-up is done: the first to lock the file
    ``lock`` warms up alone (compiling, and filling CuPy's kernel cache on disk), the
    others wait for it and then warm up from the cache (not all compiling the same
    kernels at once); None: at once. Whether this worker was the first."""
    if lock is None:
        warm()
        return True
    with open(lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another worker warms up: wait until it is done
            fcntl.flock(f, fcntl.LOCK_SH)
            fcntl.flock(f, fcntl.LOCK_UN)
            warm()
            return False
        try:
            warm()
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
        return True


def _compare_in_pieces_once() -> None:
    """A small comparison on the GPU's namespace taken a piece at a time, its median by
    selection: the kernels a large output's comparison compiles (a small one's came
    with the problem)."""
    import numpy as np  # noqa: PLC0415 - in a worker's process

    from numoracle.checking import ratios, verdict  # noqa: PLC0415
    from numoracle.oracle.tracked import bounded, moved  # noqa: PLC0415
    from numoracle.oracle.xp import gpu_namespace, is_torch  # noqa: PLC0415

    xp = gpu_namespace()
    if is_torch(xp):
        return  # a GPU reference is compared in CuPy's namespace or on the host
    value = np.linspace(-1.0, 1.0, 64 * 9).reshape(64, 9)
    ref = moved(bounded(value, np.abs(value) * 1e-7, n=3), xp)
    old = verdict.COMPARE_PIECE, ratios.SELECT_LEAST
    verdict.COMPARE_PIECE, ratios.SELECT_LEAST = 100, 100
    try:
        verdict.compare("warm", xp.asarray(value.astype(np.float32)), ref)
    finally:
        verdict.COMPARE_PIECE, ratios.SELECT_LEAST = old


def device_usable() -> bool:
    """Whether this process's CUDA context still works (a sticky CUDA error ends it)."""
    import torch  # noqa: PLC0415 - torch-heavy, in a worker's process

    try:
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - any error here: the context is lost
        return False
    return True
