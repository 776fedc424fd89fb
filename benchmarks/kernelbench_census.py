"""Census of KernelBench problems: which ones the traced oracle judges, abstains on, refuses.

    python benchmarks/kernelbench_census.py PROBLEMS_DIR [--out DIR]

PROBLEMS_DIR holds KernelBench's ``level1/`` and ``level2/`` folders (or problem
files directly). Every problem's forward pass is captured at its official shapes
in fake mode (nothing is allocated) and its ATen ops are compared with the rule
table of :mod:`numoracle.oracle.traced`. Writes ``census.md`` and ``census.json``
to ``--out`` (default ``benchmarks/results/cpu/kernelbench``).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections import Counter
from pathlib import Path

import torch

from numoracle.kernelbench.census import classify, decompositions
from numoracle.oracle.traced import RULES


def _problem_files(root: Path) -> list[Path]:
    levels = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("level"))
    folders = levels or [root]

    def key(p: Path) -> tuple[str, int, str]:
        head = p.stem.split("_", 1)[0]
        return (p.parent.name, int(head) if head.isdigit() else 0, p.stem)

    return sorted((f for d in folders for f in d.glob("*.py")), key=key)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problems", type=Path, help="folder of KernelBench problems")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu/kernelbench"))
    args = parser.parse_args()
    files = _problem_files(args.problems)
    if not files:
        print(f"no problem files under {args.problems}", file=sys.stderr)
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
    seconds = time.perf_counter() - t0
    counts = Counter(r["status"] for r in rows)
    missing = Counter(op for r in rows for op in r["missing"])
    alone = Counter(r["missing"][0] for r in rows if len(r["missing"]) == 1)
    meta = {"command": "python benchmarks/kernelbench_census.py " + " ".join(sys.argv[1:]),
            "machine": f"{platform.machine()} {platform.system()}, CPU only",
            "torch": torch.__version__, "rules": len(RULES),
            "decompositions": "traced oracle's table" if table is not None else "none",
            "seconds": round(seconds, 1), "problems": len(rows), "counts": dict(counts)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "census.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1)
                                          + "\n")
    lines = ["# KernelBench census: what the traced oracle judges", "",
             f"Command: `{meta['command']}`  ", f"Machine: {meta['machine']}, torch "
             f"{meta['torch']}; rules in the table: {meta['rules']}; decompositions: "
             f"{meta['decompositions']}; {meta['seconds']} s for {len(rows)} problems.", "",
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
    (args.out / "census.md").write_text("\n".join(lines) + "\n")
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
