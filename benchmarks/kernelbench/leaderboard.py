"""Public KernelBench leaderboard kernels re-judged: machine-written candidates that
KernelBench's own check accepted, judged by numoracle's verdict classes.

``gather`` copies candidates out of a local clone of the public leaderboard
(``anneouyang/KernelBenchLeaderboard``: ``docs/assets/data.json`` names, per
problem, the accepted solutions with their speedup; ``docs/assets/problems/``
holds the problem files they were accepted against) into an ignored folder,
never committed: per candidate its problem file and its solution, and
``manifest.json``. It takes the fastest accepted solution of every level-1 and
level-2 problem that has one, ``--count`` of them spread evenly over the
problems.

``judge`` judges each as ``numoracle kernelbench --report`` does, in ``--jobs``
judging workers (``serve``: torch imported once, one candidate after the other,
each candidate in a hardened process of its own; every GPU used; a worker past
``--limit`` seconds on a candidate is killed and a fresh one started) and writes
``candidates.md`` and ``candidates.json``: the verdict class of each (``pass``,
``pass (official inputs only)``, ``FAIL``, ``abstain``, ``not judged``,
``refused``; past the limit ``not judged``, said; a worker that ended without a
report, the last lines of its output), whether its gradients were judged (a
candidate that defines a ``backward`` of its own) and KernelBench's own rule on
the official case. With ``--build-jobs N`` the candidates are first compiled, N
at once, each by starting its hardened process once (``build``: the inline
extension lands in the candidate's own ``TORCH_EXTENSIONS_DIR``, where its
judgement finds it), while those compiled are judged. The verdicts of an
earlier run in ``--out`` are kept and only the others judged (``--no-resume``:
all again); ``--part K/N`` takes every N-th candidate from the K-th, so that
runs can share the manifest.

    python -m benchmarks.kernelbench.leaderboard gather CLONE --out .kernelbench/candidates
    python -m benchmarks.kernelbench.leaderboard judge .kernelbench/candidates --out DIR
        [--jobs 4] [--build-jobs 0] [--part 1/1] [--no-resume]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.kernelbench.worker import (
    device_usable,
    free_device_memory,
    log_tail,
    write_whole,
)

__all__ = ["gather", "judge_all", "verdict_class", "main"]

_KEY = re.compile(r"Level ([12]): (\d+)_(.*)")


def _show(clone: Path, path: str) -> str:
    return subprocess.run(["git", "-C", str(clone), "show", f"HEAD:{path}"], check=True,
                          capture_output=True, text=True).stdout


def gather(clone: Path, out: Path, count: int) -> list[dict[str, Any]]:
    """Copy ``count`` accepted candidates (the fastest per problem, spread over the
    problems) and their problem files from ``clone`` into ``out``; the manifest."""
    board = json.loads(_show(clone, "docs/assets/data.json"))
    tops = []
    for key, entries in board.items():
        m = _KEY.match(key)
        if not m or not entries:
            continue
        best = max(entries, key=lambda e: e.get("torch_speedup") or 0.0)
        tops.append((int(m.group(1)), int(m.group(2)), m.group(3), best))
    tops.sort(key=lambda t: (t[0], t[1]))
    step = max(len(tops) / max(count, 1), 1.0)
    chosen = [tops[int(i * step)] for i in range(min(count, len(tops)))]
    out.mkdir(parents=True, exist_ok=True)
    manifest = []
    for level, number, name, entry in chosen:
        tag = f"l{level}_p{number}"
        folder = out / tag
        folder.mkdir(exist_ok=True)
        (folder / "problem.py").write_text(_show(clone, f"docs/assets/problems/{tag}.py"))
        (folder / "candidate.py").write_text(
            _show(clone, f"docs/assets/solutions/{entry['file']}.py"))
        manifest.append({"tag": tag, "problem": f"level{level}/{number}_{name}",
                         "model": entry.get("display_name", ""),
                         "speedup": entry.get("torch_speedup"), "file": entry["file"]})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def verdict_class(row: dict[str, Any]) -> str:
    """The verdict class of a judgement's row (``numoracle kernelbench --report``)."""
    return {"pass": "pass", "fail": "FAIL"}.get(row["status"], row["status"])


