"""The traced zoo (:mod:`numoracle.zoo.traced`), recorded: per mutant, caught or
missed, the cases until caught and the shrunk repro's shape; per correct kernel,
the cases run and the worst ratio.

:func:`zoo` writes ``zoo.json`` and ``zoo.md``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.record import meta, write_json, write_text
from numoracle.api import add_listener, remove_listener
from numoracle.errors import KernelMismatch
from numoracle.zoo.traced import MUTANTS, check

__all__ = ["markdown", "run_one", "zoo"]


def run_one(mutant: Any, examples: int, correct_examples: int, seed: int) -> dict[str, Any]:
    row: dict[str, Any] = {"mutant": mutant.name, "family": mutant.family,
                           "bug": (mutant.broken.__doc__ or "").strip()}
    t0 = time.perf_counter()
    seen: list[Any] = []
    add_listener(seen.append)
    try:
        r = check(mutant, examples=examples, seed=seed)
        row.update(caught=False, cases=r.cases, worst_ratio=r.worst_ratio)
    except KernelMismatch:
        res = seen[-1]
        row.update(caught=True, cases_to_catch=res.cases_to_catch, repro_shape=res.repro_shape,
                   diagnosis=res.diagnosis)
    finally:
        remove_listener(seen.append)
    row["seconds"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    ok = check(mutant, mutant.correct, examples=correct_examples, seed=seed)
    row["correct"] = {"verdict": ok.verdict, "cases": ok.cases, "worst_ratio": ok.worst_ratio,
                      "unjudged": ok.unjudged, "seconds": round(time.perf_counter() - t0, 2)}
    return row


def markdown(record: dict[str, Any]) -> str:
    lines = ["# Traced zoo", "", f"Command: `{record['meta']['command']}`  ",
             f"Machine: {record['meta']['machine']}, torch {record['meta'].get('torch')}  ",
             f"Commit: {record['meta']['commit']}", "",
             "| mutant | family | caught | cases to catch | shrunk shape | correct kernel: "
             "verdict, cases, worst ratio |", "|---|---|---|---|---|---|"]
    for r in record["rows"]:
        c = r["correct"]
        lines.append(f"| {r['mutant']} | {r['family']} | {'yes' if r['caught'] else '**no**'} "
                     f"| {r.get('cases_to_catch')} | {r.get('repro_shape')} | {c['verdict']}, "
                     f"{c['cases']}, {c['worst_ratio']:.3g} |")
    return "\n".join(lines) + "\n"


def zoo(examples: int, correct_examples: int, seed: int, out: Path,
        argv: Sequence[str]) -> int:
    """Every traced mutant and its correct kernel; write ``out/zoo.json`` and ``zoo.md``.
    Returns 1 when a mutant is missed or a correct kernel fails, else 0."""
    rows = [run_one(m, examples, correct_examples, seed) for m in MUTANTS]
    record = {"meta": meta(argv), "rows": rows}
    write_json(out / "zoo.json", record)
    write_text(out / "zoo.md", markdown(record))
    for r in rows:
        print(r["mutant"], "caught" if r["caught"] else "MISSED", r.get("cases_to_catch"),
              r["correct"]["verdict"], r["correct"]["worst_ratio"])
    return 0 if all(r["caught"] and r["correct"]["verdict"] == "pass" for r in rows) else 1
