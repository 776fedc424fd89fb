"""Cases/s of a CPU sweep through the Ray cluster path, against a local
single-process ``numoracle run`` and against pytest-xdist, on the same machine.

    python benchmarks/cluster_bench.py [--examples 400] [--block-size 100]
        [--workers 2] [--repeats 2] [--out DIR]

The sweep: numpy-fp32 and torch-cpu-fp32 on linear and matmul, ``--examples``
cases each (the default strategies, seed 0). Four ways, interleaved per repeat:

- ``local``: ``numoracle run`` in one process (one core), as a user runs it;
- ``cluster_cli``: ``numoracle run --cluster local`` (Ray started by the
  command, ``--workers`` CPUs: start-up included);
- ``cluster_warm``: :func:`numoracle.running.cluster.run_cluster` on a Ray
  instance started (and its workers warmed) beforehand: the steady state;
- ``xdist``: the same seed blocks as pytest tests, one test per block, run by
  ``pytest -n WORKERS``.

Wall-clock seconds of each (the whole command for ``local``, ``cluster_cli``
and ``xdist``), cases judged, cases/s; ``DIR/cluster_bench.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import ray

from numoracle.kernels import get_target
from numoracle.running.cluster import run_cluster

TARGETS = "numpy-fp32,torch-cpu-fp32"
OPS = "linear,matmul"


def _report_cases(report: Path) -> int:
    return sum(r["cases"] for r in json.loads(report.read_text()))


def run_cli(examples: int, workers: int, block: int, cluster: bool, tmp: Path) -> dict[str, Any]:
    rep = tmp / ("cli_cluster" if cluster else "cli_local")
    cmd = ["numoracle", "run", "--targets", TARGETS, "--ops", OPS, "--examples", str(examples),
           "--budget", "100000", "--report", str(rep), "--store", str(tmp / "store")]
    if cluster:
        cmd += ["--cluster", "local", "--block-size", str(block)]
    env = dict(os.environ, COLUMNS="140")
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    row = {"mode": "cluster_cli" if cluster else "local", "seconds": wall, "rc": done.returncode,
           "cases": _report_cases(rep / "report.json"), "command": " ".join(cmd)}
    if done.returncode != 0:  # kept, with what it said: a failure is a finding, not noise
        row["output_tail"] = (done.stdout + done.stderr)[-3000:]
    return row


def run_warm(examples: int, block: int) -> dict[str, Any]:
    targets = [get_target(n, op) for n in TARGETS.split(",") for op in OPS.split(",")]
    t0 = time.perf_counter()
    run = run_cluster(targets, examples=examples, block_size=block, seed=0, store=None)
    wall = time.perf_counter() - t0
    assert all(r.verdict == "pass" for r in run.results), run.rows()
    return {"mode": "cluster_warm", "seconds": wall, "cases": run.cases(),
            "command": f"run_cluster(4 target-ops, examples={examples}, block_size={block}) "
                       "on a running Ray instance"}


_XDIST_TEST = '''
import json, os
import pytest
from numoracle.kernels import get_target
from numoracle.running.cluster import plan_blocks, same_draws_everywhere
from numoracle.running.runner import run_target

TARGETS = [get_target(n, op) for n in {targets!r}.split(",") for op in {ops!r}.split(",")]
BLOCKS = plan_blocks(TARGETS, {examples}, 0, {block})


@pytest.mark.parametrize("b", BLOCKS, ids=lambda b: f"{{b.target}}-{{b.op}}-{{b.index}}")
def test_block(b):
    t = next(t for t in TARGETS if (t.name, t.op) == (b.target, b.op))
    with same_draws_everywhere():
        res = run_target(t, examples=b.examples, seed=b.seed, store=None)
    assert res.verdict == "pass"
    with open(os.path.join({out!r}, f"cases-{{os.getpid()}}.jsonl"), "a") as f:
        f.write(json.dumps(res.cases) + "\\n")
'''


def run_xdist(examples: int, workers: int, block: int, tmp: Path) -> dict[str, Any]:
    d = tmp / "xdist"
    d.mkdir(exist_ok=True)
    for f in d.glob("cases-*.jsonl"):
        f.unlink()
    (d / "pytest.ini").write_text("[pytest]\n")
    (d / "test_sweep.py").write_text(textwrap.dedent(_XDIST_TEST.format(
        targets=TARGETS, ops=OPS, examples=examples, block=block, out=str(d))))
    cmd = [sys.executable, "-m", "pytest", "-n", str(workers), "-q", "-p", "no:randomly",
           "-p", "no:cacheprovider", "test_sweep.py"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    cases = sum(int(line) for f in d.glob("cases-*.jsonl") for line in f.read_text().split())
    row = {"mode": "xdist", "seconds": wall, "cases": cases, "rc": done.returncode,
           "command": f"(cd {d} && {' '.join(cmd)})"}
    if done.returncode != 0:
        row["output_tail"] = (done.stdout + done.stderr)[-3000:]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=400)
    ap.add_argument("--block-size", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu/cluster"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    load = [os.getloadavg()]
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        for rep in range(args.repeats):
            for mode in ("local", "cluster_cli", "xdist", "cluster_warm"):
                if mode == "local":
                    row = run_cli(args.examples, args.workers, args.block_size, False, tmp)
                elif mode == "cluster_cli":
                    row = run_cli(args.examples, args.workers, args.block_size, True, tmp)
                elif mode == "xdist":
                    row = run_xdist(args.examples, args.workers, args.block_size, tmp)
                else:
                    ray.init(num_cpus=args.workers, include_dashboard=False,
                             object_store_memory=128 * 2**20, logging_level="warning")
                    run_warm(args.block_size, args.block_size)  # start and warm the workers
                    row = run_warm(args.examples, args.block_size)
                    ray.shutdown()
                row.update(repeat=rep, cases_per_s=row["cases"] / row["seconds"],
                           loadavg_1m=os.getloadavg()[0])
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "command"}), flush=True)
                (args.out / "cluster_bench.rows.json").write_text(json.dumps(rows, indent=2))
    load.append(os.getloadavg())
    summary = {}
    for mode in ("local", "cluster_cli", "cluster_warm", "xdist"):
        rates = [r["cases_per_s"] for r in rows if r["mode"] == mode]
        summary[mode] = {"median_cases_per_s": statistics.median(rates), "runs": rates}
    base = summary["local"]["median_cases_per_s"]
    for s in summary.values():
        s["speedup_vs_local"] = s["median_cases_per_s"] / base
    result = {
        "command": "python " + " ".join(sys.argv),
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "cpus": os.cpu_count(), "python": platform.python_version(),
                    "ray": ray.__version__, "loadavg_start_end": load},
        "sweep": {"targets": TARGETS, "ops": OPS, "examples_per_target_op": args.examples,
                  "block_size": args.block_size, "workers": args.workers},
        "summary": summary, "rows": rows,
    }
    path = args.out / "cluster_bench.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    print(f"written: {path}")


if __name__ == "__main__":
    main()
