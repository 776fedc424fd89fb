"""Soundness and sharpness sweep: many cases per correct target, zero false alarms
expected; err/bound statistics by reduction length under both bounds.

    python benchmarks/soundness.py [--examples 2000] [--targets a,b] [--jobs N]
                                   [--max-reduction 65536] [--out DIR] [--regime realistic]
                                   [--limits 256,1024,default,262144]
                                   [--backends numpy,torch-cpu] [--seconds S]

With ``--limits`` every (target, op) runs once per size limit (``max_elements``
of the case strategy; ``default`` is the strategy's own default): soundness
must not depend on the limits, since small limits draw shapes (one sample, one
feature) and value meetings (a subnormal gradient beside a huge scale) that
large ones rarely do. Every value family is drawn, ``special`` included.
``--seconds`` caps each run's time (a run then reports the cases it reached).

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
              max_elements: int | None, store: str,
              seconds: float | None = None, regime: str = "small") -> dict[str, Any]:
    from numoracle.kernels import get_target
    from numoracle.running.runner import default_strategy, run_target

    target = get_target(name, op)
    reason = target.unavailable_reason()
    if reason:
        return {"target": name, "op": op, "skipped": reason}
    limit = min(max_reduction, target.max_reduction or max_reduction)
    sizes = {} if max_elements is None else {"max_elements": max_elements}
    strat = default_strategy(target, max_reduction=limit, regime=regime, **sizes)
    t0 = time.perf_counter()

    def left() -> float | None:
        return None if seconds is None else max(0.0, seconds - (time.perf_counter() - t0))
    # keep going after an alarm (with a new seed) until `examples` cases ran:
    # every alarm is counted and kept; the first one is shrunk
    res = run_target(target, examples=examples, seed=seed, strategy=strat, store=store,
                     seconds=seconds)
    alarms = [] if res.verdict == "pass" else [_alarm(res)]
    round_ = 1
    while res.verdict == "FAIL" and res.cases < examples and round_ < 50 \
            and (seconds is None or left()):
        more = run_target(target, examples=examples - res.cases, seed=seed + round_,
                          strategy=strat, store=store, shrink=False, seconds=left())
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
               max_reduction=limit, message=res.message, regime=regime,
               max_elements="default" if max_elements is None else max_elements)
    return row


def to_markdown(rows: list[dict[str, Any]], header: str) -> str:
    lines = [header, "", "| target | op | max elements | model | cases | alarms | worst det |"
             " worst prob | exact-regime outputs | time s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lim = r.get("max_elements", "")
        if "skipped" in r:
            lines.append(f"| {r['target']} | {r['op']} | {lim} | skipped: {r['skipped']} |"
                         " | | | | | |")
            continue
        wd = max((b["max_det"] for b in r["by_reduction"].values()), default=0.0)
        wp = max((b["max_prob"] for b in r["by_reduction"].values()), default=0.0)
        lines.append(f"| {r['target']} | {r['op']} | {lim} | {r['model']} | {r['cases']} | "
                     f"{r['failures']} | {wd:.3g} | {wp:.3g} | {r['exact_regime_outputs']} | "
                     f"{r['seconds']:.0f} |")
    alarm_rows = [(r, a) for r in rows for a in r.get("alarms", [])]
    if alarm_rows:
        lines += ["", "Alarms (each one a case outside the bound; see the findings):", ""]
        lines += [f"- {r['target']} / {r['op']} (max elements {r.get('max_elements', '')}) "
                  f"after {a['after_cases']} cases, "
                  f"{a['repro_shape']}: {a['diagnosis']}" for r, a in alarm_rows]
    lines += ["", "err/bound by reduction length (outputs outside the exact regime; worst"
              " ratio of each output, over the cases that passed):", ""]
    for r in rows:
        if "skipped" in r:
            continue
        lim = f", max elements {r['max_elements']}" if "max_elements" in r else ""
        lines += [f"**{r['target']} / {r['op']}{lim}**", "",
                  "| n | outputs | median det | max det | median prob | max prob |",
                  "|---|---|---|---|---|---|"]
        for k, b in r["by_reduction"].items():
            lines.append(f"| {k} | {b['outputs']} | {b['median_det']:.3g} | {b['max_det']:.3g} |"
                         f" {b['median_prob']:.3g} | {b['max_prob']:.3g} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def parse_limits(text: str) -> list[int | None]:
    """``"256,1024,default"`` -> ``[256, 1024, None]`` (None: the strategy's default)."""
    out: list[int | None] = []
    for part in text.split(","):
        part = part.strip()
        if part == "default":
            out.append(None)
        elif part.isdigit() and int(part) > 0:
            out.append(int(part))
        else:
            raise SystemExit(f"--limits: {part!r} is neither a positive int nor 'default'; "
                             "give e.g. 256,1024,default,262144")
    return out


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
    ap.add_argument("--limits", default="",
                    help="comma-separated max_elements settings, 'default' for the "
                         "strategy's own (e.g. 256,1024,default,262144); replaces --max-elements")
    ap.add_argument("--backends", default="", help="comma-separated backends (default: all)")
    ap.add_argument("--seconds", type=float, default=None,
                    help="time budget of each (target, op, limit) run")
    ap.add_argument("--regime", default="small", choices=("small", "realistic"),
                    help="case sizes: small, or realistic layer shapes (with --limits default "
                         "and --max-reduction 1048576 for the regime's own limits)")
    a = ap.parse_args()
    from numoracle.kernels import all_targets

    wanted = [t for t in all_targets()
              if (not a.targets or t.name in a.targets.split(","))
              and (not a.ops or t.op in a.ops.split(","))
              and (not a.backends or t.backend in a.backends.split(","))]
    limits = parse_limits(a.limits) if a.limits else [a.max_elements]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread per worker process
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=a.jobs, mp_context=ctx) as pool:
        futs = {pool.submit(sweep_one, t.name, t.op, a.examples, a.seed, a.max_reduction,
                            lim, str(out / "repros"), a.seconds, a.regime): (t, lim)
                for lim in limits for t in wanted}
        for f in as_completed(futs):
            t, lim = futs[f]
            try:
                r = f.result()
            except Exception as exc:  # a crashed sweep is reported, not lost
                r = {"target": t.name, "op": t.op, "skipped": f"sweep crashed: {exc!r}",
                     "max_elements": "default" if lim is None else lim}
            rows.append(r)
            (out / "soundness_partial.json").write_text(json.dumps(rows, indent=1))  # kept if cut
            print(f"{r['target']:>18} {r['op']:<9} {r.get('max_elements', '')!s:>7} " + (
                f"skipped ({r['skipped']})" if "skipped" in r else
                f"{r['cases']} cases, {r['failures']} alarms, worst ratio "
                f"{r['worst_ratio']:.3g}, {r['seconds']:.0f} s"), flush=True)
    order = {("default" if lim is None else lim): k for k, lim in enumerate(limits)}
    rows.sort(key=lambda r: (r["op"], r["target"], order.get(r.get("max_elements"), 0)))
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
