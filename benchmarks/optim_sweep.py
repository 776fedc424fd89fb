"""Optimizer and training-step sweep: false alarms on correct kernels, steps at which mutants fail.

Phase 1 runs the kernels (torch.optim for/foreach/fused, the torch MLP step,
the CuPy two-phase trainer; NumPy/torch CPU where no GPU is) on random
trajectories of up to 50 steps, batch 1-2048, recording every step's outputs.
Phase 2 judges them with the teacher-forced checks of :mod:`numoracle.trajectory.steps`
in a pool of processes (the kernels ran on their own outputs, so the
recorded steps are what a teacher-forced run hands the oracle).

Usage: ``python benchmarks/optim_sweep.py OUT_DIR [--optim N] [--mlp N] [--budget S]
[--impls for,foreach,fused]``; writes ``OUT_DIR/optim_sweep.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np



def _gpu() -> bool:
    try:
        from numoracle.kernels import get_backend

        return get_backend("cupy").available() is None
    except Exception:  # noqa: BLE001
        return False


def _cfg(rng: np.random.Generator) -> Any:
    from numoracle.oracle.optim_math import OptimConfig

    opt = str(rng.choice(["sgd", "adam", "adamw"]))
    lr = float(rng.choice([0.1, 0.01, 0.001]))
    wd = float(rng.choice([0.0, 0.01]))
    if opt == "sgd":
        mom = float(rng.choice([0.0, 0.9]))
        damp = float(rng.choice([0.0, 0.1])) if mom else 0.0
        nest = bool(rng.integers(2)) if mom and not damp else False
        return OptimConfig("sgd", lr=lr, momentum=mom, dampening=damp, nesterov=nest,
                           weight_decay=wd)
    return OptimConfig(opt, lr=lr, weight_decay=wd, eps=float(rng.choice([1e-8, 1e-3])),
                       amsgrad=bool(rng.integers(2)))


def _mlp_data(rng: np.random.Generator, steps: int, batch: int) -> dict[str, Any]:
    from numoracle.trajectory import mlp_problem

    sizes = (int(rng.integers(1, 17)), int(rng.integers(1, 13)),
             int(rng.integers(1, 13)), int(rng.integers(2, 7)))
    params, xs, labels = mlp_problem(rng, sizes, steps, batch)
    return {"params": params, "xs": xs, "labels": labels}


def _record_mlp(step: Any, data: dict[str, Any]) -> list[dict[str, np.ndarray]]:
    from numoracle.oracle.mlp import PARAMS

    cur: dict[str, Any] = dict(data["params"])
    rec = []
    for k, (x, lab) in enumerate(zip(data["xs"], data["labels"], strict=True)):
        out = {n: np.asarray(v) for n, v in step(
            {p: cur[p] for p in PARAMS}, {n: v for n, v in cur.items() if "." in n}, x, lab,
            k + 1).items()}
        rec.append(out)
        cur = {n: v for n, v in out.items() if n in PARAMS or "." in n}
    return rec


def _record_optim(step: Any, p0: np.ndarray, grads: np.ndarray, names: tuple[str, ...]
                  ) -> list[dict[str, np.ndarray]]:
    cur = {"param": p0}
    rec = []
    for k in range(len(grads)):
        out = step(cur["param"], grads[k], {n: cur[n] for n in names if n in cur}, k + 1)
        rec.append({n: np.asarray(v) for n, v in out.items()})
        cur = rec[-1]
    return rec


def _judge(job: dict[str, Any]) -> dict[str, Any]:
    """Teacher-forced check of one recorded trajectory (runs in a worker)."""
    from numoracle.trajectory import check_mlp_trajectory, check_optimizer_trajectory

    rec = job["record"]

    def replay(*args: Any) -> dict[str, np.ndarray]:
        return rec[args[-1] - 1]

    t0 = time.perf_counter()
    free = job["steps"] <= 20
    if job["kind"] == "optim":
        v = check_optimizer_trajectory(replay, job["cfg"], job["p0"], job["grads"],
                                       free_running=free)
    else:
        d = job["data"]
        v = check_mlp_trajectory(replay, job["cfg"], d["params"], d["xs"], d["labels"],
                                 free_running=free)
    ff = v.first_failure
    return {"target": job["target"], "kind": job["kind"], "mutant": job.get("mutant"),
            "optimizer": job["cfg"].optimizer, "cfg": repr(job["cfg"]), "steps": job["steps"],
            "batch": job.get("batch"), "passed": v.passed, "worst_ratio": v.worst_ratio,
            "first_step": ff.step if ff else None, "first_tensor": ff.tensor if ff else None,
            "diagnosis": ff.diagnosis if ff else None,
            "drift": None if v.drift is None else str(v.drift),
            "drift_ratio": None if v.drift is None else getattr(v.drift, "ratio", None),
            "judge_s": round(time.perf_counter() - t0, 3)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--optim", type=int, default=600)
    ap.add_argument("--mlp", type=int, default=500)
    ap.add_argument("--mutant-trials", type=int, default=12)
    ap.add_argument("--budget", type=float, default=200.0)
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--no-rows", action="store_true",
                    help="write the summary and the failing rows only (a small file)")
    ap.add_argument("--impls", default="for,foreach,fused",
                    help="torch.optim implementations, comma-separated (for, foreach, fused)")
    a = ap.parse_args()
    from numoracle.zoo.optim import STEP_MUTANTS

    from numoracle.kernels.optim_targets import numpy_mlp_step, torch_mlp_step, torch_optimizer_step

    gpu = _gpu()
    dev = "cuda" if gpu else "cpu"
    rng = np.random.default_rng(20240611)
    jobs: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    impls = tuple(i for i in a.impls.split(",") if i)
    if not impls or set(impls) - {"for", "foreach", "fused"}:
        ap.error(f"--impls={a.impls!r}: give some of for, foreach, fused, e.g. --impls for,foreach")
    for i in range(a.optim):
        if time.perf_counter() - t0 > a.budget / 2:
            break
        cfg, impl = _cfg(rng), impls[i % len(impls)]
        steps, numel = int(rng.integers(1, 51)), int(rng.integers(1, 513))
        p0 = rng.standard_normal(numel).astype(np.float32)
        scale = float(10.0 ** rng.uniform(-4, 1))
        grads = (scale * rng.standard_normal((steps, numel))).astype(np.float32)
        rec = _record_optim(torch_optimizer_step(cfg, dev, impl), p0, grads,
                            cfg.state_names)
        jobs.append({"kind": "optim", "target": f"torch-{dev}-{impl}", "cfg": cfg, "p0": p0,
                     "grads": grads, "steps": steps, "record": rec})
    mlp_makers: list[tuple[str, Any]] = [(f"torch-{dev}", lambda c: torch_mlp_step(c, dev))]
    if gpu:
        from numoracle.kernels.cupy_mlp import cupy_mlp_step

        mlp_makers.append(("cupy", cupy_mlp_step))
    else:
        mlp_makers.append(("numpy", numpy_mlp_step))
    for i in range(a.mlp):
        if time.perf_counter() - t0 > a.budget:
            break
        cfg = _cfg(rng)
        steps = int(rng.integers(1, 51)) if i % 4 == 0 else int(rng.integers(1, 11))
        batch = int(round(2 ** rng.uniform(0, 11)))
        name, make = mlp_makers[i % len(mlp_makers)]
        data = _mlp_data(rng, steps, batch)
        jobs.append({"kind": "mlp", "target": name, "cfg": cfg, "data": data, "steps": steps,
                     "batch": batch, "record": _record_mlp(make(cfg), data)})
    n_correct = len(jobs)
    # mutants: each on the kernel of the design, several random problems
    mutant_maker = cupy_mlp_step if gpu else numpy_mlp_step
    for name, (cfg, bug, _expect) in STEP_MUTANTS.items():
        for _ in range(a.mutant_trials):
            steps, batch = int(rng.integers(2, 6)), int(round(2 ** rng.uniform(1, 11)))
            data = _mlp_data(rng, steps, batch)
            jobs.append({"kind": "mlp", "target": "cupy" if gpu else "numpy", "mutant": name,
                         "cfg": cfg, "data": data, "steps": steps, "batch": batch,
                         "record": _record_mlp(mutant_maker(cfg, (bug,)), data)})
    t_run = time.perf_counter() - t0
    with ProcessPoolExecutor(a.workers) as pool:
        rows = list(pool.map(_judge, jobs, chunksize=4))
    t_judge = time.perf_counter() - t0 - t_run
    correct = rows[:n_correct]
    by_target: dict[str, dict[str, Any]] = {}
    for r in correct:
        s = by_target.setdefault(r["target"], {"trajectories": 0, "false_alarms": 0,
                                               "steps": 0, "worst_ratio": 0.0,
                                               "max_batch": 0})
        s["trajectories"] += 1
        s["steps"] += r["steps"]
        s["false_alarms"] += int(not r["passed"])
        s["worst_ratio"] = max(s["worst_ratio"], r["worst_ratio"])
        s["max_batch"] = max(s["max_batch"], r["batch"] or 0)
    mutants: dict[str, dict[str, Any]] = {}
    for r in rows[n_correct:]:
        m = mutants.setdefault(r["mutant"], {"trials": 0, "caught": 0, "first_steps": [],
                                             "tensors": [], "expected_step":
                                             STEP_MUTANTS[r["mutant"]][2]})
        m["trials"] += 1
        m["caught"] += int(not r["passed"])
        m["first_steps"].append(r["first_step"])
        m["tensors"].append(r["first_tensor"])
    summary = {"device": "gpu" if gpu else "cpu", "impls": list(impls),
               "correct_trajectories": n_correct,
               "false_alarms": sum(not r["passed"] for r in correct), "by_target": by_target,
               "mutants": mutants, "run_s": round(t_run, 1), "judge_s": round(t_judge, 1),
               "false_alarm_rows": [r for r in correct if not r["passed"]][:20]}
    a.out.mkdir(parents=True, exist_ok=True)
    kept = [r for r in rows if not r["passed"]] if a.no_rows else rows
    (a.out / "optim_sweep.json").write_text(json.dumps({"summary": summary, "rows": kept},
                                                        indent=1, default=str))
    print(json.dumps(summary, indent=1, default=str)[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
