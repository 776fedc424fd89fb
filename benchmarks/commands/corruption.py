"""Output-corruption table: for every registered op and every output, how many
cases a kernel that corrupts only that output survives.

For each op (the registry's, so ops added later are covered), a correct fp32
CPU kernel runs on drawn cases (finite inputs, small); each output is then
corrupted in each way of :data:`numoracle.checking.corruption.CORRUPTIONS`
(a constant 7.0; a few elements three bounds off; NaN where the reference is
finite) and judged end to end (:func:`~numoracle.checking.check.check_case`
through a kernel returning the corrupted outputs). The table gives the first
case that caught it (1 is best; "missed" means none of the cases did). The
worst and the most negative bound of each output are recorded too: a bound is
never negative.

    python -m benchmarks corruption [--cases 5] [--seed 0] [--ops a,b]
                                    [--out benchmarks/results/cpu/verdicts] [--label NAME]

Writes ``DIR/corruption-LABEL.json`` and ``DIR/corruption-LABEL.md``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.record import meta, write_json, write_text
from numoracle.targets.target import Target
from numoracle.checking.corruption import CORRUPTIONS, cases_to_catch, prepare
from numoracle.kernels import available_targets
from numoracle.oracle.ops import all_ops
from numoracle.running.runner import draw_cases

__all__ = ["add_parser", "run", "table_rows"]


def _correct(op: str) -> Target | None:
    found = [t for t in available_targets(op) if t.backend in ("numpy", "torch-cpu")
             and t.precision.storage.name == "fp32"]
    return found[0] if found else None




def table_rows(op: str, cases: int, seed: int, max_elements: int) -> list[dict[str, Any]]:
    """One row per output of ``op``: cases to catch per corruption, the bound's range."""
    target = _correct(op)
    if target is None:
        return [{"op": op, "output": "-", "target": None, "note": "no fp32 CPU target"}]
    trials = prepare(draw_cases(target, cases, seed, max_overlays=0,
                                 families=("normal", "exact"), max_elements=max_elements), target)
    rows = []
    for name in sorted({k for t in trials for k in t.got}):
        bounds = [t.reference[name].bound(target.precision.probabilistic) for t in trials
                  if name in t.reference]
        finite = [b[np.isfinite(b)] for b in bounds]
        row: dict[str, Any] = {
            "op": op, "output": name, "target": target.name, "cases": len(trials),
            "min_bound": min((float(f.min()) for f in finite if f.size), default=None),
            "max_bound": max((float(f.max()) for f in finite if f.size), default=None)}
        for how in CORRUPTIONS:
            row[how] = cases_to_catch(trials, name, how, target.precision)
        rows.append(row)
    return rows


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``corruption`` to the harness's subcommands."""
    ap = sub.add_parser("corruption", help="ops x outputs: cases a kernel corrupting one "
                                           "output survives (constant, a few bounds, NaN)")
    ap.add_argument("--cases", type=int, default=5, help="cases drawn per op")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ops", default="", help="comma-separated ops (all: empty)")
    ap.add_argument("--max-elements", type=int, default=600,
                    help="the largest case drawn (elements over all inputs)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu/verdicts"))
    ap.add_argument("--label", default="current")
    ap.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write ``corruption-LABEL.json`` and ``.md`` under ``--out``; exit 1 if any
    corruption was missed."""
    ops = [o for o in args.ops.split(",") if o] or sorted(all_ops())
    t0 = time.perf_counter()
    rows = []
    for op in ops:
        rows += table_rows(op, args.cases, args.seed, args.max_elements)
        print(f"{op}: {time.perf_counter() - t0:.1f} s", flush=True)
    record = meta(args.argv, cases=args.cases, seed=args.seed,
                  max_elements=args.max_elements, seconds=round(time.perf_counter() - t0, 1))
    write_json(args.out / f"corruption-{args.label}.json", {"meta": record, "rows": rows})

    def cell(v: Any) -> str:
        return "missed" if v is None else str(v)

    lines = [f"# Output corruption ({args.label}): cases until a corrupted output is caught",
             "", f"`{record['command']}`; {args.cases} drawn cases per op (seed {args.seed}).",
             "", "| op | output | target | constant | bounds | nan | min bound |",
             "|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['op']} | {r['output']} | {r.get('target')} | "
                     + " | ".join(cell(r.get(h)) for h in CORRUPTIONS)
                     + f" | {r.get('min_bound')} |")
    write_text(args.out / f"corruption-{args.label}.md", "\n".join(lines) + "\n")
    missed = [r for r in rows if any(r.get(h, 0) is None for h in CORRUPTIONS)]
    for r in missed:
        print(f"MISSED: {r['op']}.{r['output']}: "
              + ", ".join(h for h in CORRUPTIONS if r.get(h, 0) is None))
    return 1 if missed else 0
