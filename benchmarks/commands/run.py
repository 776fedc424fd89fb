"""``run``: ``numoracle run`` measured: rows judged and unjudged, cases per row,
cases judged per minute at each ``--jobs``, warm-up and reporting time; and
``report.html`` written for a run of many rows.

    python -m benchmarks run --out DIR [--jobs 1,auto] [--budget 60] [-- RUN-ARGS ...]
    python -m benchmarks run --out DIR --report-rows 100 --report-cases 2000 --jobs none

For each ``--jobs`` value (``auto``: the command's default) it runs ``numoracle
run --budget B --report DIR/j<J>`` in a fresh process (extra arguments after
``--`` are passed on) and records its ``run.json`` (warm-up, judging and
reporting seconds, rows by status, cases per judged row, cases per minute),
the wall time of the process against the budget, and its exit status. With
``--report-rows``, it also times :func:`numoracle.reports.write_html` on that
many synthetic passing rows of ``--report-cases`` cases each (four outputs a
case, reduction lengths 2 to 2**20, one case in ten in the exact regime).
Everything goes to ``DIR/run.json`` with the command, machine and commit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.record import meta, write_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``run`` to the harness's subcommands."""
    ap = sub.add_parser("run", help="numoracle run measured: cases per minute per --jobs, "
                                    "rows judged, warm-up, report time")
    ap.add_argument("--out", type=Path, required=True, help="folder for the results")
    ap.add_argument("--jobs", default="1,auto",
                    help="comma-separated --jobs values to run (auto: the default; none: "
                         "no run)")
    ap.add_argument("--budget", type=float, default=60.0, help="--budget of each run")
    ap.add_argument("--report-rows", type=int, default=0,
                    help="also time report.html for this many synthetic rows")
    ap.add_argument("--report-cases", type=int, default=2000,
                    help="cases per synthetic row")
    ap.add_argument("rest", nargs=argparse.REMAINDER,
                    help="arguments after -- go to numoracle run")
    ap.set_defaults(func=run)


def _one_run(jobs: str, budget: float, folder: Path, rest: list[str]) -> dict[str, Any]:
    argv = [sys.executable, "-m", "numoracle", "run", "--budget", f"{budget:g}",
            "--report", str(folder), "--store", str(folder / "repros"), *rest]
    if jobs != "auto":
        argv += ["--jobs", jobs]
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    (folder / "stdout.txt").parent.mkdir(parents=True, exist_ok=True)
    (folder / "stdout.txt").write_text(done.stdout + done.stderr)
    summary = folder / "run.json"
    out: dict[str, Any] = {"jobs": jobs, "argv": argv[1:], "exit": done.returncode,
                           "process_wall_s": round(wall, 2), "budget_s": budget,
                           "load_1min_after": round(os.getloadavg()[0], 2)}
    if summary.is_file():
        out["run"] = json.loads(summary.read_text())
    tail = [line for line in done.stdout.splitlines() if line.startswith(("rows:", "warm-up"))]
    out["lines"] = tail
    return out


def synthetic_rows(rows: int, cases: int, seed: int = 0) -> list[Any]:
    """``rows`` passing results of ``cases`` cases each, four outputs a case."""
    import numpy as np  # noqa: PLC0415

    from numoracle.running.runner import TargetResult  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    out = []
    for i in range(rows):
        r = TargetResult(f"target-{i % 25}", ("linear", "matmul", "conv2d", "kan", "optim",
                                               "kan_chain", "logic_ca", "mlp_train",
                                               "logic_layer")[i % 9],
                         "fp32", cases=cases, asked=cases, seconds=1.0)
        for _ in range(cases):
            n = int(2 ** rng.uniform(1, 20))
            exact = bool(rng.random() < 0.1)
            for name in ("y", "grad_input", "grad_weight", "grad_bias"):
                w = 0.0 if exact else float(10 ** rng.uniform(-6, -0.1))
                r.samples.append((name, n, w, w * 3, w / 4, w, exact))
        r.worst_ratio = max(s[2] for s in r.samples)
        out.append(r)
    out[0].per_model = {"y": {"fp32": 0.5, "tf32": 0.01, "bf16": 0.001}}
    return out


def _report_speed(rows: int, cases: int) -> dict[str, Any]:
    from numoracle.reports import write_html  # noqa: PLC0415

    res = synthetic_rows(rows, cases)
    with tempfile.TemporaryDirectory() as d:
        w0, c0 = time.perf_counter(), time.process_time()
        page = write_html(Path(d) / "report.html", res)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        size = page.stat().st_size
    return {"rows": rows, "cases_per_row": cases, "samples": sum(len(r.samples) for r in res),
            "ops": len({r.op for r in res}), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "bytes": size, "load_1min": round(os.getloadavg()[0], 2)}


def run(a: argparse.Namespace) -> int:
    """Run the measurements ``a`` describes and record them under ``a.out``."""
    rest = [x for x in a.rest if x != "--"]
    record: dict[str, Any] = meta(getattr(a, "argv", []))
    record["runs"] = []
    for jobs in [j.strip() for j in a.jobs.split(",") if j.strip() and j.strip() != "none"]:
        got = _one_run(jobs, a.budget, a.out / f"j{jobs}", rest)
        record["runs"].append(got)
        print(json.dumps({k: got[k] for k in ("jobs", "exit", "process_wall_s")}
                         | {"lines": got["lines"]}))
    if a.report_rows:
        record["report_html"] = _report_speed(a.report_rows, a.report_cases)
        print(json.dumps(record["report_html"]))
    write_json(a.out / "run.json", record)
    return 0