def _gpus() -> list[str]:
    try:
        import torch  # noqa: PLC0415 - the GPUs, where there are

        return [str(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        return []


def build(problem: Path, candidate: Path, device: str, limit: float, report: Path) -> int:
    """Start the candidate's hardened process once without judging (its inline
    extension compiled into ``TORCH_EXTENSIONS_DIR``, where its judgement finds it);
    ``report``: the seconds and why it did not start, if so."""
    from numoracle.kernelbench.sandbox import Sandbox  # noqa: PLC0415 - torch-heavy

    t0 = time.perf_counter()
    box = Sandbox(candidate, device, limit, readable=[problem], template=False)
    try:
        failed = box.prepare()
    finally:
        box.close()
    report.write_text(json.dumps({"seconds": round(time.perf_counter() - t0, 1),
                                  "failed": failed}) + "\n")
    return 0


def _done_before(out: Path) -> list[dict[str, Any]]:
    """The rows of an earlier run's ``candidates.json`` in ``out`` that have a verdict
    (those not judged are judged again)."""
    try:
        rows = json.loads((out / "candidates.json").read_text())["rows"]
    except (OSError, ValueError, KeyError):
        return []
    return [r for r in rows if r.get("verdict") != "not judged"]


def serve(device: str) -> int:
    """A judging worker: judges the candidates the driver writes on stdin (one JSON line
    each: ``problem``, ``candidate``, ``report``, ``examples``, ``limit``,
    ``extensions``: its ``TORCH_EXTENSIONS_DIR``) one after the other, as ``numoracle
    kernelbench --report`` does, torch imported once; each candidate still runs in a
    hardened process of its own. Ends at the end of stdin, or after a judgement that
    raised (the driver then reads no report and says why from the worker's log)."""
    import torch  # noqa: PLC0415 - torch-heavy, in the worker's own process

    module = importlib.import_module("numoracle.kernelbench.judge")
    importlib.import_module("numoracle.kernelbench.sandbox").warm()  # the template imports
    cuda = device.startswith("cuda") and torch.cuda.is_available()
    for line in sys.stdin:
        job = json.loads(line)
        os.environ["TORCH_EXTENSIONS_DIR"] = job["extensions"]
        j = module.judge(job["problem"], job["candidate"], precision="fp32",
                         examples=job["examples"], device=device, timeout=job["limit"])
        row = j.as_dict()
        del j
        free_device_memory(cuda)
        # a CUDA error left in this process: the driver gives the next to a fresh worker
        row["worker_ends"] = cuda and not device_usable()
        write_whole(Path(job["report"]), json.dumps([row], indent=1) + "\n")
        if row["worker_ends"]:
            return 1
    return 0


def _ends(report: Path) -> bool:
    """Whether the judging worker that wrote ``report`` ends after it (a CUDA error)."""
    try:
        return bool(json.loads(report.read_text())[0].get("worker_ends"))
    except (OSError, ValueError, IndexError, AttributeError):
        return True


@dataclass
class _Running:
    entry: dict[str, Any]
    proc: subprocess.Popen[bytes]
    started: float
    report: Path
    log: Path
    #: a judging worker's (:func:`serve`): it goes on to the next candidate
    worker: bool = False


def judge_all(folder: Path, out: Path, *, device: str, jobs: int, limit: float,
              examples: int, deadline: float, argv: list[str], build_jobs: int = 0,
              build_limit: float = 300.0, part: str = "1/1", resume: bool = True) -> int:
    """Judge every candidate of ``folder``'s manifest (see the module's docstring)."""
    from benchmarks.record import meta  # noqa: PLC0415

    t0 = time.perf_counter()
    manifest = json.loads((folder / "manifest.json").read_text())
    k, n = (int(x) for x in part.split("/"))
    manifest = manifest[k - 1::n]
    gpus = _gpus() if device == "cuda" else []
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kbench-leaderboard-"))  # reports, logs, builds
    rows: list[dict[str, Any]] = _done_before(out) if resume else []
    done = {r["tag"] for r in rows}
    head = {**meta(argv), "command": "python -m benchmarks.kernelbench.leaderboard "
            + " ".join(argv), "device": device, "gpus": len(gpus), "jobs": jobs,
            "limit": limit, "examples": examples, "build_jobs": build_jobs,
            "kept": len(rows)}
    to_build = [e for e in manifest if e["tag"] not in done]
    building: list[_Running] = []
    built: list[tuple[dict[str, Any], str]] = [] if build_jobs else [(e, "") for e in to_build]
    if not build_jobs:
        to_build = []
    judging: list[_Running] = []
    count = [0]

    def env_of(tag: str) -> dict[str, str]:
        env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(work / f"ext_{tag}")}
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = gpus[count[0] % len(gpus)]
        count[0] += 1
        return env

    def launch(entry: dict[str, Any], cmd: list[str], kind: str) -> _Running:
        tag = entry["tag"]
        report, log = work / f"{tag}.{kind}.json", work / f"{tag}.{kind}.log"
        with open(log, "wb") as f:
            proc = subprocess.Popen([*cmd, "--report", str(report)], env=env_of(tag),
                                    stdout=f, stderr=f, start_new_session=True)
        return _Running(entry, proc, time.perf_counter(), report, log)

    idle: list[subprocess.Popen[bytes]] = []
    logs: dict[int, Path] = {}

    def assign(entry: dict[str, Any]) -> _Running:
        """``entry`` handed to an idle judging worker, or to a fresh one."""
        tag = entry["tag"]
        while idle and idle[0].poll() is not None:
            idle.pop(0)
        if idle:
            proc = idle.pop(0)
        else:
            log = work / f"worker_{len(logs)}.log"
            with open(log, "wb") as f:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "benchmarks.kernelbench.leaderboard", "serve",
                     "--device", device], env=env_of(tag), stdin=subprocess.PIPE,
                    stdout=f, stderr=f, start_new_session=True)
            logs[proc.pid] = log
        report = work / f"{tag}.judge.json"
        line = {"problem": str(folder / tag / "problem.py"),
                "candidate": str(folder / tag / "candidate.py"), "report": str(report),
                "examples": examples, "limit": limit,
                "extensions": str(work / f"ext_{tag}")}
        assert proc.stdin is not None
        with contextlib.suppress(OSError):  # a dead worker: no report, its log says why
            proc.stdin.write((json.dumps(line) + "\n").encode())
            proc.stdin.flush()
        return _Running(entry, proc, time.perf_counter(), report, logs[proc.pid], True)

    def stop(item: _Running) -> None:
        if item.proc.poll() is None:
            os.killpg(item.proc.pid, 9)
            item.proc.wait()

    def finish(item: _Running | None, entry: dict[str, Any], spent: float, why: str = "",
               compiled: str = "") -> None:
        row = {**entry, "seconds": round(spent, 1)}
        if compiled:
            row["compiled"] = compiled
        try:
            judged = json.loads(item.report.read_text())[0] if item is not None and not why \
                else None
        except (OSError, ValueError, IndexError):
            judged = None
        if judged is None:
            if not why and item is not None:
                tail = log_tail(item.log)
                who = "its judging worker" if item.worker else "numoracle kernelbench"
                why = (f"{who} ended with code {item.proc.poll()} and no report"
                       + (f": {tail}" if tail else ""))
            row.update(verdict="not judged", status="not judged", backward=False,
                       reason=why, kernelbench={})
        else:
            row.update({k: judged.get(k) for k in ("status", "reason", "cases", "backward",
                                                   "kernelbench", "wrapper", "dropped",
                                                   "refusals", "notes", "failing_official",
                                                   "ops", "timings")})
            row["verdict"] = verdict_class(judged)
        rows.append(row)
        print(f"{time.perf_counter() - t0:6.0f}s {entry['tag']} {entry['problem']}: "
              f"{row['verdict']} {str(row.get('reason', ''))[:100]}", file=sys.stderr,
              flush=True)
        _write(out, {**head, "seconds": round(time.perf_counter() - t0, 1)}, rows)

    compiled: dict[str, str] = {}
    while to_build or building or built or judging:
        now = time.perf_counter() - t0
        for item in list(building):
            spent = time.perf_counter() - item.started
            if item.proc.poll() is None and spent <= build_limit and now <= deadline:
                continue
            building.remove(item)
            if item.proc.poll() is None:
                stop(item)
                finish(None, item.entry, spent, f"its build did not finish within "
                       f"{min(build_limit, spent):.0f} s" if spent > build_limit else
                       f"stopped at the run's end while building, after {spent:.0f} s")
                continue
            try:
                failed = json.loads(item.report.read_text()).get("failed")
            except (OSError, ValueError):
                failed = (f"the build ended with code {item.proc.returncode}: "
                          f"{log_tail(item.log)}")
            compiled[item.entry["tag"]] = f"{spent:.0f} s" + (f" ({failed})" if failed else "")
            built.append((item.entry, compiled[item.entry["tag"]]))
        for item in list(judging):
            spent = time.perf_counter() - item.started
            running = item.proc.poll() is None and not item.report.exists()
            if running and spent <= limit and now <= deadline:
                continue
            judging.remove(item)
            tag = item.entry["tag"]
            if running:
                stop(item)
                why = (f"not finished within {limit:g} s (judging"
                       f"{'' if build_jobs else ', compiling included'})"
                       if spent > limit else f"stopped at the run's end after {spent:.0f} s")
                finish(item, item.entry, spent, why, compiled.get(tag, ""))
            else:
                if item.proc.poll() is None and not _ends(item.report):
                    idle.append(item.proc)  # the worker takes the next candidate
                elif item.proc.poll() is None:
                    stop(item)
                finish(item, item.entry, spent, "", compiled.get(tag, ""))
        if now > deadline:
            for entry in [*to_build, *(e for e, _ in built)]:
                finish(None, entry, 0.0, "not started within the run's time",
                       compiled.get(entry["tag"], ""))
            to_build, built = [], []
        while to_build and len(building) < build_jobs:
            entry = to_build.pop(0)
            building.append(launch(entry, [
                sys.executable, "-m", "benchmarks.kernelbench.leaderboard", "build",
                str(folder / entry["tag"] / "problem.py"),
                str(folder / entry["tag"] / "candidate.py"), "--device", device,
                "--limit", str(build_limit)], "build"))
        while built and len(judging) < jobs:
            entry, _ = built.pop(0)
            judging.append(assign(entry))
        time.sleep(0.2)
    for proc in idle:
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
    head["seconds"] = round(time.perf_counter() - t0, 1)
    _write(out, head, rows)
    return 0


