"""``sweep``: soundness and sharpness of the bound over many cases per correct
target: zero false alarms expected; err/bound statistics by reduction length
under both bounds.

    python -m benchmarks sweep [--examples 2000] [--targets a,b] [--ops linear,matmul]
                               [--jobs N] [--max-reduction 65536] [--out DIR]
                               [--regime realistic] [--limits 256,1024,default,262144]
                               [--backends numpy,torch-cpu] [--seconds S] [--gpus N]

With ``--limits`` every (target, op) runs once per size limit (``max_elements``
of the case strategy; ``default`` is the strategy's own default): soundness
must not depend on the limits, since small limits draw shapes (one sample, one
feature) and value meetings (a subnormal gradient beside a huge scale) that
large ones rarely do. Every value family is drawn, ``special`` included.
``--seconds`` caps each run's time (a run then reports the cases it reached). ``--gpus N``
spreads the worker processes over N GPUs (of those CUDA_VISIBLE_DEVICES names).

Each (target, op) runs in its own process (spawned: CUDA does not survive a
fork). A run that reaches fewer than ``--examples`` cases in its ``--seconds``
goes on as shards: as many parallel runs as its own pace says the missing cases
need, each with its own seed (``seed + 1000 k``), until the cases are reached or
``--deadline`` seconds have passed since the start; a row then pools its shards
(cases, alarms, the ratios by reduction length) and says how many ran. Writes
``DIR/soundness.json`` (one row per target and op: cases,
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
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.record import meta, write_json, write_text
from numoracle.kernels import all_targets, get_target
from numoracle.running.runner import default_strategy, run_target


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
              seconds: float | None = None, regime: str = "small",
              shard: int = 0) -> dict[str, Any]:
    """One run of (target, op) at one size limit: a row with the ratios by
    reduction length still raw (``_buckets``: see :func:`summarise`)."""
    target = get_target(name, op)
    reason = target.unavailable_reason()
    if reason:
        return {"target": name, "op": op, "skipped": reason}
    limit = min(max_reduction, target.max_reduction or max_reduction)
    sizes = {} if max_elements is None else {"max_elements": max_elements}
    strat = default_strategy(target, max_reduction=limit, regime=regime, **sizes)
    seed += SHARD_SEED_STEP * shard
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
        res.worst_ratio = max(res.worst_ratio, more.worst_ratio)
        if more.verdict == "FAIL":
            alarms.append(_alarm(more))
        elif more.verdict != "pass":
            break
        res.verdict = "FAIL" if more.verdict == "FAIL" else res.verdict
        round_ += 1
    res.failures = len(alarms)
    buckets: dict[str, dict[str, list[float]]] = {}
    for _out, n, wd, wp, _md, _mpb, exact in res.samples:
        if exact:
            continue  # exact-regime outputs have bound 0: counted apart
        b = buckets.setdefault(bucket(n), {"det": [], "prob": []})
        b["det"].append(float(wd))
        b["prob"].append(float(wp))
    row = res.row()
    row.update(seconds=time.perf_counter() - t0, _buckets=buckets, alarms=alarms,
               exact_regime_outputs=sum(1 for s in res.samples if s[6]),
               model=target.precision.describe(), max_reduction=limit, message=res.message,
               regime=regime, shards=1,
               max_elements="default" if max_elements is None else max_elements)
    return row


#: seed offset between the shards of one (target, op, limit); rounds after an alarm add < 50
SHARD_SEED_STEP = 1000


def pool_rows(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two shards' rows of one (target, op, limit) as one: counts added, the
    worst kept, ratios pooled, the first failing shard's verdict and repro kept."""
    out = dict(a if a.get("failures") or not b.get("failures") else b)
    for key in ("cases", "failures", "unjudged", "exact_regime_outputs", "time_s", "seconds",
                "shards"):
        out[key] = a.get(key, 0) + b.get(key, 0)
    out["worst_ratio"] = max(a["worst_ratio"], b["worst_ratio"])
    out["alarms"] = a["alarms"] + b["alarms"]
    buckets: dict[str, dict[str, list[float]]] = {}
    for part in (a["_buckets"], b["_buckets"]):
        for k, v in part.items():
            m = buckets.setdefault(k, {"det": [], "prob": []})
            m["det"] += v["det"]
            m["prob"] += v["prob"]
    out["_buckets"] = buckets
    if out["status"] == "unjudged" and out["cases"]:
        out["status"], out["reason"] = "pass", ""
    return out


