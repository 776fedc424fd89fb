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

``judge`` runs ``numoracle kernelbench`` on each (a process per candidate, every
GPU used, ``--jobs`` at once, ``--limit`` seconds each) and writes
``candidates.md`` and ``candidates.json``: the verdict class of each (``pass``,
``pass (official inputs only)``, ``FAIL``, ``abstain``, ``not judged``,
``refused``; past the limit ``not judged``, said), whether its gradients were
judged (a candidate that defines a ``backward`` of its own) and KernelBench's own
rule on the official case.

    python -m benchmarks.kernelbench.leaderboard gather CLONE --out .kernelbench/candidates
    python -m benchmarks.kernelbench.leaderboard judge .kernelbench/candidates --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

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


def judge_all(folder: Path, out: Path, *, device: str, jobs: int, limit: float,
              examples: int, deadline: float, argv: list[str]) -> int:
    """Judge every candidate of ``folder``'s manifest (see the module's docstring)."""
    from benchmarks.record import meta  # noqa: PLC0415

    t0 = time.perf_counter()
    manifest = json.loads((folder / "manifest.json").read_text())
    gpus = _gpus() if device == "cuda" else []
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kbench-leaderboard-"))  # reports, logs, builds
    rows: list[dict[str, Any]] = []
    running: list[tuple[dict[str, Any], subprocess.Popen[bytes], float, Path]] = []
    pending = list(manifest)
    head = {**meta(argv), "command": "python -m benchmarks.kernelbench.leaderboard "
            + " ".join(argv), "device": device, "gpus": len(gpus), "jobs": jobs,
            "limit": limit, "examples": examples}

    def finish(entry: dict[str, Any], proc: subprocess.Popen[bytes] | None, spent: float,
               report: Path | None, why: str = "") -> None:
        row = {**entry, "seconds": round(spent, 1)}
        try:
            judged = json.loads(report.read_text())[0] if report is not None and not why \
                else None
        except (OSError, ValueError, IndexError):
            judged = None
        if judged is None:
            code = None if proc is None else proc.returncode
            row.update(verdict="not judged", status="not judged", backward=False,
                       reason=why or f"numoracle kernelbench ended with code {code} and "
                                     "no report", kernelbench={})
        else:
            row.update({k: judged.get(k) for k in ("status", "reason", "cases", "backward",
                                                   "kernelbench", "wrapper", "dropped",
                                                   "refusals", "notes", "failing_official",
                                                   "ops")})
            row["verdict"] = verdict_class(judged)
        rows.append(row)
        print(f"{time.perf_counter() - t0:6.0f}s {entry['tag']} {entry['problem']}: "
              f"{row['verdict']} {str(row.get('reason', ''))[:100]}", file=sys.stderr,
              flush=True)
        _write(out, {**head, "seconds": round(time.perf_counter() - t0, 1)}, rows)

    while pending or running:
        now = time.perf_counter() - t0
        for item in list(running):
            entry, proc, started, report = item
            spent = time.perf_counter() - started
            if proc.poll() is None and spent <= limit and now <= deadline:
                continue
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
                why = (f"not finished within {limit:g} s (compiling and judging)"
                       if spent > limit else f"stopped at the run's end after {spent:.0f} s")
                finish(entry, proc, spent, None, why)
            else:
                finish(entry, proc, spent, report)
            running.remove(item)
        if now > deadline:
            for entry in pending:
                finish(entry, None, 0.0, None, "not started within the run's time")
            pending = []
        while pending and len(running) < jobs:
            entry = pending.pop(0)
            tag = entry["tag"]
            report = work / f"{tag}.json"
            env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(work / f"ext_{tag}")}
            if gpus:
                env["CUDA_VISIBLE_DEVICES"] = gpus[(len(rows) + len(running)) % len(gpus)]
            cmd = [sys.executable, "-m", "numoracle", "kernelbench",
                   str(folder / tag / "problem.py"), str(folder / tag / "candidate.py"),
                   "--device", device, "--examples", str(examples), "--timeout", str(limit),
                   "--report", str(report)]
            log = open(work / f"{tag}.log", "wb")  # noqa: SIM115 - the child's own log
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=log,
                                    start_new_session=True)
            running.append((entry, proc, time.perf_counter(), report))
        time.sleep(0.2)
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
             f"(compiling included); {head.get('seconds', 0):.0f} s in all.", "",
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
    args = ap.parse_args(argv)
    if args.what == "gather":
        found = gather(args.clone, args.out, args.count)
        print(f"{len(found)} candidates in {args.out}")
        return 0
    return judge_all(args.folder, args.out, device=args.device, jobs=args.jobs,
                     limit=args.limit, examples=args.examples, deadline=args.deadline,
                     argv=argv)


if __name__ == "__main__":
    sys.exit(main())
