"""``pool_draws``: cases a run's workers judge when the driver draws every case
against each worker drawing its own (:class:`~numoracle.running.pool.OwnDraws`).

A GPU worker spends most of a case waiting for its device while the cases are
drawn on the host. This models it on any machine: rows of kernels that compute
NumPy's result and then sleep ``--sleep`` seconds (the device's time, no CPU),
judged by ``run_pool`` with 1, 2, 4, ... workers within ``--budget`` seconds,
once with the driver drawing (``own_draws=False``) and once with each worker's
own draw process. Per run: cases judged, cases per second, the driver's
seconds drawing while the workers judge, the workers' mean seconds waiting
for cases.

    python -m benchmarks pool_draws [--jobs 1,2,4] [--budget 20] [--sleep 0.05]
        [--out benchmarks/results/cpu/own_draws]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.record import meta, write_json, write_text


def sleepy_matmul(a: Any, b: Any, seconds: float = 0.05) -> dict[str, Any]:
    """NumPy's matmul, then ``seconds`` of sleep (a device's time)."""
    out = np.matmul(a, b)
    time.sleep(seconds)
    return {"out": out}


def sleepy_linear(x: Any, weight: Any, grad_output: Any, bias: Any = None,
                  seconds: float = 0.05) -> dict[str, Any]:
    """NumPy's linear layer and its gradients, then ``seconds`` of sleep."""
    y = x @ weight.T + (0.0 if bias is None else bias)
    got = {"y": y, "grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        got["grad_bias"] = grad_output.sum(axis=0)
    time.sleep(seconds)
    return got


def _available() -> None:
    """Always available (a module-level function: the target pickles to the workers)."""
    return None


def _rows(sleep: float, per_op: int) -> list[Any]:
    from functools import partial  # noqa: PLC0415

    from numoracle.targets.target import Target  # noqa: PLC0415 - after the harness parses
    from numoracle.oracle.precision import get_model  # noqa: PLC0415
    from numoracle.running.schedule import Row  # noqa: PLC0415

    rows = []
    for i in range(per_op):
        for op, fn in (("matmul", sleepy_matmul), ("linear", sleepy_linear)):
            t = Target(name=f"sleeps-{i}", op=op, backend="numpy",
                       precision=get_model("fp32"), fn=partial(fn, seconds=sleep),
                       available=_available)
            rows.append(Row(t, asked=100_000))
    return rows


def one_run(jobs: int, own: bool, budget: float, sleep: float, per_op: int,
            store: Path) -> dict[str, Any]:
    """One ``run_pool`` of the sleepy rows; its cases and where the time went."""
    from numoracle.running.pool import run_pool  # noqa: PLC0415
    from numoracle.running.schedule import RunSettings  # noqa: PLC0415

    rows = _rows(sleep, per_op)
    stats: dict[str, Any] = {}
    t0 = time.monotonic()
    results, _warm, warm_s, judge_s = run_pool(rows, budget, RunSettings(store=store), jobs,
                                               stats=stats, own_draws=own)
    waits = [w for w in stats.get("worker_wait_s", []) if w is not None]
    cases = sum(r.cases for r in results)
    return {"jobs": jobs, "own_draws": own, "cases": cases, "judge_s": round(judge_s, 2),
            "cases_per_s": round(cases / judge_s, 1) if judge_s else None,
            "warm_up_s": round(warm_s, 2), "wall_s": round(time.monotonic() - t0, 2),
            "driver_draw_judging_s": stats.get("draw_judging_s"),
            "workers_drawing_their_own": stats.get("own_draws"),
            "mean_wait_s": round(sum(waits) / len(waits), 2) if waits else None,
            "verdicts": sorted({r.status()[0] for r in results}),
            "loadavg_1min": round(os.getloadavg()[0], 2)}


def to_markdown(rows: list[dict[str, Any]], record: dict[str, Any], sleep: float) -> str:
    """The runs as a table, under the command that made them."""
    lines = ["# Workers drawing their own cases against the driver drawing them", "",
             f"`{record['command']}` on {record['machine']} ({record['cpus']} CPUs), "
             f"{record['date']}, commit {record['commit']}. Each case: NumPy's result, then "
             f"{sleep:g} s of sleep (a device's time).", "",
             "| workers | cases drawn by | cases | judged s | cases/s | driver drawing s while "
             "judging | workers' mean wait s | load (1 min) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['jobs']} | {'each worker' if r['own_draws'] else 'the driver'} | "
                     f"{r['cases']} | {r['judge_s']} | {r['cases_per_s']} | "
                     f"{r['driver_draw_judging_s']} | {r['mean_wait_s']} | "
                     f"{r['loadavg_1min']} |")
    return "\n".join(lines) + "\n"


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``pool_draws`` to the harness's subcommands."""
    p = sub.add_parser("pool_draws", help="cases judged by 1, 2, 4 workers with the driver "
                                          "drawing against each worker drawing its own")
    p.add_argument("--jobs", default="1,2,4", help="comma-separated worker counts")
    p.add_argument("--budget", type=float, default=20.0)
    p.add_argument("--sleep", type=float, default=0.05,
                   help="seconds each case sleeps after computing (default 0.05)")
    p.add_argument("--rows-per-op", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu/own_draws"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Every worker count, the driver drawing then each worker drawing; writes
    pool_draws.json and pool_draws.md after every run."""
    record = meta(args.argv)
    rows: list[dict[str, Any]] = []
    for jobs in (int(j) for j in args.jobs.split(",") if j):
        for own in (False, True):
            rows.append(one_run(jobs, own, args.budget, args.sleep, args.rows_per_op,
                                args.out / "store"))
            print(rows[-1], flush=True)
            write_json(args.out / "pool_draws.json", {"meta": record, "rows": rows})
            write_text(args.out / "pool_draws.md", to_markdown(rows, record, args.sleep))
    return 0
