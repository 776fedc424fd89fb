"""KernelBench's official instances judged whole wherever they fit the device: every
problem's own ``Model`` as the candidate, a time limit per problem.

Each problem is judged by :func:`numoracle.kernelbench.judge.judge` with a
``ModelNew`` that is the problem's own ``Model`` under the ``fp32`` claim, its
official case (and ``--examples`` drawn ones), in one of at most ``--slots``
judging workers per device (:func:`~benchmarks.kernelbench.worker.serve`: torch
imported once, problems judged one after the other; each problem's candidate
still runs in a sandboxed process of its own). The driver (``run``) first reads
every problem's float64 floor (inputs, parameters and intermediate values,
:func:`~numoracle.kernelbench.cases.float64_bytes`), its kind and an estimate of
the oracle's work (the forward's ATen ops and multiply-adds on the meta device,
a transposed convolution's weighted), then plans each problem's device memory by
the memory model (:mod:`benchmarks.kernelbench.admission`: fitted to the peaks a
run measured, ``fit``) and admits it on a GPU where that plan fits the memory not
yet reserved (and the host's): the big ones first, small ones beside them. A
problem is judged *whole* wherever its plan fits the device at all; above it
the judge takes sampled rows or reduced sizes, and says so. One whose judgement
runs out of device memory beside others is judged again whole, alone on the
device, and only then falls back to sampled rows. A worker is killed past
``--limit`` seconds (a fresh one takes its place). Each row carries the
judgement's seconds per phase (``timings``) and its peak device memory (torch's
allocator and CuPy's pool).

How each official instance was judged, one of:

``whole``          the oracle evaluated the whole official instance, at once or
                   (a row-separable one) in consecutive pieces of its rows
``sampled rows``   the candidate ran it whole, the oracle judged some of its rows
``reduced sizes``  the problem judged at smaller sizes
``not finished``   killed at the time limit (or at the run's end: said)
``refused``        not judged: the judge refused or abstained, or the machine
                   could not run it (the verdict says why)

    python -m benchmarks.kernelbench.official run PROBLEMS --out DIR [--device cuda]
        [--limit 120] [--deadline 500] [--levels level1,level2] [--examples 0]
        [--slots N] [--order big-first] [--memory-model MODEL.json]
    python -m benchmarks.kernelbench.official fit RUN/official.json --out MODEL.json

``run`` writes ``DIR/official.md`` (the table: the share judged whole over every
problem, those over the limit) and ``DIR/official.json`` (rows and run record),
rewritten after every problem so that a run stopped early keeps its rows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from benchmarks.kernelbench.admission import (
    GIB,
    Admission,
    MemoryModel,
    Room,
    Ticket,
    constant_model,
    fit,
)
from benchmarks.kernelbench.official_table import write_table
from benchmarks.kernelbench.planning import plan, plan_problem, planned, plans_of
from benchmarks.kernelbench.worker import (
    HOW,
    classify,
    judge_one,
    log_tail,
    serve,
)

__all__ = ["HOW", "classify", "main", "plan_problem", "memory_model", "resumed",
           "kept_smaller", "DEFAULT_MODEL"]

@dataclass
class _Device(Room):
    """One GPU (or the host): its memory, slots and judging workers."""

    env: dict[str, str] = field(default_factory=dict)
    #: the judging workers started for this device (busy and idle)
    workers: list[_Worker] = field(default_factory=list)


@dataclass
class _Worker:
    """A judging process (:func:`~benchmarks.kernelbench.worker.serve`) and its log."""

    proc: subprocess.Popen[bytes]
    log: Path
    busy: bool = False

    def tail(self) -> str:
        """The last lines of its log, on one line."""
        return log_tail(self.log)


@dataclass
class _Job(Ticket):
    """A ticket and the judgement that runs it."""

    plan: dict[str, Any] = field(default_factory=dict)
    worker: _Worker | None = None
    started: float = 0.0
    #: when its worker was seen to begin it (the ``.began`` file; None: not yet)
    began: float | None = None
    #: when its first judgement started (a retried one's seconds count both)
    first: float | None = None
    out: Path | None = None
    #: the reservation its first judgement had (GiB), for the table
    planned_gib: float = 0.0
    #: device bytes the judge's process may hold (``--cap``; None: no cap)
    cap: int | None = None


def _devices(kind: str, slots: int) -> list[_Device]:
    if kind == "cpu":
        return [_Device("cpu", 1 << 62, slots)]
    import torch  # noqa: PLC0415 - only the driver of a GPU run needs it

    found = []
    for i in range(torch.cuda.device_count()):
        total = torch.cuda.get_device_properties(i).total_memory
        found.append(_Device(f"cuda:{i}", int(total * 0.9), slots,
                             env={"CUDA_VISIBLE_DEVICES": str(i)}))
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


def _unfinished(job: _Job, seconds: float, why: str) -> dict[str, Any]:
    return {"problem": job.problem.name, "how": "not finished", "status": "not finished",
            "seconds": round(seconds, 2), "reason": why, "notes": [],
            "floor_gib": round(job.problem.floor / GIB, 3), "fits_whole": job.whole,
            "kind": job.problem.kind, "planned_gib": job.planned_gib or
            round(job.reserve / GIB, 2)}


def _kill(worker: _Worker) -> None:
    """End a worker and everything it started (its candidate's process too)."""
    if worker.proc.poll() is None:
        try:
            os.killpg(worker.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        worker.proc.wait()
    if worker.proc.stdin is not None:
        with contextlib.suppress(OSError):
            worker.proc.stdin.close()


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


#: where the driver reads its memory model by default (``fit`` writes it)
DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "results" / "h200" / "kbench_memory" \
    / "model.json"


def memory_model(per_byte: float | None, path: Path | None) -> MemoryModel:
    """The memory model of a run: ``per_byte`` constant where given, else the fitted
    one at ``path`` (default :data:`DEFAULT_MODEL` where it exists), else the judge's
    :data:`~numoracle.kernelbench.judge.DEVICE_MEMORY_PER_BYTE` constant."""
    if per_byte is not None:
        return constant_model(per_byte)
    path = path or (DEFAULT_MODEL if DEFAULT_MODEL.is_file() else None)
    if path is not None:
        return MemoryModel.load(path)
    from numoracle.kernelbench.judge import DEVICE_MEMORY_PER_BYTE  # noqa: PLC0415

    return constant_model(DEVICE_MEMORY_PER_BYTE)


def run(args: argparse.Namespace) -> int:
    """The driver (see the module's docstring)."""
    import torch  # noqa: PLC0415 - the record's version and the devices

    from benchmarks.kernelbench.candidates import problem_files, problem_name  # noqa: PLC0415
    from benchmarks.record import meta  # noqa: PLC0415

    t0 = time.perf_counter()
    levels = set(args.levels.split(","))
    files = [p for p in problem_files(args.problems) if p.parent.name in levels]
    files = files[::args.every][: args.count]
    before = resumed(args.resume, keep_over_limit=args.keep_over_limit)
    files = [p for p in files if before.get(problem_name(p), {}).get("how") not in FINAL
             and not over_limit(before.get(problem_name(p), {}))]
    if args.slots is None:  # a problem busies its judging worker (its candidate's
        # process waits most of the time): all CPUs but two, over the devices
        gpus = 1 if args.device == "cpu" else max(_gpu_count(), 1)
        args.slots = max(1, min(16, (os.cpu_count() or 2) - 2) // gpus)
    devices = _devices("cpu" if args.device == "cpu" else "cuda", args.slots)
    if not devices:
        print("no CUDA device: nothing judged", file=sys.stderr)
        return 3
    if args.memory_gib is not None:  # a smaller device than the machine's
        for d in devices:
            d.memory = int(args.memory_gib * GIB)
    tmp = Path(tempfile.mkdtemp(prefix="kbench-official-"))
    # expandable segments: a process's freed blocks fragment less, so fewer of them
    # are held from the problems beside it
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", **os.environ,
           "PYTHONUNBUFFERED": "1", "KB_WARM_LOCK": str(tmp / "warm.lock")}
    for d in devices:  # their imports overlap the planning
        for _ in range(min(d.slots, len(files))):
            _start_worker(d, tmp, env)
    plans = plans_of(files)
    memory = min(d.memory for d in devices)
    model = memory_model(args.per_byte, args.memory_model)
    admission = Admission(memory, model, patience=args.patience, lean=args.lean)
    host_total = int(_host_memory() * 0.8)
    jobs = []
    for p, q in zip(files, plans, strict=True):
        t = admission.ticket(planned(problem_name(p), q, host_total))
        job = _Job(**{f.name: getattr(t, f.name) for f in fields(Ticket)}, plan=q)
        if args.device == "cpu":  # the host: the judge's own floor; nothing reserved
            # unless a device memory is given (the admission tried on the CPU)
            from numoracle.kernelbench.judge import DEFAULT_MAX_BYTES  # noqa: PLC0415

            job.whole = q["floor"] <= DEFAULT_MAX_BYTES
            job.reserve = job.reserve if args.memory_gib is not None else 0
            job.max_bytes = None  # type: ignore[assignment]
        job.planned_gib = round(job.reserve / GIB, 2)
        if args.cap and args.device != "cpu":  # the judge's share of the reservation
            job.cap = max(job.reserve - model.fixed - int(model.candidate * q["floor"]), GIB)
        if job.problem.name in before and kept_smaller(before[job.problem.name], job.whole):
            continue  # judged smaller before, and judging it again would not change that
        before.pop(job.problem.name, None)  # judged again: whole now
        jobs.append(job)
    head = {**meta(args.argv), "torch": torch.__version__, "devices": len(devices),
            "command": "python -m benchmarks.kernelbench.official " + " ".join(args.argv),
            "device_name": (torch.cuda.get_device_name(0) if args.device != "cpu"
                            else "CPU only"),
            "slots": args.slots, "limit": args.limit, "examples": args.examples,
            "order": args.order, "memory_model": model.how, "lean": args.lean,
            "memory_gib": round(memory / GIB, 1) if args.device != "cpu" else "-",
            "planned_s": round(time.perf_counter() - t0, 1)}
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = list(before.values())
    if before:
        head["resumed"] = f"{len(before)} rows kept from {args.resume}"
    pending: list[_Job] = admission.order(jobs, args.order)  # type: ignore[assignment]
    signal.signal(signal.SIGTERM, _stop)  # `timeout` stops the driver: its children too
    try:
        _loop(args, t0, devices, pending, rows, head, tmp, env, admission, host_total)
    finally:
        for d in devices:
            for worker in d.workers:
                _kill(worker)
    head["seconds"] = round(time.perf_counter() - t0, 1)
    write_table(out, head, rows)
    counts = Counter(r["how"] for r in rows)
    print(json.dumps({"seconds": head["seconds"], "problems": len(rows), "how": counts}))
    return 0


#: how a resumed row is kept whatever the plan: judged whole, or refused
FINAL = ("whole", "refused")


def resumed(path: Path | None, keep_over_limit: bool = False) -> dict[str, dict[str, Any]]:
    """The rows of an earlier run's ``official.json`` at ``path`` that were judged
    (any but ``not finished``), by problem, each marked with that run's commit; none
    where ``path`` is None or absent. The driver keeps those judged whole or refused
    (:data:`FINAL`), and those judged on sampled rows or at reduced sizes whose plan
    still does not fit whole; it judges the others again. A row whose reason says the
    device ran out of memory is judged again too, whatever its verdict (a driver before
    the out-of-memory rules wrote a candidate's ``OutOfMemoryError`` beside others as a
    FAIL), and one whose judge's process died without a row. A row judged smaller
    with the device to itself is kept too (:func:`kept_smaller`). With
    ``keep_over_limit`` a row killed past the time limit is kept as it is, not finished
    (:func:`over_limit`): judging it again would spend the limit again."""
    if path is None or not path.is_file():
        return {}
    data = json.loads(path.read_text())
    commit = data.get("meta", {}).get("commit", "?")
    return {r["problem"]: {**r, "resumed_from": commit} for r in data["rows"]
            if (r.get("how") != "not finished" or keep_over_limit and over_limit(r))
            and not _ran_out(r) and not _died(r)}


def over_limit(row: dict[str, Any]) -> bool:
    """Whether a row is one not finished because its judge was killed past the time
    limit (not one stopped at the run's end, nor one not started)."""
    return (row.get("how") == "not finished"
            and str(row.get("reason", "")).startswith("killed past the limit"))


def _died(row: dict[str, Any]) -> bool:
    """Whether a row says the judge's process died without a row (killed by the
    machine, as by the host's memory running out): no verdict, judged again."""
    return "the judge's process ended with code" in str(row.get("reason", ""))


def kept_smaller(row: dict[str, Any], whole: bool) -> bool:
    """Whether a resumed ``row`` judged smaller (sampled rows, reduced sizes) is kept
    rather than judged again: its plan still does not fit the device whole
    (``whole`` False), or it was judged smaller with the device to itself (``retried``:
    it ran out of memory whole beside others, then alone)."""
    return not whole or bool(row.get("retried"))


def _ran_out(row: dict[str, Any]) -> bool:
    """Whether a row's reason says the device (or host) ran out of memory."""
    reason = str(row.get("reason", "")).lower()
    return "outofmemoryerror" in reason or "out of memory" in reason


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


def _ended(args: argparse.Namespace, job: _Job, now: float) -> dict[str, Any] | None:
    """The row of a running job that ended, was killed at the limit or stopped at the
    run's end; None while it runs on."""
    assert job.worker is not None
    spent = _spent(job)
    row = _finished(job, spent)
    if row is None and spent > args.limit:
        _kill(job.worker)
        return _unfinished(job, spent, f"killed past the limit of {args.limit:g} s")
    if row is None and now > args.deadline:
        _kill(job.worker)
        return _unfinished(job, spent, f"stopped at the run's end ({args.deadline:g} s) "
                                       f"after {spent:.0f} s")
    if row is not None:
        row.update(floor_gib=round(job.problem.floor / GIB, 3), fits_whole=job.whole,
                   kind=job.problem.kind, planned_gib=job.planned_gib)
    return row


def _spent(job: _Job) -> float:
    """Seconds a running job has had: since its worker began it (the ``.began`` file
    the worker writes as it takes the job; a worker still warming up has not), else
    since it was handed over."""
    assert job.out is not None
    if job.began is None and job.out.with_name(job.out.name + ".began").exists():
        job.began = time.perf_counter()
    return time.perf_counter() - (job.started if job.began is None else job.began)


def _start(args: argparse.Namespace, job: _Job, d: _Device, tmp: Path,
           env: dict[str, str]) -> bool:
    """Hand ``job`` to an idle worker of ``d`` (a fresh one if none); False where the
    worker died idle (the job waits for the next round)."""
    idle = [w for w in d.workers if not w.busy and w.proc.poll() is None]
    worker = idle[0] if idle else _start_worker(d, tmp, env)
    job.out = tmp / f"{job.problem.name.replace('/', '_')}_{int(job.retried)}.json"
    line = {"problem": job.plan["path"], "out": str(job.out), "examples": args.examples,
            "limit": args.limit, "max_bytes": job.max_bytes,
            # beside others, an out-of-memory is judged again alone, not smaller
            "fall_back": job.alone or not job.whole or d.name == "cpu",
            "cap": None if job.alone else job.cap}
    try:
        assert worker.proc.stdin is not None
        worker.proc.stdin.write((json.dumps(line) + "\n").encode())
        worker.proc.stdin.flush()
    except OSError:
        d.workers.remove(worker)
        return False
    worker.busy = True
    job.worker, job.started, job.began = worker, time.perf_counter(), None
    job.first = job.started if job.first is None else job.first
    return True


def _loop(args: argparse.Namespace, t0: float, devices: list[_Device], pending: list[_Job],
          rows: list[dict[str, Any]], head: dict[str, Any], tmp: Path, env: dict[str, str],
          admission: Admission, host_total: int) -> None:
    """Hand the problems to the judging workers as device memory allows, watch and stop
    them until none is left."""
    out = args.out
    host_used = 0
    while pending or any(d.running for d in devices):
        now = time.perf_counter() - t0
        for d in devices:
            for job in list(d.running):
                row = _ended(args, job, now)
                if row is None:
                    continue
                assert job.worker is not None and job.first is not None
                row["problem"] = job.problem.name
                row["device"] = d.name
                job.worker.busy = False
                if row.pop("worker_ends", False):
                    _kill(job.worker)
                if job.worker.proc.poll() is not None:
                    d.workers.remove(job.worker)
                admission.release(job, d)
                host_used -= job.problem.host
                if admission.again(job, row):
                    pending.insert(0, job)
                    print(f"{now:6.0f}s {job.problem.name}: out of device memory beside "
                          f"others, queued again to run alone", file=sys.stderr, flush=True)
                    continue
                row["wall_s"] = round(time.perf_counter() - job.first, 2)
                if job.retried:
                    row["retried"] = True
                    row.setdefault("notes", []).insert(
                        0, "judged again alone after running out of device memory beside "
                           "other problems")
                rows.append(row)
                print(f"{now:6.0f}s {row['problem']}: {row['how']} {row['status']} "
                      f"{row['seconds']:.1f}s {str(row.get('reason', ''))[:100]}",
                      file=sys.stderr, flush=True)
                write_table(out, {**head, "seconds": now}, rows)
        if now > args.deadline:
            for job in pending:
                rows.append(_unfinished(job, 0.0, f"not started within the run's "
                                                  f"{args.deadline:g} s"))
            pending.clear()
            continue
        for job, d in admission.admit(pending, devices, now, host_total - host_used):
            assert isinstance(job, _Job) and isinstance(d, _Device)
            if _start(args, job, d, tmp, env):
                host_used += job.problem.host
            else:  # it died idle: the job waits for the next round
                admission.release(job, d)
                pending.insert(0, job)
        for d in devices:  # workers that died idle are replaced when needed
            d.workers = [w for w in d.workers if w.busy or w.proc.poll() is None]
        time.sleep(0.1)


def fit_model(args: argparse.Namespace) -> int:
    """``fit``: the memory model fitted to the rows of ``args.runs``, written to
    ``args.out``."""
    rows: dict[str, dict[str, Any]] = {}
    for path in args.runs:
        for r in json.loads(path.read_text())["rows"]:
            if r.get("how") != "not finished" or r["problem"] not in rows:
                rows[r["problem"]] = r  # a later run's judged row over an earlier one
    model = fit(list(rows.values()), quantile=args.quantile, least=args.least,
                source=", ".join(str(p) for p in args.runs), peak=args.peak)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(model.to_json())
    print(model.how)
    print(json.dumps(model.per_byte, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``run`` (the driver), ``serve`` (a judging worker), ``one`` (one problem in
    this process), ``plan`` (floors) or ``fit`` (the memory model)."""
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
    r.add_argument("--memory-gib", type=float, default=None,
                   help="each device's usable memory (default: 90%% of each GPU's; on the "
                        "CPU none reserved): a smaller one tries the admission")
    r.add_argument("--per-byte", type=float, default=None,
                   help="device bytes planned per float64 floor byte of a whole instance, "
                        "every problem alike (default: the memory model)")
    r.add_argument("--cap", action="store_true",
                   help="cap each judge's process at its share of the plan (torch's "
                        "per-process fraction, CuPy's pool limit): its allocators give "
                        "cached blocks back rather than take more; one that needs more runs "
                        "out of memory and is judged again alone, uncapped. Fit the model to "
                        "live peaks (`fit --peak live`) for it")
    r.add_argument("--lean", type=float, default=None,
                   help="judge whole, reserved at this many device bytes per float64 floor "
                        "byte (beside the candidate's share and the fixed part), a problem "
                        "whose plan by the model does not fit the device and whose peak "
                        "was never measured; one that runs out of memory beside others is "
                        "judged again alone, and falls back to sampled rows only there "
                        "(default: not tried whole)")
    r.add_argument("--memory-model", type=Path, default=None,
                   help="the memory model (JSON, written by `fit`; default "
                        "benchmarks/results/h200/kbench_memory/model.json where it exists, "
                        "else the judge's DEVICE_MEMORY_PER_BYTE for every problem)")
    r.add_argument("--patience", type=float, default=120.0,
                   help="seconds the queue's first problem waits while problems behind it "
                        "hold the memory it needs; then nothing behind it starts until it "
                        "does (one that ran out of memory beside others waits for none)")
    r.add_argument("--resume", type=Path, default=None,
                   help="an earlier run's official.json: its rows judged whole or refused "
                        "are kept (and those judged smaller whose plan still does not fit "
                        "whole, or that were judged smaller alone on the device), the rest "
                        "judged (a survey over several calls)")
    r.add_argument("--keep-over-limit", action="store_true",
                   help="with --resume, keep the rows killed past the time limit as not "
                        "finished instead of judging them again")
    r.add_argument("--levels", default="level1,level2")
    r.add_argument("--every", type=int, default=1)
    r.add_argument("--count", type=int, default=None)
    r.add_argument("--examples", type=int, default=0)
    r.add_argument("--order", default="big-first",
                   choices=("big-first", "most-work-first", "least-work-first"),
                   help="which problems start first: big-first those planned at more than a "
                        "quarter of a device (the most memory first), then the longest "
                        "(measured seconds in the memory model, else estimated work)")
    f = sub.add_parser("fit", help="fit the memory model to official runs' measured peaks")
    f.add_argument("runs", type=Path, nargs="+", help="official.json files (a later one's "
                   "judged rows override an earlier one's)")
    f.add_argument("--out", type=Path, required=True, help="the model's JSON")
    f.add_argument("--quantile", type=float, default=0.5,
                   help="of peak over floor per kind (0.5: an underestimate costs a "
                        "judgement again alone, an overestimate sampled rows)")
    f.add_argument("--least", type=int, default=5,
                   help="rows a kind needs for a rate of its own")
    f.add_argument("--peak", default="reserved", choices=("reserved", "live"),
                   help="the peak fitted: reserved (cached blocks too: what an uncapped "
                        "process keeps from others) or live (in use: for `run --cap`)")
    pl = sub.add_parser("plan", help="planned device memory and a simulated schedule "
                                     "(plan.md)")
    pl.add_argument("problems", type=Path)
    pl.add_argument("--out", type=Path, required=True)
    pl.add_argument("--memory-gib", type=float, default=139.8)
    pl.add_argument("--memory-model", type=Path, default=None)
    pl.add_argument("--per-byte", type=float, default=None)
    pl.add_argument("--slots", type=int, default=14)
    pl.add_argument("--deadline", type=float, default=520.0)
    pl.add_argument("--unmeasured-seconds", type=float, default=30.0)
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
        return plan(args, memory_model(args.per_byte, args.memory_model))
    if args.what == "fit":
        return fit_model(args)
    if args.what == "serve":
        return serve(args.device)
    if args.what == "one":
        judge_one(args.problem, args.out, device=args.device, max_bytes=args.max_bytes,
                  examples=args.examples, limit=args.limit)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
