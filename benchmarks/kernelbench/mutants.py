"""Mutants of KernelBench problems: numoracle's verdict beside KernelBench's 1e-2 and 1e-4.

For every problem the traced oracle judges (no missing rule), each candidate of
:data:`~benchmarks.kernelbench.candidates.BODIES` is written as a KernelBench
file and judged with :func:`numoracle.kernelbench.judge.judge`. The problem's
own ``Model`` as the candidate (``model``) must pass: a failure there is a false
alarm; a ``pass`` on any other candidate is a miss. KernelBench's columns apply
its rule (``torch.allclose(atol=rtol=tol)`` against torch's own output) to the
official case the judge ran (at reduced sizes where the official instance does
not fit the float64 oracle: said per row).

A shard writes its rows after every candidate (``mutants_shard{i}.json``);
:func:`write` turns the rows of one or more shards into ``mutants.md`` and
``mutants.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from benchmarks.kernelbench.candidates import (
    BACKWARD_MUTANTS,
    is_judged,
    judge_within,
    official_how,
    problem_files,
    problem_name,
    write_candidate,
)
from benchmarks.record import meta

__all__ = ["merge", "run_shard", "write"]


def run_shard(args: argparse.Namespace, out: Path) -> None:
    """Judge every candidate of ``args.mutants`` on this shard's share of the first
    ``args.limit`` judged problems, writing the rows to ``out`` after each."""
    mutants = [m for m in args.mutants.split(",") if m]
    t0 = time.perf_counter()
    chosen = [p for p in problem_files(args.problems)[::args.every] if is_judged(p)]
    chosen = chosen[: args.limit][args.shard::args.shards]
    head = {**meta(args.argv), "problems": len(chosen), "mutants": mutants,
            "precision": args.precision, "examples": args.examples,
            "device": torch.cuda.get_device_name() if args.device != "cpu" else "CPU only"}
    rows: list[dict[str, Any]] = []
    out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        # kept row by row: a run stopped at its limit keeps its rows
        record = {**head, "seconds": round(time.perf_counter() - t0, 1)}
        out.write_text(json.dumps({"meta": record, "rows": rows}, indent=1) + "\n")

    with tempfile.TemporaryDirectory() as tmp:
        for path in chosen:
            for mutant in mutants:
                cand = write_candidate(Path(tmp), path, mutant)
                j = judge_within(args.limit_seconds, path, cand, precision=args.precision,
                                 examples=args.examples, device=args.device,
                                 isolated=args.isolate, shrink=not args.no_shrink,
                                 backward=True if mutant in BACKWARD_MUTANTS
                                 or getattr(args, "backward", False) else None)
                if j is None:
                    print(f"{path.stem} {mutant}: timeout", file=sys.stderr, flush=True)
                    rows.append({"problem": problem_name(path), "mutant": mutant,
                                 "status": "timeout", "kernelbench": {}, "cases": 0,
                                 "reason": f"over {args.limit_seconds} s"})
                    save()
                    continue
                row = j.as_dict()
                row.update(problem=problem_name(path), mutant=mutant, candidate=mutant,
                           official=official_how(j))
                rows.append(row)
                save()
                print(f"{row['problem']} {mutant}: {j.status} KB {j.kernelbench} "
                      f"{j.seconds:.1f}s {j.reason[:100]}", file=sys.stderr, flush=True)
    save()


def write(rows: list[dict[str, Any]], metas: list[dict[str, Any]], out: Path) -> Path:
    """``mutants.json`` and ``mutants.md`` in ``out`` from the rows of one or more runs;
    returns the markdown's path."""
    head = metas[0]
    problems = sorted({r["problem"] for r in rows})
    mutants = list(dict.fromkeys(r["mutant"] for r in rows))
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutants.json").write_text(json.dumps({"meta": metas, "rows": rows}, indent=1)
                                      + "\n")
    device = head.get("device") or head.get("gpu") or "CPU only"
    lines = ["# KernelBench mutants: numoracle beside KernelBench's own rule", "",
             "Commands: " + "; ".join(f"`{m['command']}`" for m in metas) + "  ",
             f"Machine: {head['machine']}, {device}; torch {head['torch']}; "
             f"{max(m['seconds'] for m in metas)} s (the longest run); "
             f"{len(problems)} problems (those the traced oracle judges), precision "
             f"{head['precision']}, {head['examples']} drawn cases per candidate after the "
             "official one.", "",
             "Per mutant: how many candidates each judge lets through (`pass`). numoracle's "
             "`pass` on `model` is a correct candidate passing; on any other mutant a miss. "
             "KernelBench's columns are its rule on the official case (run whole and judged "
             "on sampled rows, or at reduced sizes, where the float64 oracle cannot hold the "
             "official instance).", "",
             "| mutant | judged | numoracle pass | numoracle fail | abstain/refused | "
             "KB 1e-2 pass | KB 1e-4 pass | failing outside the official case |",
             "|---|---|---|---|---|---|---|---|"]
    for mutant in mutants:
        rs = [r for r in rows if r["mutant"] == mutant]
        c = Counter(r["status"] for r in rs)
        kb2 = sum(1 for r in rs if r["kernelbench"].get("0.01"))
        kb4 = sum(1 for r in rs if r["kernelbench"].get("0.0001"))
        outside = sum(1 for r in rs if r["status"] == "fail" and not r.get("failing_official"))
        lines.append(f"| {mutant} | {len(rs) - c.get('timeout', 0)} | {c.get('pass', 0)} | "
                     f"{c.get('fail', 0)} | {c.get('abstain', 0) + c.get('refused', 0)} "
                     f"(+{c.get('timeout', 0)} over the time limit) | {kb2} | {kb4} | "
                     f"{outside} |")
    lines += ["", "## Every candidate", "",
              "| problem | mutant | numoracle | KB 1e-2 | KB 1e-4 | cases | why |",
              "|---|---|---|---|---|---|---|"]
    for r in rows:
        kb = r["kernelbench"]
        lines.append(f"| {r['problem']} | {r['mutant']} | {r['status']} | "
                     f"{'pass' if kb.get('0.01') else 'fail'} | "
                     f"{'pass' if kb.get('0.0001') else 'fail'} | {r['cases']} | "
                     f"{r['reason'][:140].replace('|', '/')} |")
    md = out / "mutants.md"
    md.write_text("\n".join(lines) + "\n")
    return md


def merge(paths: list[Path], out: Path) -> Path:
    """Pool shard files (or earlier ``mutants.json``) into ``out/mutants.md`` and ``.json``."""
    rows: list[dict[str, Any]] = []
    metas: list[dict[str, Any]] = []
    for p in paths:
        d = json.loads(p.read_text())
        rows += d["rows"]
        metas += d["meta"] if isinstance(d["meta"], list) else [d["meta"]]
    return write(rows, metas, out)
