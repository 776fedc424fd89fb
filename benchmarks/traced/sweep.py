"""Soundness of the traced oracle: torch running each reference of
:mod:`benchmarks.traced.references` on drawn cases, judged by the oracle.

For every op family and target (the correct targets of
:mod:`numoracle.kernels.torch_traced`: torch on the CPU or CUDA in float32, TF32
or bfloat16), the family's reference is checked on ``examples`` drawn cases
(sizes, value families, layouts): every alarm is a false alarm of the oracle or
a kernel of torch's outside its claim. The (family, target) pairs run in
``jobs`` spawned processes (CUDA does not survive a fork); the oracle itself runs
on the host. :func:`sweep` writes ``soundness.json`` and ``soundness.md`` (cases,
alarms, worst ratio, seconds, the first alarm's message) after every pair, so a
sweep stopped at a time limit keeps the pairs it finished.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from benchmarks.record import meta, write_json, write_text

__all__ = ["sweep", "sweep_one"]


def sweep_one(family: str, target_name: str, examples: int, seed: int,
              grads: bool) -> dict[str, Any]:
    """The row of one family on one target: cases, alarms, worst ratio, seconds, or why
    the target was skipped (a CUDA target without a GPU, say)."""
    from benchmarks.traced.references import make_op  # noqa: PLC0415 - torch-heavy
    from numoracle.api import add_listener, check_kernel, remove_listener  # noqa: PLC0415
    from numoracle.errors import NumoracleError  # noqa: PLC0415
    from numoracle.kernels.torch_traced import reference_targets  # noqa: PLC0415

    op = make_op(family, grads=grads)
    target = next(t for t in reference_targets(op.name) if t.name == target_name)
    row: dict[str, Any] = {"family": family, "grads": grads, "op": op.name, "target": target_name,
                           "precision": target.precision.name, "examples": examples}
    reason = target.unavailable_reason()
    if reason is not None:
        return {**row, "status": f"skipped: {reason}"}
    results: list[Any] = []
    add_listener(results.append)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's notes on degenerate draws (var of one)
            check_kernel(target.fn, op=op.name, precision=target.precision,
                         backend=target.backend, examples=examples, seed=seed, store=None,
                         name=target.name, max_overlays=0)
        status = "pass"
    except NumoracleError as exc:  # an alarm (KernelMismatch) or a refusal (NoRule)
        status = f"{type(exc).__name__}: {str(exc)[:1500]}"
    finally:
        remove_listener(results.append)
    r = results[-1] if results else None
    return {**row, "status": "pass" if status == "pass" else "alarm", "message": status,
            "cases": getattr(r, "cases", 0), "failures": getattr(r, "failures", 0),
            "cases_to_catch": getattr(r, "cases_to_catch", None),
            "worst_ratio": getattr(r, "worst_ratio", None),
            "seconds": round(time.perf_counter() - start, 1)}


def _markdown(rows: list[dict[str, Any]], argv: Sequence[str]) -> str:
    lines = ["# Traced oracle: soundness of torch running each reference", "",
             f"`{meta(argv)['command']}`", "",
             "| family | grads | target | cases | alarms | worst ratio | seconds | status |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        worst = r.get("worst_ratio")
        lines.append(f"| {r['family']} | {'yes' if r['grads'] else 'no'} | {r['target']} | "
                     f"{r.get('cases', 0)} | "
                     f"{r.get('failures', 0)} | "
                     f"{'-' if worst is None else f'{worst:.3g}'} | {r.get('seconds', '-')} | "
                     f"{r['status']} |")
    alarms = [r for r in rows if r["status"] == "alarm"]
    if alarms:
        lines += ["", "## Alarms", ""]
        for r in alarms:
            lines += [f"### {r['family']} on {r['target']}", "", "```", r["message"], "```", ""]
    return "\n".join(lines) + "\n"


def sweep(families: Sequence[str], targets: Sequence[str], examples: int, seed: int,
          grads: bool, jobs: int, out: Path, argv: Sequence[str]) -> list[dict[str, Any]]:
    """Check every family on every target (``jobs`` pairs at a time); write the tables
    to ``out`` after each pair and return the rows, in family then target order."""
    pairs = [(f, t) for f in families for t in targets]
    done: dict[tuple[str, str], dict[str, Any]] = {}

    def record(pair: tuple[str, str], row: dict[str, Any]) -> None:
        done[pair] = row
        print(f"{pair[0]:14s} {pair[1]:16s} {row.get('status')} cases={row.get('cases')} "
              f"worst={row.get('worst_ratio')} {row.get('seconds')}s", flush=True)
        rows = [done[p] for p in pairs if p in done]
        write_json(out / "soundness.json", {"meta": meta(argv), "rows": rows})
        write_text(out / "soundness.md", _markdown(rows, argv))

    if jobs <= 1:
        for pair in pairs:
            record(pair, sweep_one(*pair, examples, seed, grads))
    else:
        with ProcessPoolExecutor(max_workers=min(jobs, len(pairs)),
                                 mp_context=mp.get_context("spawn")) as pool:
            futures = {pool.submit(sweep_one, *pair, examples, seed, grads): pair
                       for pair in pairs}
            for future in as_completed(futures):
                family, target = futures[future]
                try:
                    row = future.result()
                except Exception as exc:  # noqa: BLE001 - a worker that died (a crash in a
                    # kernel takes its process and the pool's pending pairs): recorded as such
                    row = {"family": family, "grads": grads, "target": target,
                           "examples": examples,
                           "status": f"error: {type(exc).__name__}: {str(exc)[:300]}"}
                record((family, target), row)
    return [done[p] for p in pairs]