def _write(out: Path, head: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    rows = sorted(rows, key=lambda r: (r["tag"][1], int(r["tag"].split("_p")[1])))
    (out / "candidates.json").write_text(json.dumps({"meta": head, "rows": rows}, indent=1)
                                         + "\n")
    counts = Counter(r["verdict"] for r in rows)
    backward = [r for r in rows if r.get("backward")]
    lines = ["# Public KernelBench leaderboard kernels re-judged", "",
             f"Command: `{head['command']}`  ",
             f"Commit {head['commit']}, {head['date']}; device {head['device']} "
             f"({head['gpus']} GPU(s)), {head['jobs']} candidates at once, {head['examples']} "
             f"drawn cases after the official one, {head['limit']:g} s per candidate "
             + (f"(compiled beforehand, {head['build_jobs']} at once)"
                if head.get("build_jobs") else "(compiling included)")
             + (f"; {head['kept']} verdicts kept from an earlier run" if head.get("kept")
                else "") + f"; {head.get('seconds', 0):.0f} s in all.", "",
             "Every candidate was accepted by KernelBench's own check (on its leaderboard); "
             "each is judged against the leaderboard's problem file, claim fp32.", "",
             "| verdict | candidates |", "|---|---|"]
    lines += [f"| {v} | {counts.get(v, 0)} |" for v in
              ("pass", "pass (official inputs only)", "FAIL", "abstain", "not judged",
               "refused")]
    fail_official = sum(1 for r in rows if r["verdict"] == "FAIL" and r.get("failing_official"))
    lines += ["", f"FAIL at the official case itself: {fail_official}; gradients judged "
              f"(a backward of its own): {len(backward)}"
              + (f" ({', '.join(r['tag'] + ': ' + r['verdict'] for r in backward)})"
                 if backward else "") + ".", "",
              "| candidate | problem | model | KB speedup | verdict | backward | KB 1e-2 | "
              "cases | why |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        kb = r.get("kernelbench") or {}
        lines.append(f"| {r['tag']} | {r['problem']} | {r['model']} | "
                     f"{(r.get('speedup') or 0):.2f} | {r['verdict']} | "
                     f"{'judged' if r.get('backward') else '-'} | "
                     f"{'-' if not kb else ('pass' if kb.get('0.01') else 'fail')} | "
                     f"{r.get('cases', 0)} | "
                     f"{str(r.get('reason', ''))[:200].replace('|', '/')} |")
    (out / "candidates.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    """``gather`` or ``judge`` (see the module's docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m benchmarks.kernelbench.leaderboard",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    g = sub.add_parser("gather", help="copy candidates from a clone of the leaderboard")
    g.add_argument("clone", type=Path, help="a git clone (or mirror) of the leaderboard")
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--count", type=int, default=40)
    j = sub.add_parser("judge", help="judge every gathered candidate")
    j.add_argument("folder", type=Path)
    j.add_argument("--out", type=Path, required=True)
    j.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    j.add_argument("--jobs", type=int, default=4)
    j.add_argument("--limit", type=float, default=240.0)
    j.add_argument("--examples", type=int, default=6)
    j.add_argument("--deadline", type=float, default=450.0)
    j.add_argument("--build-jobs", type=int, default=0,
                   help="candidates compiled at once ahead of their judgements (0: each "
                        "compiled within its judgement)")
    j.add_argument("--build-limit", type=float, default=300.0, help="seconds per build")
    j.add_argument("--part", default="1/1",
                   help="K/N: the K-th of N interleaved parts of the manifest")
    j.add_argument("--no-resume", dest="resume", action="store_false",
                   help="judge again the candidates OUT/candidates.json has a verdict for")
    w = sub.add_parser("serve", help="a judging worker: candidates as JSON lines on stdin")
    w.add_argument("--device", default="cuda")
    b = sub.add_parser("build", help="compile one candidate (the driver's child process)")
    b.add_argument("problem", type=Path)
    b.add_argument("candidate", type=Path)
    b.add_argument("--device", default="cuda")
    b.add_argument("--limit", type=float, default=300.0)
    b.add_argument("--report", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.what == "gather":
        found = gather(args.clone, args.out, args.count)
        print(f"{len(found)} candidates in {args.out}")
        return 0
    if args.what == "serve":
        return serve(args.device)
    if args.what == "build":
        return build(args.problem, args.candidate, args.device, args.limit, args.report)
    return judge_all(args.folder, args.out, device=args.device, jobs=args.jobs,
                     limit=args.limit, examples=args.examples, deadline=args.deadline,
                     argv=argv, build_jobs=args.build_jobs, build_limit=args.build_limit,
                     part=args.part, resume=args.resume)


if __name__ == "__main__":
    sys.exit(main())