def summarise(row: dict[str, Any]) -> dict[str, Any]:
    """The row as written: per reduction-length bucket the median and max of
    err/bound under both bounds, in place of the raw ratios."""
    if "_buckets" not in row:
        return row
    out = {k: v for k, v in row.items() if k != "_buckets"}
    out["by_reduction"] = {
        k: {"outputs": len(v["det"]),
            "median_det": float(np.median(v["det"])), "max_det": float(np.max(v["det"])),
            "median_prob": float(np.median(v["prob"])), "max_prob": float(np.max(v["prob"]))}
        for k, v in sorted(row["_buckets"].items(), key=lambda kv: int(kv[0].split("-")[-1]))}
    return out


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


def _shard_seconds(a: argparse.Namespace, elapsed: float) -> float | None:
    if a.deadline is None:
        return a.seconds
    return max(1.0, min(a.seconds or a.deadline, a.deadline - elapsed))


def _shards_needed(row: dict[str, Any], last: dict[str, Any], a: argparse.Namespace,
                   goal: int, elapsed: float) -> int:
    """How many more shards a (target, op, limit) needs to reach ``goal`` cases
    before ``--deadline`` at the pace its last run kept (0: none, or no time)."""
    if a.seconds is None or "skipped" in row or "skipped" in last \
            or row["cases"] >= goal or not last["cases"]:
        return 0
    left = (a.deadline - elapsed) if a.deadline is not None else a.seconds
    if left < MIN_SHARD_SECONDS:
        return 0
    pace = last["cases"] / max(last["seconds"], 1e-3)  # cases per second of one process
    per_shard = pace * min(a.seconds, left)
    return max(1, min(a.jobs, math.ceil((goal - row["cases"]) / max(per_shard, 1.0))))


