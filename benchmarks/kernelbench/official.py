"""KernelBench's official instances judged whole where they fit: every problem's own
``Model`` as the candidate, a time limit per problem.

Each problem is judged by :func:`numoracle.kernelbench.judge.judge` with a
``ModelNew`` that is the problem's own ``Model`` under the ``fp32`` claim, its
official case (and ``--examples`` drawn ones), in one of ``--slots`` judging
workers per device (``serve``: torch imported once, problems judged one after
the other; each problem's candidate still runs in a sandboxed process of its
own). The driver (``run``) first reads every problem's float64 floor (inputs,
parameters and intermediate values,
:func:`~numoracle.kernelbench.cases.float64_bytes`) and an estimate of the
oracle's work (the forward's multiply-adds on the meta device, a transposed
convolution's weighted), then hands the problems out the most work first, on
every GPU it sees: a problem is started on a GPU whose memory left (and the
host's) holds what it reserves, and its worker is killed past ``--limit``
seconds (a fresh one takes its place). A problem is judged *whole* where its
floor times ``--per-byte`` (the oracle's radii and temporaries, the
candidate's and torch's own copies) fits the device's memory; above it the
judge takes sampled rows or reduced sizes, and says so. Each row carries the
judgement's seconds per phase (``timings``).

How each official instance was judged, one of:

``whole``          the oracle evaluated the whole official instance
``sampled rows``   the candidate ran it whole, the oracle judged some of its rows
``reduced sizes``  the problem judged at smaller sizes
``not finished``   killed at the time limit (or at the run's end: said)
``refused``        not judged: the judge refused or abstained, or the machine
                   could not run it (the verdict says why)

    python -m benchmarks.kernelbench.official run PROBLEMS --out DIR [--device cuda]
        [--limit 120] [--deadline 500] [--levels level1,level2] [--examples 0]
        [--slots N]

writes ``DIR/official.md`` (the table) and ``DIR/official.json`` (rows and run
record), rewritten after every problem so that a run stopped early keeps its rows.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["HOW", "classify", "judge_one", "main", "plan_problem", "write_whole", "log_tail",
           "free_device_memory", "device_usable"]

#: how an official instance may be judged, in table order
HOW = ("whole", "sampled rows", "reduced sizes", "not finished", "refused")
GIB = 2 ** 30


def classify(row: dict[str, Any]) -> str:
    """How the official instance of a judged ``row`` (a judgement's dict) was judged."""
    if row["status"] in ("abstain", "refused", "not judged"):
        return "refused"
    official = row.get("official_how")
    return {"sampled": "sampled rows", "reduced": "reduced sizes"}.get(official, "whole")


#: how many times a multiply-add of a transposed convolution costs the oracle one of a
#: direct one, per unit of its stride's product (zeros inserted between the input's
#: elements, windows over them): the order the driver starts problems in
TRANSPOSED_WEIGHT = 8
#: the oracle's cost of one float64 floor element against one multiply-add
ELEMENT_WEIGHT = 50


def _work(problem: Any, base: dict[str, Any]) -> float:
    """The oracle's work on the official instance, in multiply-adds: the forward's
    FLOPs (a transposed convolution's weighted by :data:`TRANSPOSED_WEIGHT` times its
    stride's product), found on the meta device."""
    import math  # noqa: PLC0415

    import torch  # noqa: PLC0415 - torch-heavy, in the planning pool's processes
    from torch.utils._python_dispatch import TorchDispatchMode  # noqa: PLC0415
    from torch.utils.flop_counter import FlopCounterMode  # noqa: PLC0415

    transposed: list[float] = []

    class Strides(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            if func.overloadpacket is torch.ops.aten.convolution and len(args) > 6 \
                    and args[6]:
                transposed.append(float(math.prod(args[3])))
            return func(*args, **(kwargs or {}))

    specs = problem.input_specs(base)
    args = [torch.empty(s.shape, dtype=s.dtype, device="meta") if s.dtype is not None
            else v for s, v in zip(specs, problem.meta_inputs(base), strict=False)]
    with torch.device("meta"):
        model = problem.model(base)
        counter = FlopCounterMode(display=False)
        with counter, Strides():
            model(*args)
    flops = float(counter.get_total_flops())
    if transposed:
        flops *= TRANSPOSED_WEIGHT * max(transposed)
    return flops / 2


def plan_problem(path: str) -> dict[str, Any]:
    """The float64 floor of ``path``'s official instance, its floating inputs'
    elements, and an estimate of the oracle's work on it (what the driver schedules
    by: the most work first)."""
    from numoracle.kernelbench.cases import float64_bytes  # noqa: PLC0415 - torch-heavy
    from numoracle.kernelbench.problem import load_problem  # noqa: PLC0415

    try:
        problem = load_problem(path)
        base = problem.dropout_off()
        floor = float64_bytes(problem, base)
        inputs = sum(s.elements() for s in problem.input_specs(base) if s.floating)
        outputs = max(floor // 8 - inputs, 0)
    except Exception as exc:  # noqa: BLE001 - a problem that does not load is refused by the judge
        return {"path": path, "floor": 0, "inputs": 0, "outputs": 0, "work": 0.0,
                "plan_error": f"{type(exc).__name__}: {str(exc)[:120]}"}
    try:
        work = _work(problem, base)
    except Exception:  # noqa: BLE001 - not counted: scheduled by its floor alone
        work = 0.0
    work += ELEMENT_WEIGHT * min(floor, 1 << 40) / 8
    return {"path": path, "floor": floor, "inputs": inputs, "outputs": outputs, "work": work}


def judge_one(problem: Path, out: Path, *, device: str, max_bytes: int | None,
              examples: int, limit: float) -> dict[str, Any]:
    """Judge ``problem`` with its own ``Model`` as the candidate; the row, also
    written to ``out`` (JSON)."""
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
                      timeout=limit, max_bytes=budget, shrink=False)
        except Exception as exc:  # noqa: BLE001 - the oracle on the device broke: said, and
            # the problem judged again with the oracle on the host
            failed = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
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
        row["peak_gib"] = round(torch.cuda.max_memory_reserved() / GIB, 2)
    _put(out, row)
    return row


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
    module = sys.modules["numoracle.kernelbench.judge"]
    oracle_device = module.oracle_device  # type: ignore[attr-defined]
    cuda = device.startswith("cuda") and torch.cuda.is_available()
    for line in sys.stdin:
        job = json.loads(line)
        out = Path(job["out"])
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        ends = False
        try:
            row = judge_one(Path(job["problem"]), out.with_name(out.name + ".row"),
                            device=device, max_bytes=job["max_bytes"],
                            examples=job["examples"], limit=job["limit"])
        except Exception as exc:  # noqa: BLE001 - said in the row; the worker ends
            row = {"status": "not judged", "how": "refused", "seconds": 0.0, "notes": [],
                   "reason": f"the judge raised {type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:200] if str(exc) else ''}"}
            ends = True
        finally:
            module.oracle_device = oracle_device  # type: ignore[attr-defined]
            free_device_memory(cuda)
        # a CUDA error left in this process: the driver gives the next to a fresh worker
        row["worker_ends"] = ends or (cuda and not device_usable())
        _put(out, row)
        if row["worker_ends"]:
            return 1
    return 0


def device_usable() -> bool:
    """Whether this process's CUDA context still works (a sticky CUDA error ends it)."""
    import torch  # noqa: PLC0415 - torch-heavy, in a worker's process

    try:
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - any error here: the context is lost
        return False
    return True


@dataclass
class _Device:
    """One GPU (or the host) and what its running problems reserve."""

    name: str
    env: dict[str, str]
    memory: int
    slots: int
    used: int = 0
    running: list[Any] = field(default_factory=list)
    #: the judging workers started for this device (busy and idle)
    workers: list[_Worker] = field(default_factory=list)


@dataclass
class _Worker:
    """A judging process (:func:`serve`) and its log."""

    proc: subprocess.Popen[bytes]
    log: Path
    busy: bool = False

    def tail(self) -> str:
        """The last lines of its log, on one line."""
        return log_tail(self.log)


@dataclass
class _Job:
    plan: dict[str, Any]
    name: str
    whole: bool
    reserve: int
    host: int
    device: _Device | None = None
    worker: _Worker | None = None
    started: float = 0.0
    out: Path | None = None
    #: judged again after running out of device memory beside other problems
    retried: bool = False


def _devices(kind: str, slots: int) -> list[_Device]:
    if kind == "cpu":
        return [_Device("cpu", {}, 1 << 62, slots)]
    import torch  # noqa: PLC0415 - only the driver of a GPU run needs it

    found = []
    for i in range(torch.cuda.device_count()):
        total = torch.cuda.get_device_properties(i).total_memory
        found.append(_Device(f"cuda:{i}", {"CUDA_VISIBLE_DEVICES": str(i)},
                             int(total * 0.9), slots))
    return found


def _gpu_count() -> int:
    import torch  # noqa: PLC0415 - only the driver of a GPU run needs it

    return torch.cuda.device_count()


def _host_memory() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62


def _gib(n: int | None) -> str:
    return "0.25" if n is None else f"{n / GIB:.3g}"


def _row_md(r: dict[str, Any]) -> str:
    verdict = {"pass": "pass", "fail": "FAIL"}.get(r["status"], r["status"])
    why = r.get("reason", "")
    notes = [n for n in r.get("notes", []) if "official instance" in n or "dropout" in n
             or "oracle on the device" in n]
    if notes:
        why = f"{why}; {notes[0]}"
    peak = r.get("peak_gib")
    return (f"| {r['problem']} | {r['how']} | {r['seconds']:.1f} | {verdict} | "
            f"{r.get('floor_gib', 0):.3g} | {'yes' if r.get('fits_whole') else 'no'} | "
            f"{'-' if peak is None else peak} | "
            f"{why[:220].replace('|', '/')} |")


def _write(out: Path, head: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    rows = sorted(rows, key=lambda r: (r["problem"].split("/")[0],
                                       int(r["problem"].split("/")[1].split("_")[0])))
    counts = Counter(r["how"] for r in rows)
    verdicts = Counter(r["status"] for r in rows)
    killed = [r for r in rows if r["how"] == "not finished" and "limit" in r.get("reason", "")]
    (out / "official.json").write_text(json.dumps({"meta": head, "rows": rows}, indent=1)
                                       + "\n")
    n = len(rows)
    lines = ["# KernelBench official instances judged on the device", "",
             f"Command: `{head['command']}`  ",
             f"Commit {head['commit']}, {head['date']}; {head['device_name']}; torch "
             f"{head['torch']}; {head['devices']} device(s), up to {head['slots']} problems at "
             f"once per device; each problem's own `Model` as `ModelNew`, claim fp32, "
             f"{head['examples']} drawn cases after the official one; whole where the float64 "
             f"floor is at most {_gib(head['max_bytes'])} GiB (device memory "
             f"{head['memory_gib']} GiB / {head['per_byte']}; on the CPU the judge's 256 MiB); "
             f"limit "
             f"{head['limit']:g} s per problem; {head.get('seconds', 0):.0f} s in all.", "",
             "| how judged | problems | share |", "|---|---|---|"]
    lines += [f"| {h} | {counts.get(h, 0)} | {100 * counts.get(h, 0) / max(n, 1):.0f}% |"
              for h in HOW]
    fits = sum(1 for r in rows if r.get("fits_whole"))
    lines += ["", f"Verdicts: {dict(verdicts)}; killed at the limit of {head['limit']:g} s: "
              f"{len(killed)}; "
              f"problems in the table: {n}; whose float64 floor fits whole (judged or not): "
              f"{fits} ({100 * fits / max(n, 1):.0f}%).", "",
              "`peak GiB`: the judge's process (oracle and torch's reference), "
              "torch's allocator; the candidate's process is not counted.", "",
              "| problem | how judged | s | verdict | float64 floor GiB | fits whole | peak GiB "
              "| why |", "|---|---|---|---|---|---|---|---|"]
    lines += [_row_md(r) for r in rows]
    (out / "official.md").write_text("\n".join(lines) + "\n")


def _unfinished(job: _Job, seconds: float, why: str) -> dict[str, Any]:
    return {"problem": job.name, "how": "not finished", "status": "not finished",
            "seconds": round(seconds, 2), "reason": why, "notes": [],
            "floor_gib": round(job.plan["floor"] / GIB, 3), "fits_whole": job.whole}


def _kill(worker: _Worker) -> None:
    """End a worker and everything it started (its candidate's process too)."""
    if worker.proc.poll() is None:
        try:
            os.killpg(worker.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        worker.proc.wait()


def _start_worker(d: _Device, tmp: Path, env: dict[str, str]) -> _Worker:
    """A fresh judging worker for device ``d`` (a session of its own: killed whole)."""
    log = tmp / f"worker_{d.name.replace(':', '')}_{len(os.listdir(tmp))}.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks.kernelbench.official",
                                 "serve", "--device", "cpu" if d.name == "cpu" else "cuda"],
                                env={**env, **d.env}, stdin=subprocess.PIPE, stdout=f,
                                stderr=f, start_new_session=True)
    worker = _Worker(proc, log)
    d.workers.append(worker)
    return worker


def run(args: argparse.Namespace) -> int:
    """The driver (see the module's docstring)."""
    import torch  # noqa: PLC0415 - the record's version and the devices

    from benchmarks.kernelbench.candidates import problem_files, problem_name  # noqa: PLC0415
    from benchmarks.record import meta  # noqa: PLC0415

    t0 = time.perf_counter()
    levels = set(args.levels.split(","))
    files = [p for p in problem_files(args.problems) if p.parent.name in levels]
    files = files[::args.every][: args.count]
    if args.slots is None:  # a problem busies its judging worker (its candidate's
        # process waits most of the time): all CPUs but two, over the devices
        gpus = 1 if args.device == "cpu" else max(_gpu_count(), 1)
        args.slots = max(1, min(16, (os.cpu_count() or 2) - 2) // gpus)
    devices = _devices("cpu" if args.device == "cpu" else "cuda", args.slots)
    if not devices:
        print("no CUDA device: nothing judged", file=sys.stderr)
        return 3
    tmp = Path(tempfile.mkdtemp(prefix="kbench-official-"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for d in devices:  # their imports overlap the planning
        for _ in range(min(d.slots, len(files))):
            _start_worker(d, tmp, env)
    with ProcessPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1)),
                             mp_context=mp.get_context("spawn")) as pool:
        plans = list(pool.map(plan_problem, [str(p) for p in files]))
    memory = min(d.memory for d in devices)
    max_bytes = args.max_bytes if args.max_bytes is not None else \
        (memory // args.per_byte if args.device != "cpu" else None)
    from numoracle.kernelbench.judge import DEFAULT_MAX_BYTES  # noqa: PLC0415 - torch-heavy

    floor_whole = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    host_total = int(_host_memory() * 0.8)
    jobs = []
    for p, plan in zip(files, plans, strict=True):
        floor = plan["floor"]
        whole = floor <= floor_whole
        reserve = floor * args.per_byte if whole else floor
        host = 8 * 4 * plan["inputs"] + 3 * 4 * plan["outputs"]
        jobs.append(_Job(plan, problem_name(p), whole, min(reserve, memory),
                         min(host, host_total)))
    # the longest first (a deadline long enough for all); the shortest first judges the
    # most problems in a short window
    jobs.sort(key=lambda j: (1 if args.order == "least-work-first" else -1)
              * j.plan.get("work", 0.0))
    head = {**meta(args.argv), "torch": torch.__version__, "devices": len(devices),
            "command": "python -m benchmarks.kernelbench.official " + " ".join(args.argv),
            "device_name": (torch.cuda.get_device_name(0) if args.device != "cpu"
                            else "CPU only"),
            "slots": args.slots, "limit": args.limit, "examples": args.examples,
            "per_byte": args.per_byte,
            "memory_gib": round(memory / GIB, 1) if args.device != "cpu" else "-",
            "max_bytes": max_bytes, "planned_s": round(time.perf_counter() - t0, 1)}
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    pending = list(jobs)
    signal.signal(signal.SIGTERM, _stop)  # `timeout` stops the driver: its children too
    try:
        _loop(args, t0, devices, pending, rows, head, tmp, env, max_bytes, host_total)
    finally:
        for d in devices:
            for worker in d.workers:
                _kill(worker)
    head["seconds"] = round(time.perf_counter() - t0, 1)
    _write(out, head, rows)
    counts = Counter(r["how"] for r in rows)
    print(json.dumps({"seconds": head["seconds"], "problems": len(rows), "how": counts}))
    return 0


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(f"stopped by signal {signum}")


def _finished(job: _Job, spent: float) -> dict[str, Any] | None:
    """The row of a job whose worker wrote it, or whose worker died; None while it runs."""
    assert job.worker is not None and job.out is not None
    if job.out.exists():
        row: dict[str, Any] = json.loads(job.out.read_text())
        return row
    code = job.worker.proc.poll()
    if code is None:
        return None
    tail = job.worker.tail()
    return {"how": "refused", "status": "not judged", "seconds": round(spent, 2),
            "notes": [], "reason": f"the judge's process ended with code {code} and no row"
                                   + (f": {tail}" if tail else "")}


def _again(job: _Job, row: dict[str, Any], d: _Device) -> bool:
    """Whether ``job`` goes back to the queue: it was not judged for want of device
    memory while other problems ran beside it (once; it then reserves a third of the
    device, so that few run beside it)."""
    if job.retried or row.get("status") != "not judged" or \
            "out of memory" not in str(row.get("reason", "")).lower():
        return False
    job.retried = True
    job.reserve = max(job.reserve, d.memory // 3)
    return True


def _loop(args: argparse.Namespace, t0: float, devices: list[_Device], pending: list[_Job],
          rows: list[dict[str, Any]], head: dict[str, Any], tmp: Path, env: dict[str, str],
          max_bytes: int | None, host_total: int) -> None:
    """Hand the problems to the judging workers, watch and stop them until none is left."""
    out = args.out
    host_used = 0
    while pending or any(d.running for d in devices):
        now = time.perf_counter() - t0
        for d in devices:
            for job in list(d.running):
                assert job.worker is not None
                spent = time.perf_counter() - job.started
                row = _finished(job, spent)
                if row is None and spent > args.limit:
                    _kill(job.worker)
                    row = _unfinished(job, spent, f"killed past the limit of {args.limit:g} s")
                elif row is None and now > args.deadline:
                    _kill(job.worker)
                    row = _unfinished(job, spent, f"stopped at the run's end ({args.deadline:g} "
                                                  f"s) after {spent:.0f} s")
                elif row is None:
                    continue
                else:
                    row["floor_gib"] = round(job.plan["floor"] / GIB, 3)
                    row["fits_whole"] = job.whole
                    row["device"] = d.name
                row["problem"] = job.name
                job.worker.busy = False
                if row.pop("worker_ends", False):
                    _kill(job.worker)
                if job.worker.proc.poll() is not None:
                    d.workers.remove(job.worker)
                d.running.remove(job)
                d.used -= job.reserve
                host_used -= job.host
                if _again(job, row, d):
                    pending.append(job)  # at the end: with few problems beside it
                    print(f"{now:6.0f}s {job.name}: out of device memory beside others, "
                          f"queued again", file=sys.stderr, flush=True)
                    continue
                if job.retried:
                    row.setdefault("notes", []).insert(
                        0, "judged again after running out of device memory beside other "
                           "problems")
                rows.append(row)
                print(f"{now:6.0f}s {row['problem']}: {row['how']} {row['status']} "
                      f"{row['seconds']:.1f}s {str(row.get('reason', ''))[:100]}",
                      file=sys.stderr, flush=True)
                _write(out, {**head, "seconds": now}, rows)
        if now > args.deadline:
            for job in pending:
                rows.append(_unfinished(job, 0.0, f"not started within the run's "
                                                  f"{args.deadline:g} s"))
            pending = []
            continue
        for job in list(pending):
            fits = [d for d in devices if len(d.running) < d.slots
                    and d.used + job.reserve <= d.memory]
            if not fits or (host_used + job.host > host_total and host_used > 0):
                if job.reserve >= min(d.memory for d in devices) // 2:
                    break  # a large one waits for room; smaller ones behind it too
                continue
            d = min(fits, key=lambda x: (x.used, len(x.running)))
            idle = [w for w in d.workers if not w.busy and w.proc.poll() is None]
            worker = idle[0] if idle else _start_worker(d, tmp, env)
            job.device, job.worker = d, worker
            job.out = tmp / f"{job.name.replace('/', '_')}.json"
            line = {"problem": job.plan["path"], "out": str(job.out),
                    "examples": args.examples, "limit": args.limit, "max_bytes": max_bytes}
            try:
                assert worker.proc.stdin is not None
                worker.proc.stdin.write((json.dumps(line) + "\n").encode())
                worker.proc.stdin.flush()
            except OSError:  # it died idle: the job waits for the next round
                d.workers.remove(worker)
                continue
            worker.busy = True
            job.started = time.perf_counter()
            d.running.append(job)
            d.used += job.reserve
            host_used += job.host
            pending.remove(job)
        for d in devices:  # workers that died idle are replaced when needed
            d.workers = [w for w in d.workers if w.busy or w.proc.poll() is None]
        time.sleep(0.1)


def _floor_text(q: dict[str, Any]) -> str:
    if q.get("plan_error"):
        return f"- ({q['plan_error']})"
    if q["floor"] >= 1 << 62:
        return "- (the model does not run on the meta device at these sizes)"
    return f"{q['floor'] / GIB:.3g}"


def plan(args: argparse.Namespace) -> int:
    """``plan.md``: every problem's float64 floor and whether it fits whole on a device of
    ``--memory-gib`` (90% of it) at each of ``--per-byte`` bytes per floor byte."""
    from benchmarks.kernelbench.candidates import problem_files, problem_name  # noqa: PLC0415
    from benchmarks.record import meta  # noqa: PLC0415

    files = problem_files(args.problems)
    with ProcessPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1)),
                             mp_context=mp.get_context("spawn")) as pool:
        plans = list(pool.map(plan_problem, [str(p) for p in files]))
    usable = 0.9 * args.memory_gib * GIB
    factors = [int(f) for f in args.per_byte.split(",")]
    head = meta(args.argv)
    lines = ["# KernelBench official instances: float64 floors against a device's memory", "",
             f"Command: `python -m benchmarks.kernelbench.official {' '.join(args.argv)}`  ",
             f"Commit {head['commit']}, {head['date']}; {len(files)} problems; a device of "
             f"{args.memory_gib:g} GiB, 90% of it usable; the floor is the float64 bytes of "
             "the inputs, parameters and every intermediate result (found on the meta "
             "device: nothing allocated).", "", "| bytes per floor byte | fit whole | share |",
             "|---|---|---|"]
    for k in factors:
        n = sum(1 for q in plans if q["floor"] and q["floor"] * k <= usable)
        lines.append(f"| {k} | {n} of {len(files)} | {100 * n / max(len(files), 1):.0f}% |")
    lines += ["", "| problem | float64 floor GiB | floating input elements |", "|---|---|---|"]
    lines += [f"| {problem_name(p)} | {_floor_text(q)} | {q['inputs']} |"
              for p, q in zip(files, plans, strict=True)]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "plan.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:12]))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``run`` (the driver), ``one`` (a problem's own process) or ``plan``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m benchmarks.kernelbench.official",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="judge every problem under PROBLEMS")
    r.add_argument("problems", type=Path)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    r.add_argument("--limit", type=float, default=120.0, help="seconds per problem")
    r.add_argument("--deadline", type=float, default=500.0,
                   help="seconds after which nothing starts and what runs is stopped")
    r.add_argument("--slots", type=int, default=None,
                   help="judging workers per device (default: the CPU cores but two over "
                        "the devices, at most 16)")
    r.add_argument("--per-byte", type=int, default=None,
                   help="device bytes reserved per float64 floor byte of a whole instance "
                        "(default: the judge's DEVICE_MEMORY_PER_BYTE)")
    r.add_argument("--max-bytes", type=int, default=None,
                   help="the float64 floor judged whole (default: device memory / "
                        "--per-byte; on the CPU the judge's own)")
    r.add_argument("--levels", default="level1,level2")
    r.add_argument("--every", type=int, default=1)
    r.add_argument("--count", type=int, default=None)
    r.add_argument("--examples", type=int, default=0)
    r.add_argument("--order", default="most-work-first",
                   choices=("most-work-first", "least-work-first"),
                   help="which problems start first (estimated work: FLOPs)")
    pl = sub.add_parser("plan", help="float64 floors against a device's memory (plan.md)")
    pl.add_argument("problems", type=Path)
    pl.add_argument("--out", type=Path, required=True)
    pl.add_argument("--memory-gib", type=float, default=139.8)
    pl.add_argument("--per-byte", default="4,6,8")
    w = sub.add_parser("serve", help="a judging worker: problems as JSON lines on stdin")
    w.add_argument("--device", default="cuda")
    o = sub.add_parser("one", help="judge one problem in this process")
    o.add_argument("problem", type=Path)
    o.add_argument("--out", type=Path, required=True)
    o.add_argument("--device", default="cuda")
    o.add_argument("--max-bytes", type=int, default=None)
    o.add_argument("--examples", type=int, default=0)
    o.add_argument("--limit", type=float, default=120.0)
    args = ap.parse_args(argv)
    args.argv = argv
    if args.what == "plan":
        return plan(args)
    if args.what == "serve":
        return serve(args.device)
    if args.what == "one":
        judge_one(args.problem, args.out, device=args.device, max_bytes=args.max_bytes,
                  examples=args.examples, limit=args.limit)
        return 0
    if args.per_byte is None:
        from numoracle.kernelbench.judge import DEVICE_MEMORY_PER_BYTE  # noqa: PLC0415

        args.per_byte = DEVICE_MEMORY_PER_BYTE
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
