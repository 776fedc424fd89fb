"""Seconds of an official instance judged whole at once, whole in pieces of rows, and on
a sample of its rows, on this machine: KernelBench problems with their row count kept
and their other size knobs scaled down to fit the host, each problem's own ``Model``
as the candidate (claim fp32, official case only).

    python -m benchmarks.kernelbench.pieces PROBLEM.py ... --set dim=2048 \
        --max-bytes 33554432 [--repeat 2]

Prints one JSON line per problem and way: seconds, pieces, rows per piece, verdict,
worst ratio.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.kernelbench.candidates import write_candidate
from numoracle.kernelbench.judge import DEFAULT_MAX_BYTES, judge


def _scaled(source: Path, sets: dict[str, int], folder: Path) -> Path:
    """A copy of the problem file with the module constants in ``sets`` replaced."""
    text = source.read_text()
    for name, value in sets.items():
        text, n = re.subn(rf"^{name} = .*$", f"{name} = {value}", text, flags=re.M)
        if n != 1:
            sys.exit(f"{source.name} has no single line '{name} = ...' to set")
    out = folder / source.name
    out.write_text(text)
    return out


def _one(problem: Path, candidate: Path, max_bytes: int, sampled: bool) -> dict[str, Any]:
    module = sys.modules["numoracle.kernelbench.judge"]
    keep = module.MAX_PIECES  # type: ignore[attr-defined]
    if sampled:
        module.MAX_PIECES = 1  # type: ignore[attr-defined]
    try:
        t0 = time.perf_counter()
        j = judge(problem, candidate, examples=0, max_bytes=max_bytes, shrink=False)
        seconds = time.perf_counter() - t0
    finally:
        module.MAX_PIECES = keep  # type: ignore[attr-defined]
    case = j.official.case if j.official is not None else None
    span = case.span if case is not None else ()
    return {"status": j.status, "seconds": round(seconds, 2),
            "oracle_s": round(j.timings.get("oracle", 0.0), 2),
            "pieces": -(-(span[1] - span[0]) // span[2]) if span else 0,
            "rows_per_piece": span[2] if span else 0,
            "sampled_rows": len(case.rows) if case is not None else 0,
            "worst_ratio": j.worst_ratio}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problems", nargs="+", type=Path)
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE")
    ap.add_argument("--max-bytes", type=int, required=True,
                    help="the float64 floor of a piece (below the whole instance's)")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    sets = {k: int(v) for k, v in (s.split("=", 1) for s in args.set)}
    with tempfile.TemporaryDirectory() as tmp:
        for source in args.problems:
            problem = _scaled(source, sets, Path(tmp))
            candidate = write_candidate(Path(tmp), problem, "model")
            for r in range(args.repeat):  # interleaved: whole, pieces, sampled, again
                for way, max_bytes, sampled in (("whole", DEFAULT_MAX_BYTES, False),
                                                ("pieces", args.max_bytes, False),
                                                ("sampled rows", args.max_bytes, True)):
                    row = _one(problem, candidate, max_bytes, sampled)
                    print(json.dumps({"problem": source.stem, "way": way, "repeat": r,
                                      **row}), flush=True)


if __name__ == "__main__":
    main()