def _next_shards(row: dict[str, Any], last: dict[str, Any], a: argparse.Namespace,
                 goal: int, pending: int, elapsed: float) -> list[int]:
    """The cases to ask of each new shard of a (target, op, limit): what it still
    lacks beyond the ``pending`` cases its running shards were asked for."""
    wanted = goal - pending
    more = _shards_needed(row, last, a, wanted, elapsed)
    return [-(-(wanted - row["cases"]) // more)] * more if more else []


def _reached(files: list[Path]) -> dict[tuple[str, str, int | None], int]:
    """Judged cases per (target, op, limit) in earlier runs' soundness(_partial).json
    files, added up (a row skipped there counts as none)."""
    reached: dict[tuple[str, str, int | None], int] = {}
    for f in files:
        earlier = json.loads(f.read_text())
        for r in earlier["rows"] if isinstance(earlier, dict) else earlier:
            lim = None if r.get("max_elements") == "default" else r.get("max_elements")
            k = (r["target"], r["op"], lim)
            reached[k] = reached.get(k, 0) + (0 if "skipped" in r else r["cases"])
    return reached


def _pin_gpu(counter: Any, gpus: int) -> None:
    """A worker process's start (before CUDA is touched): the next GPU in turn,
    of those CUDA_VISIBLE_DEVICES names where it is set."""
    with counter.get_lock():
        k = counter.value
        counter.value += 1
    seen = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    devices = [d for d in seen.split(",") if d.strip()] or [str(i) for i in range(gpus)]
    os.environ["CUDA_VISIBLE_DEVICES"] = devices[k % min(gpus, len(devices))]


#: a shard given less time than this is not started (start-up and warm-up eat it)
MIN_SHARD_SECONDS = 15.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``sweep`` to the harness's subcommands."""
    ap = sub.add_parser("sweep", help="soundness sweep: many cases per correct target, "
                                      "err/bound by reduction length")
    ap.add_argument("--examples", type=int, default=2000)
    ap.add_argument("--targets", default="", help="comma-separated names (default: all)")
    ap.add_argument("--ops", "--op", default="", help="comma-separated ops (default: all)")
    ap.add_argument("--jobs", type=int, default=max(1, (mp.cpu_count() or 2) - 1))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-reduction", type=int, default=1 << 16)
    ap.add_argument("--max-elements", type=int, default=1 << 18)
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--limits", default="",
                    help="comma-separated max_elements settings, 'default' for the "
                         "strategy's own (e.g. 256,1024,default,262144); replaces --max-elements")
    ap.add_argument("--backends", default="", help="comma-separated backends (default: all)")
    ap.add_argument("--top-up", type=Path, nargs="+", default=None,
                    help="soundness(_partial).json files of earlier runs of the same code: only "
                         "the (target, op, limit) rows short of --examples in them together "
                         "run, each for the cases it lacks (with another --seed: the cases "
                         "must be new ones)")
    ap.add_argument("--seconds", type=float, default=None,
                    help="time budget of each (target, op, limit) run; a run short of "
                         "--examples then goes on as parallel shards (see --deadline)")
    ap.add_argument("--deadline", type=float, default=None,
                    help="seconds from the start after which no shard is started (default: "
                         "none; without --seconds no run is sharded)")
    ap.add_argument("--gpus", type=int, default=1,
                    help="spread the worker processes over this many GPUs of the machine "
                         "(worker k sees GPU k mod N alone, through CUDA_VISIBLE_DEVICES)")
    ap.add_argument("--regime", default="small", choices=("small", "realistic"),
                    help="case sizes: small, or realistic layer shapes (with --limits default "
                         "and --max-reduction 1048576 for the regime's own limits)")
    ap.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the sweep ``a`` describes; writes ``soundness.json`` and ``soundness.md``."""
    if a.gpus < 1:
        raise SystemExit(f"--gpus {a.gpus}: give the number of GPUs to use, 1 or more")
    wanted = [t for t in all_targets()
              if (not a.targets or t.name in a.targets.split(","))
              and (not a.ops or t.op in a.ops.split(","))
              and (not a.backends or t.backend in a.backends.split(","))]
    if a.ops:  # started in the order given: the slowest ops first keep the end short
        wanted.sort(key=lambda t: a.ops.split(",").index(t.op))
    limits = parse_limits(a.limits) if a.limits else [a.max_elements]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread per worker process
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    ctx = mp.get_context("spawn")
    start = time.perf_counter()
    merged: dict[tuple[str, str, int | None], dict[str, Any]] = {}
    spread = {} if a.gpus == 1 else {"initializer": _pin_gpu,
                                     "initargs": (ctx.Value("i", 0), a.gpus)}
    with ProcessPoolExecutor(max_workers=a.jobs, mp_context=ctx, **spread) as pool:
        running: dict[Any, tuple[Any, int | None, int]] = {}  # target, limit, cases asked
        shards_of: dict[tuple[str, str, int | None], int] = {}

        def submit(t: Any, lim: int | None, examples: int, seconds: float | None) -> None:
            key = (t.name, t.op, lim)
            shard = shards_of.get(key, 0)  # the next shard's number: its seed offset
            running[pool.submit(sweep_one, t.name, t.op, examples, a.seed, a.max_reduction,
                                lim, str(out / "repros"), seconds, a.regime, shard)] = (
                t, lim, examples)
            shards_of[key] = shard + 1

        goal = {(t.name, t.op, lim): a.examples for lim in limits for t in wanted}
        if a.top_up is not None:
            reached = _reached(a.top_up)
            goal = {k: a.examples - reached[k] for k in goal
                    if reached.get(k, a.examples) < a.examples}
        for lim in limits:
            for t in wanted:
                if (t.name, t.op, lim) in goal:
                    submit(t, lim, goal[(t.name, t.op, lim)], a.seconds)
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in done:
                t, lim, _ = running.pop(f)
                key = (t.name, t.op, lim)
                try:
                    r = f.result()
                except Exception as exc:  # noqa: BLE001 - a crashed sweep is reported, not lost
                    r = {"target": t.name, "op": t.op, "skipped": f"sweep crashed: {exc!r}",
                         "max_elements": "default" if lim is None else lim}
                prev = merged.get(key)
                merged[key] = r if prev is None or "skipped" in prev else (
                    prev if "skipped" in r else pool_rows(prev, r))
                pending = sum(n for u, v, n in running.values() if (u, v) == (t, lim))
                for cases in _next_shards(merged[key], r, a, goal[key], pending,
                                          time.perf_counter() - start):
                    submit(t, lim, cases, _shard_seconds(a, time.perf_counter() - start))
                rows_now = [summarise(v) for v in merged.values()]  # kept if cut short
                (out / "soundness_partial.json").write_text(json.dumps(rows_now, indent=1))
                if any(v[:2] == (t, lim) for v in running.values()):
                    continue  # its other shards still run: printed when the last is in
                m = merged[key]
                print(f"{m['target']:>18} {m['op']:<9} {m.get('max_elements', '')!s:>7} " + (
                    f"skipped ({m['skipped']})" if "skipped" in m else
                    f"{m['cases']} cases, {m['failures']} alarms, worst ratio "
                    f"{m['worst_ratio']:.3g}, {m['seconds']:.0f} process-s, "
                    f"{m['shards']} shard(s)"), flush=True)
    rows = [summarise(v) for v in merged.values()]
    order = {("default" if lim is None else lim): k for k, lim in enumerate(limits)}
    rows.sort(key=lambda r: (r["op"], r["target"], order.get(r.get("max_elements"), 0)))
    info = meta(a.argv, examples=a.examples)
    write_json(out / "soundness.json", {"meta": info, "rows": rows})
    write_text(out / "soundness.md", to_markdown(rows, f"# Soundness sweep\n\n{json.dumps(info)}"))
    return 0


