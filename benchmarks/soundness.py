"""Soundness and sharpness sweep: many cases per correct target, zero false alarms
expected; err/bound statistics by reduction length under both bounds.

    python benchmarks/soundness.py [--examples 2000] [--targets a,b] [--jobs N]
                                   [--max-reduction 65536] [--out DIR]

Each (target, op) runs in its own process (spawned: CUDA does not survive a
fork). Writes ``DIR/soundness.json`` (one row per target and op: cases,
failures, worst ratios, and per reduction-length bucket the median and max of
err/bound under the deterministic and the probabilistic bound) and
``DIR/soundness.md`` (the same as tables).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np


def bucket(n: int) -> str:
    """Reduction lengths grouped by powers of four: '1', '2-4', '5-16', ..."""
    if n <= 1:
        return "1"
    k = math.ceil(math.log(n, 4))
    lo = 4 ** (k - 1) + 1 if k > 1 else 2
    return f"{lo}-{4 ** k}"


def _alarm(res: Any) -> dict[str, Any]:
    return {"diagnosis": res.diagnosis, "repro": res.repro, "repro_shape": res.repro_shape,
            "after_cases": res.cases_to_catch}


def sweep_one(name: str, op: str, examples: int, seed: int, max_reduction: int,
              max_elements: int, store: str) -> dict[str, Any]:
    from numoracle.kernels import get_target
    from numoracle.running.runner import default_strategy, run_target

    target = get_target(name, op)
    reason = target.unavailable_reason()
    if reason:
        return {"target": name, "op": op, "skipped": reason}
    limit = min(max_reduction, target.max_reduction or max_reduction)
    strat = default_strategy(target, max_reduction=limit, max_elements=max_elements)
    t0 = time.perf_counter()
    # keep going after an alarm (with a new seed) until `examples` cases ran:
    # every alarm is counted and kept; the first one is shrunk
    res = run_target(target, examples=examples, seed=seed, strategy=strat, store=store)
    alarms = [] if res.verdict == "pass" else [_alarm(res)]
    round_ = 1
    while res.verdict == "FAIL" and res.cases < examples and round_ < 50:
        more = run_target(target, examples=examples - res.cases, seed=seed + round_,
                          strategy=strat, store=store, shrink=False)
        res.cases += more.cases
        res.samples += more.samples
        if more.verdict == "FAIL":
            alarms.append(_alarm(more))
        elif more.verdict != "pass":
            break
        res.verdict = "FAIL" if more.verdict == "FAIL" else res.verdict
        round_ += 1
    res.failures = len(alarms)
    buckets: dict[str, dict[str, list[float]]] = {}
    for out, n, wd, wp, md, mpb, exact in res.samples:
        if exact:
            continue  # exact-regime outputs have bound 0: counted apart
        b = buckets.setdefault(bucket(n), {"det": [], "prob": []})
        b["det"].append(wd)
        b["prob"].append(wp)
    exact_outputs = sum(1 for s in res.samples if s[6])
    stats = {
        k: {"outputs": len(v["det"]),
            "median_det": float(np.median(v["det"])), "max_det": float(np.max(v["det"])),
            "median_prob": float(np.median(v["prob"])), "max_prob": float(np.max(v["prob"]))}
        for k, v in sorted(buckets.items(), key=lambda kv: int(kv[0].split("-")[-1]))
    }
    row = res.row()
    row.update(seconds=time.perf_counter() - t0, by_reduction=stats, alarms=alarms,
               exact_regime_outputs=exact_outputs, model=target.precision.describe(),
               max_reduction=limit, message=res.message)
    return row


def to_markdown(rows: list[dict[str, Any]], header: str) -> str:
    lines = [header, "", "| target | op | model | cases | alarms | worst det | worst prob |"
             " exact-regime outputs | time s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['target']} | {r['op']} | skipped: {r['skipped']} | | | | | | |")
            continue
        wd = max((b["max_det"] for b in r["by_reduction"].values()), default=0.0)
        wp = max((b["max_prob"] for b in r["by_reduction"].values()), default=0.0)
        lines.append(f"| {r['target']} | {r['op']} | {r['model']} | {r['cases']} | "
                     f"{r['failures']} | {wd:.3g} | {wp:.3g} | {r['exact_regime_outputs']} | "
                     f"{r['seconds']:.0f} |")
    alarm_rows = [(r, a) for r in rows for a in r.get("alarms", [])]
    if alarm_rows:
        lines += ["", "Alarms (each one a case outside the bound; see the findings):", ""]
        lines += [f"- {r['target']} / {r['op']} after {a['after_cases']} cases, "
                  f"{a['repro_shape']}: {a['diagnosis']}" for r, a in alarm_rows]
    lines += ["", "err/bound by reduction length (outputs outside the exact regime; worst"
              " ratio of each output, over the cases that passed):", ""]
    for r in rows:
        if "skipped" in r:
            continue
        lines += [f"**{r['target']} / {r['op']}**", "",
                  "| n | outputs | median det | max det | median prob | max prob |",
                  "|---|---|---|---|---|---|"]
        for k, b in r["by_reduction"].items():
            lines.append(f"| {k} | {b['outputs']} | {b['median_det']:.3g} | {b['max_det']:.3g} |"
                         f" {b['median_prob']:.3g} | {b['max_prob']:.3g} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=2000)
    ap.add_argument("--targets", default="", help="comma-separated names (default: all)")
    ap.add_argument("--ops", default="", help="comma-separated ops (default: all)")
    ap.add_argument("--jobs", type=int, default=max(1, (mp.cpu_count() or 2) - 1))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-reduction", type=int, default=1 << 16)
    ap.add_argument("--max-elements", type=int, default=1 << 18)
    ap.add_argument("--out", default="benchmarks/results")
    a = ap.parse_args()
    from numoracle.kernels import all_targets

    wanted = [t for t in all_targets()
              if (not a.targets or t.name in a.targets.split(","))
              and (not a.ops or t.op in a.ops.split(","))]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread per worker process
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=a.jobs, mp_context=ctx) as pool:
        futs = {pool.submit(sweep_one, t.name, t.op, a.examples, a.seed, a.max_reduction,
                            a.max_elements, str(out / "repros")): t for t in wanted}
        for f in as_completed(futs):
            t = futs[f]
            try:
                r = f.result()
            except Exception as exc:  # a crashed sweep is reported, not lost
                r = {"target": t.name, "op": t.op, "skipped": f"sweep crashed: {exc!r}"}
            rows.append(r)
            print(f"{r['target']:>18} {r['op']:<7} " + (
                f"skipped ({r['skipped']})" if "skipped" in r else
                f"{r['cases']} cases, {r['failures']} alarms, worst ratio "
                f"{r['worst_ratio']:.3g}, {r['seconds']:.0f} s"), flush=True)
    rows.sort(key=lambda r: (r["op"], r["target"]))
    meta = {"command": "python benchmarks/soundness.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items() if v != ""),
            "machine": platform.platform(), "examples": a.examples}
    try:
        import torch

        if torch.cuda.is_available():
            meta["gpu"] = torch.cuda.get_device_name(0)
            meta["torch"] = torch.__version__
    except ImportError:
        pass
    (out / "soundness.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    (out / "soundness.md").write_text(to_markdown(rows, f"# Soundness sweep\n\n{json.dumps(meta)}"))


if __name__ == "__main__":
    main()
