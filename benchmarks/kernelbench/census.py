"""Census of KernelBench problems: which ones the traced oracle judges, abstains on, refuses.

Every problem's forward pass is captured at its official shapes in fake mode
(nothing is allocated) and its ATen ops are compared with the rule table of
:mod:`numoracle.oracle.traced`. :func:`census` writes ``census.json`` (one row per
problem: status, missing ops, the reason, the float64 bytes of the official
instance) and ``census.md`` (counts per level, the missing rules by how many
problems need them, the refusals and every problem).
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.kernelbench.candidates import problem_files
from benchmarks.record import meta, write_json, write_text
from numoracle.kernelbench.census import classify, decompositions
from numoracle.oracle.traced import RULES

__all__ = ["census"]


def _markdown(head: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    counts = Counter(r["status"] for r in rows)
    missing = Counter(op for r in rows for op in r["missing"])
    alone = Counter(r["missing"][0] for r in rows if len(r["missing"]) == 1)
    lines = ["# KernelBench census: what the traced oracle judges", "",
             f"Command: `{head['command']}`  ", f"Machine: {head['machine']}, torch "
             f"{head['torch']}; rules in the table: {head['rules']}; decompositions: "
             f"{head['decompositions']}; {head['seconds']} s for {len(rows)} problems.", "",
             "| status | L1 | L2 | total |", "|---|---|---|---|"]
    for status in ("judged", "abstains", "refused"):
        per = Counter(r["level"] for r in rows if r["status"] == status)
        lines.append(f"| {status} | {per.get('level1', 0)} | {per.get('level2', 0)} | "
                     f"{counts.get(status, 0)} |")
    lines += ["", "## Missing rules (problems that need each op)", "",
              "| ATen op | problems | the only missing op in |", "|---|---|---|"]
    lines += [f"| `{op}` | {n} | {alone.get(op, 0)} |" for op, n in missing.most_common()]
    lines += ["", "## Refused, and why", ""]
    lines += [f"- {r['level']}/{r['problem']}: {r['reason']}" for r in rows
              if r["status"] == "refused"]
    noted = [r for r in rows if r["status"] != "refused" and r["reason"]]
    if noted:
        lines += ["", "## Judged with a change, and why", ""]
        lines += [f"- {r['level']}/{r['problem']}: {r['reason']}" for r in noted]
    lines += ["", "## Every problem", "", "| problem | status | missing | float64 GB |",
              "|---|---|---|---|"]
    lines += [f"| {r['level']}/{r['problem']} | {r['status']} | "
              f"{', '.join(f'`{m}`' for m in r['missing'])} | "
              f"{r['float64_bytes'] / 2**30:.3g} |" for r in rows]
    return "\n".join(lines) + "\n"


def census(problems: Path, out: Path, argv: Sequence[str]) -> int:
    """Classify every problem under ``problems``; write ``census.json`` and ``census.md``
    to ``out``. Returns 2 when there is no problem file, else 0."""
    import torch  # noqa: PLC0415 - the census needs it; the harness's --help does not

    files = problem_files(problems)
    if not files:
        print(f"no problem files under {problems}", file=sys.stderr)
        return 2
    table = decompositions()
    t0 = time.perf_counter()
    rows = []
    for path in files:
        entry = classify(path, RULES, table)
        row = entry.as_dict()
        row["level"] = path.parent.name
        rows.append(row)
        print(f"{row['level']}/{entry.problem}: {entry.status} {entry.missing or ''} "
              f"{entry.reason}", file=sys.stderr)
    head = {**meta(argv), "torch": torch.__version__, "rules": len(RULES),
            "decompositions": "traced oracle's table" if table is not None else "none",
            "seconds": round(time.perf_counter() - t0, 1), "problems": len(rows),
            "counts": dict(Counter(r["status"] for r in rows))}
    write_json(out / "census.json", {"meta": head, "rows": rows})
    write_text(out / "census.md", _markdown(head, rows))
    print(json.dumps({k: head[k] for k in ("command", "seconds", "problems", "counts")}))
    return 0
