"""Soundness sweep of the logic targets: random cases, one reference per case and
storage format, every correct target of that format judged against it.

Usage::

    python benchmarks/logic_sweep.py --op logic_ca --cases 2000 --out DIR [--max-side 32]
        [--max-steps 4] [--max-channels 4] [--targets a,b] [--seconds S] [--jobs N]

Cases: grid sides log-uniform in ``[1, max-side]``, steps ``1..max-steps`` and
channels ``1..max-channels`` (both log-uniform), kernels ``1..2``, hidden ``1..8``,
either boundary, a value family (the automaton draws its own states; the family
shapes the logits); for ``logic_layer`` batch ``1..128``, features ``1..64``, every family. Writes
``DIR/<op>_sweep.json`` (rewritten every 50 cases, so a run cut short keeps what
it judged): per target the cases, alarms (``err > bound`` where the bound is
finite, or NaN where the reference is finite and judged) and the worst and
median ratios; a false alarm's case is listed for replay.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from numoracle.cases.case import Case
from numoracle.cases.values import FAMILIES
from numoracle.checking.check import run_kernel
from numoracle.kernels.registry import all_targets
from numoracle.oracle.ops import get_op


def _log_uniform(rng: np.random.Generator, hi: int) -> int:
    """An integer in ``[1, hi]``, log-uniform: small values as often as large ones."""
    return int(np.clip(np.round(2 ** rng.uniform(0, np.log2(hi))), 1, hi)) if hi > 1 else 1


def draw_params(op: str, rng: np.random.Generator, max_side: int, max_steps: int,
                max_channels: int = 4) -> dict:
    if op == "logic_layer":
        return {"batch": int(rng.integers(1, 129)), "in_features": int(rng.integers(1, 65)),
                "out_features": int(rng.integers(1, 65))}
    return {"height": _log_uniform(rng, max_side), "width": _log_uniform(rng, max_side),
            "channels": _log_uniform(rng, max_channels),
            "steps": _log_uniform(rng, max_steps), "kernels": int(rng.integers(1, 3)),
            "hidden": int(rng.integers(1, 9)), "periodic": bool(rng.integers(0, 2))}


def judge(ref: Any, got: np.ndarray) -> tuple[bool, float, int]:
    """(passed, worst ratio over judged elements, judged count)."""
    value = ref.value + (ref.lo if ref.lo is not None else 0.0)
    bound = ref.det + ref.ref_err
    judged = np.isfinite(bound)
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.abs(got - value)
        ratio = np.where(judged, np.where(bound > 0, err / bound, np.where(err == 0, 0, np.inf)),
                         0.0)
    bad_nan = judged & np.isfinite(value) & ~np.isfinite(got)
    ratio = np.where(bad_nan, np.inf, ratio)
    worst = float(np.max(ratio)) if ratio.size else 0.0
    return bool(worst < 1.0), worst, int(judged.sum())


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", default="logic_ca", choices=("logic_ca", "logic_layer"))
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-side", type=int, default=32)
    ap.add_argument("--max-steps", type=int, default=4)
    ap.add_argument("--max-channels", type=int, default=4)
    ap.add_argument("--targets", default="")
    ap.add_argument("--seconds", type=float, default=float("inf"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1,
                    help="worker processes, each drawing its own cases (seeds spawned from "
                         "--seed); each rewrites DIR/shards/<op>_sweep_<k>.json as it goes")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.jobs <= 1:
        stats, drawn, start = _sweep(args, np.random.default_rng(args.seed), None)
        _write(args, stats, drawn, start)
        return 0
    seeds = np.random.SeedSequence(args.seed).spawn(args.jobs)
    per_job = -(-args.cases // args.jobs)
    ctx = multiprocessing.get_context("spawn")  # CUDA in the workers: no fork
    with ctx.Pool(args.jobs) as pool:
        pool.starmap(_shard, [(argv if argv is not None else sys.argv[1:], k, seeds[k], per_job)
                              for k in range(args.jobs)])
    _merge(args)
    return 0


def _shard(argv: list[str], k: int, seed: np.random.SeedSequence, cases: int) -> None:
    """Worker ``k``: the parent's arguments with its share of the cases."""
    args = _parser().parse_args([*argv, "--cases", str(cases), "--jobs", "1"])
    _sweep(args, np.random.default_rng(seed), k)


