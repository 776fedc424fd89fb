"""The soundness-under-size-limits table (issue 17) from the sweeps' soundness.json files.

    python benchmarks/limits_table.py FILE.json [FILE.json ...]
    python benchmarks/limits_table.py soundness_partial.json:SEED ...


Cells: judged cases / alarms / worst err/bound (deterministic) per op, target and
``max_elements`` setting. Runs with different Hypothesis seeds draw different
cases, so their counts add; where two files hold the same (op, target, limit,
seed), the later file on the command line is kept. A run cut short leaves only
``soundness_partial.json`` (rows without the command): name its seed after a colon.
Also lists the cells below 2,000 cases.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

LIMITS = ("256", "1024", "default", "262144")


def load(paths: list[str]) -> dict[tuple[str, str, str], dict[int, tuple[int, int, float]]]:
    cells: dict[tuple[str, str, str], dict[int, tuple[int, int, float]]] = defaultdict(dict)
    for arg in paths:
        path, _, given = arg.partition(":")
        d = json.loads(Path(path).read_text())
        if isinstance(d, list):  # a partial file: rows only
            if not given.isdigit():
                raise SystemExit(f"{path} holds rows without their command: give its seed "
                                 f"as {path}:SEED")
            d = {"meta": {"command": f"--seed {given}"}, "rows": d}
        found = re.search(r"--seed (\d+)", d["meta"]["command"])
        seed = int(given) if given.isdigit() else int(found.group(1)) if found else 0
        per_file: dict[tuple[str, str, str], list[int | float]] = {}
        for r in d["rows"]:
            if "skipped" in r:
                continue
            key = (r["op"], r["target"], str(r["max_elements"]))
            c = per_file.setdefault(key, [0, 0, 0.0])
            c[0] += r["cases"]
            c[1] += r["failures"]
            c[2] = max(c[2], r["worst_ratio"])
        for key, (n, f, w) in per_file.items():
            cells[key][seed] = (int(n), int(f), float(w))  # a later file replaces the same seed
    return cells


def main(paths: list[str]) -> None:
    cells = load(paths)
    pairs = sorted({(op, t) for op, t, _ in cells})
    print("| op | target | " + " | ".join(f"max_elements {lim}" for lim in LIMITS) + " |")
    print("|---|---|" + "---|" * len(LIMITS))
    totals = {lim: [0, 0] for lim in LIMITS}
    below = []
    for op, t in pairs:
        row = []
        for lim in LIMITS:
            runs = cells.get((op, t, lim))
            if not runs:
                row.append("—")
                continue
            n = sum(v[0] for v in runs.values())
            f = sum(v[1] for v in runs.values())
            w = max(v[2] for v in runs.values())
            seeds = "+".join(str(s) for s in sorted(runs))
            row.append(f"{n} / {f} / {w:.3g} (seeds {seeds})")
            totals[lim][0] += n
            totals[lim][1] += f
            if n < 2000:
                below.append(f"{op} {t} {lim}: {n}")
        print(f"| {op} | {t} | " + " | ".join(row) + " |")
    print("| **all** | | " + " | ".join(f"**{n} / {f}**" for n, f in totals.values()) + " |")
    print(f"\nCells below 2,000 cases: {len(below)}")
    for b in below:
        print(f"- {b}")


if __name__ == "__main__":
    main(sys.argv[1:])
