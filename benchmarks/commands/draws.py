"""``draws``: what drawing cases costs the process that hands them out.

A scheduled run's workers (``numoracle run -j N``) and a cluster's blocks
judge cases the driver draws (:mod:`numoracle.running.draws`). For a few
targets, in the small size regime a run starts with: the driver's rate —
cases per second of :class:`~numoracle.running.draws.BlockDraws` in chunks
(the pool's path) and of one :func:`~numoracle.running.draws.draw_cases` call
of a cluster block — and one worker's judging rate on the same cases
(``run_target(cases=...)``). The ratio of the two is how many workers one
driver keeps fed on that target.

    python -m benchmarks draws [--cases 200] [--out benchmarks/results/cpu/draws]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from benchmarks.record import meta, write_json, write_text

#: (target, op) pairs timed by default: cheap and dearer CPU kernels
DEFAULT_ROWS = ("numpy-fp32:matmul", "numpy-fp32:linear", "numpy-fp32:conv2d",
                "torch-cpu-fp32:kan", "torch-cpu-fp32:optim")


def time_row(spec: str, cases: int, seed: int) -> dict[str, Any]:
    """Drawing and judging rates of ``cases`` cases of ``target:op``."""
    from numoracle.kernels import get_target  # noqa: PLC0415 - after the harness parses
    from numoracle.running.draws import CHUNK, BlockDraws, draw_cases  # noqa: PLC0415
    from numoracle.running.runner import run_target  # noqa: PLC0415

    name, op = spec.split(":")
    target = get_target(name, op)
    if target.unavailable_reason() is not None:
        return {"target": name, "op": op, "skipped": target.unavailable_reason()}
    draw_cases(target, 2, seed, regime="small")  # imports and strategy set-up, untimed
    t0 = time.perf_counter()
    block = BlockDraws(target, seed, regime="small")
    chunked = []
    while len(chunked) < cases:
        got = block.chunk(block.drawn)
        if not got:
            break
        chunked.extend(got)
    chunk_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    whole = draw_cases(target, cases, seed + 1, regime="small")
    whole_s = time.perf_counter() - t0
    run_target(target, cases=chunked[:2], store=None, shrink=False)  # warm-up, untimed
    t0 = time.perf_counter()
    res = run_target(target, cases=chunked[:cases], store=None, shrink=False)
    judge_s = time.perf_counter() - t0
    draw_rate = len(chunked) / chunk_s
    judge_rate = res.cases / judge_s if judge_s > 0 else float("inf")
    return {"target": name, "op": op, "chunk": CHUNK,
            "chunked_cases": len(chunked), "chunked_s": round(chunk_s, 3),
            "chunked_cases_per_s": round(draw_rate, 1),
            "block_cases": len(whole), "block_s": round(whole_s, 3),
            "block_cases_per_s": round(len(whole) / whole_s, 1),
            "judged_cases": res.cases, "judge_s": round(judge_s, 3),
            "judged_cases_per_s": round(judge_rate, 1),
            "workers_fed_per_driver": round(draw_rate / judge_rate, 2)}


def to_markdown(rows: list[dict[str, Any]], record: dict[str, Any]) -> str:
    """The rates as a table, under the command that made them."""
    lines = ["# Drawing cases in the driver: its rate against one worker's judging rate", "",
             f"`{record['command']}` on {record['machine']} ({record['cpus']} CPUs), "
             f"{record['date']}, commit {record['commit']}.", "",
             "| target | op | drawn in chunks, cases/s | one block, cases/s | "
             "judged by one worker, cases/s | workers one driver feeds |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['target']} | {r['op']} | skipped: {r['skipped']} | | | |")
            continue
        lines.append(f"| {r['target']} | {r['op']} | {r['chunked_cases_per_s']} | "
                     f"{r['block_cases_per_s']} | {r['judged_cases_per_s']} | "
                     f"{r['workers_fed_per_driver']} |")
    return "\n".join(lines) + "\n"


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``draws`` to the harness's subcommands."""
    p = sub.add_parser("draws", help="cases per second the driver draws against one worker's "
                                     "judging rate")
    p.add_argument("--cases", type=int, default=200, help="cases per target (default 200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rows", default=",".join(DEFAULT_ROWS),
                   help="comma-separated TARGET:OP pairs")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu/draws"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Time every row; write draws.json and draws.md."""
    rows = [time_row(spec, args.cases, args.seed) for spec in args.rows.split(",") if spec]
    record = meta(args.argv)
    write_json(args.out / "draws.json", {"meta": record, "rows": rows})
    write_text(args.out / "draws.md", to_markdown(rows, record))
    return 0