def _sweep(args: argparse.Namespace, rng: np.random.Generator,
           shard: int | None) -> tuple[dict[str, dict[str, Any]], int, float]:
    """Draw and judge cases until ``args.cases`` or ``args.seconds``; a shard
    rewrites its own file every 10 cases, the single run its result every 50."""
    op = get_op(args.op)
    wanted = [t for t in args.targets.split(",") if t]
    targets = [t for t in all_targets() if t.op == args.op and t.unavailable_reason() is None
               and (not wanted or t.name in wanted)]
    stats: dict[str, dict[str, Any]] = {
        t.name: {"cases": 0, "alarms": 0, "worst_ratio": 0.0, "ratios": [], "failures": []}
        for t in targets}
    start = time.time()
    families = [f for f in FAMILIES if f != "special"] if args.op == "logic_ca" else FAMILIES
    i = 0
    while i < args.cases and time.time() - start < args.seconds:
        params = draw_params(args.op, rng, args.max_side, args.max_steps, args.max_channels)
        family = str(rng.choice(families))
        seed = int(rng.integers(0, 2**31))
        for storage in ("fp32", "fp64"):
            group = [t for t in targets if t.precision.storage.name == storage]
            if not group:
                continue
            case = Case(op=args.op, params=op.validate(params), storage=storage, family=family,
                        seed=seed)
            inputs = case.inputs()
            refs = None
            for t in group:
                got, error = run_kernel(case, t, inputs)
                if refs is None:
                    refs = op.reference(inputs, case.params, t.precision)
                s = stats[t.name]
                s["cases"] += 1
                if got is None:
                    s["alarms"] += 1
                    s["failures"].append({"case": case.to_dict(), "error": error})
                    continue
                worst = 0.0
                ok = True
                for name, arr in got.items():
                    passed, w, _ = judge(refs[name], arr)
                    ok &= passed
                    worst = max(worst, w)
                s["ratios"].append(worst)
                s["worst_ratio"] = max(s["worst_ratio"], worst)
                if not ok:
                    s["alarms"] += 1
                    s["failures"].append({"case": case.to_dict(), "worst": worst})
        i += 1
        if shard is not None and i % 10 == 0:
            _write_shard(args, stats, shard, i, start)
        elif shard is None and i % 50 == 0:
            _write(args, stats, i, start, quiet=True)
    if shard is not None:
        _write_shard(args, stats, shard, i, start)
    return stats, i, start


def _write_shard(args: argparse.Namespace, stats: dict[str, dict[str, Any]], shard: int,
                 drawn: int, start: float) -> None:
    d = args.out / "shards"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{args.op}_sweep_{shard}.json").write_text(json.dumps(
        {"drawn": drawn, "seconds": round(time.time() - start, 1), "stats": stats}))


def _merge(args: argparse.Namespace) -> None:
    """The shards' files as one result (the ratios pooled), written as the
    single run writes it."""
    stats: dict[str, dict[str, Any]] = {}
    drawn, seconds = 0, 0.0
    for f in sorted((args.out / "shards").glob(f"{args.op}_sweep_*.json")):
        part = json.loads(f.read_text())
        drawn += part["drawn"]
        seconds = max(seconds, part["seconds"])
        for name, s in part["stats"].items():
            m = stats.setdefault(name, {"cases": 0, "alarms": 0, "worst_ratio": 0.0,
                                        "ratios": [], "failures": []})
            for key in ("cases", "alarms"):
                m[key] += s[key]
            m["worst_ratio"] = max(m["worst_ratio"], s["worst_ratio"])
            m["ratios"] += s["ratios"]
            m["failures"] += s["failures"]
    _write(args, stats, drawn, time.time() - seconds)


def _write(args: argparse.Namespace, stats: dict[str, dict[str, Any]], drawn: int,
           start: float, quiet: bool = False) -> None:
    out = {"command": " ".join([sys.executable.split("/")[-1]] + sys.argv),
           "machine": f"{platform.node()} {platform.processor() or platform.machine()}, "
                      f"{os.cpu_count()} CPUs (shared)",
           "op": args.op, "cases_drawn": drawn, "seconds": round(time.time() - start, 1),
           "max_side": args.max_side, "max_steps": args.max_steps,
           "max_channels": args.max_channels, "targets": {}}
    for name, s in stats.items():
        r = np.asarray(s["ratios"]) if s["ratios"] else np.zeros(1)
        out["targets"][name] = {**{k: v for k, v in s.items() if k != "ratios"},
                                "median_ratio": float(np.median(r)),
                                "p99_ratio": float(np.quantile(r, 0.99))}
        if not quiet:
            print(f"{name}: {s['cases']} cases, {s['alarms']} alarms, "
                  f"worst {s['worst_ratio']:.3g}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.op}_sweep.json").write_text(json.dumps(out, indent=1))

if __name__ == "__main__":
    raise SystemExit(main())
