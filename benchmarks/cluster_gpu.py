"""The cluster path on a machine with several GPUs: the scaling from one GPU to
all of them, then a soundness sweep over the GPU targets.

    python3 benchmarks/cluster_gpu.py --out DIR [--scaling-seconds 45]
        [--sweep-seconds 330] [--ops linear,matmul] [--gpus-per-task 0.25]

Part 1 (``DIR/scaling.json``): the GPU targets of ``--ops`` through
:func:`numoracle.running.cluster.run_cluster` for ``--scaling-seconds`` each on a
local Ray instance that sees one GPU, then every GPU (same CPUs, same seed,
same blocks); cases/s of each and the ratio.

Part 2 (``DIR/sweep/report.json``, ``DIR/sweep.json``): every GPU target of
``--ops`` on every GPU, blocks of 500 cases, as many as ``--sweep-seconds``
allows; the cases judged, the failures (each with its repro under
``DIR/sweep/repros``) and the blocks not judged.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import ray
import torch

from numoracle.checking.report import write_json
from numoracle.kernels import all_targets
from numoracle.running.cluster import needs_gpu, run_cluster


def gpu_targets(ops: list[str]) -> list[Any]:
    return [t for t in all_targets() if needs_gpu(t) and t.op in ops]


def timed(targets: list[Any], gpus: int, seconds: float, gpus_per_task: float, seed: int,
          store: Path) -> dict[str, Any]:
    ray.init(num_cpus=os.cpu_count(), num_gpus=gpus, include_dashboard=False,
             logging_level="warning")
    try:
        run_cluster(targets, examples=100, block_size=50, seed=seed + 1, store=store,
                    gpus_per_task=gpus_per_task, budget=30)  # workers started, kernels built
        run = run_cluster(targets, examples=10**6, block_size=200, seed=seed, store=store,
                          gpus_per_task=gpus_per_task, budget=seconds)
    finally:
        ray.shutdown()
    rows = run.rows()
    return {"gpus": gpus, "gpus_per_task": gpus_per_task, "seconds": run.seconds,
            "cases": run.cases(), "cases_per_s": run.cases() / run.seconds,
            "failures": sum(r["failures"] for r in rows),
            "unjudged": sum(r["verdict"] == "unjudged" for r in rows), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--ops", default="linear,matmul")
    ap.add_argument("--scaling-seconds", type=float, default=45.0)
    ap.add_argument("--sweep-seconds", type=float, default=330.0)
    ap.add_argument("--gpus-per-task", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    n_gpus = torch.cuda.device_count()
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(), "gpus": n_gpus,
               "gpu": torch.cuda.get_device_name(0) if n_gpus else None,
               "ray": ray.__version__, "torch": torch.__version__}
    targets = gpu_targets(args.ops.split(","))
    names = sorted({f"{t.name}/{t.op}" for t in targets})
    print("targets:", names, flush=True)
    if args.scaling_seconds > 0 and n_gpus >= 2:
        runs = [timed(targets, g, args.scaling_seconds, args.gpus_per_task, args.seed,
                      args.out / "scaling_repros") for g in (1, n_gpus)]
        one, all_ = runs[0]["cases_per_s"], runs[-1]["cases_per_s"]
        scaling = {"machine": machine, "targets": names, "runs": runs,
                   "scaling_factor": all_ / one}
        (args.out / "scaling.json").write_text(json.dumps(scaling, indent=2) + "\n")
        print(json.dumps({k: v for k, v in scaling.items() if k != "runs"}), flush=True)
        for r in runs:
            print({k: v for k, v in r.items() if k != "rows"}, flush=True)
    if args.sweep_seconds > 0:
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level="warning")
        t0 = time.perf_counter()
        try:
            run = run_cluster(targets, examples=10**6, block_size=500, seed=args.seed + 7,
                              store=args.out / "sweep" / "repros",
                              gpus_per_task=args.gpus_per_task, budget=args.sweep_seconds)
        finally:
            ray.shutdown()
        rows = run.rows()
        write_json(args.out / "sweep" / "report.json", rows)
        summary = {"machine": machine, "seconds": time.perf_counter() - t0,
                   "cases": run.cases(), "cases_per_s": run.cases() / run.seconds,
                   "blocks": len(run.outcomes), "hosts": sorted(run.hosts()),
                   "failures": {f"{r['target']}/{r['op']}": r["diagnosis"] for r in rows
                                if r["verdict"] == "FAIL"},
                   "unjudged": [r for r in rows if r["verdict"] == "unjudged"],
                   "worst_ratio": max((r["worst_ratio"] for r in rows
                                       if r["verdict"] == "pass"), default=None)}
        write_json(args.out / "sweep.json", [summary])
        print(json.dumps({k: v for k, v in summary.items() if k != "unjudged"}, default=str),
              flush=True)


if __name__ == "__main__":
    main()
