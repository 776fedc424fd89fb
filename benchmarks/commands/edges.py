"""``edges``: cases to catch the zoo's size-dependent mutants — bugs that show only
past a batch of 64, at a partial tile, at long reductions or on several output
rows — in a run's rows (cases drawn by the driver, block by block) and in
``numoracle zoo`` (one Hypothesis run per mutant), over several seeds; and the
correct kernels' alarms over the same first cases.

    python -m benchmarks edges --seeds 10 --examples 400 --out DIR

Writes ``DIR/edges.json`` (per mutant and path: the cases to catch per seed, the
median and the largest; per correct target: cases and failures) and
``DIR/edges.md``. Run from a checkout without ``edge_cases`` (before the edges)
it records the same numbers for that code: the before/after comparison.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
from pathlib import Path
from typing import Any

from benchmarks.record import meta, write_json, write_text

#: the size-dependent mutants: (module of numoracle.zoo, mutant) and what they need
MUTANTS = (
    ("linear", "rows_past_64_unwritten", "batch > 64"),
    ("linear", "tail_tile_past_64_dropped", "in_features mod 128 > 64"),
    ("linear", "fp16_accumulation_from_2048", "in_features >= 2048"),
    ("conv2d", "stride_ignored_on_last_row", "two output rows or more, stride > 1"),
    ("conv2d", "grad_weight_lost_update", "batch > 1"),
)
#: correct targets judged over the first cases of a row with the same seeds
CORRECT = (("numpy-fp32", "linear"), ("numpy-fp32", "matmul"), ("torch-cpu-fp32", "linear"),
           ("numpy-fp32", "conv2d"), ("torch-cpu-fp32", "conv2d"))


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``edges`` to the harness's subcommands."""
    ap = sub.add_parser("edges", help="cases to catch the zoo's size-dependent mutants in a "
                                      "run's rows and in numoracle zoo, over seeds")
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 (default 10)")
    ap.add_argument("--examples", type=int, default=400,
                    help="cases at most per mutant and seed (default 400)")
    ap.add_argument("--correct", type=int, default=40,
                    help="cases per correct target and seed (default 40)")
    ap.add_argument("--paths", default=",".join(PATHS),
                    help=f"the paths measured, of {','.join(PATHS)} (default all)")
    ap.add_argument("--traced", action="store_true",
                    help="only the traced references' size-dependent mutants "
                         "(benchmarks/traced/size_mutants.py), through check_kernel")
    ap.add_argument("--out", type=Path, required=True, help="folder for the results")
    ap.set_defaults(func=run)


def _in_a_row(target: Any, examples: int, seed: int) -> Any:
    """The target as a row of ``numoracle run`` judges it: one process, no time
    limit, no shrinking."""
    from numoracle.running.schedule import Row, RunSettings, judge_rows  # noqa: PLC0415

    settings = RunSettings(seed=seed, store=None, shrink_seconds=0.0)
    [res] = judge_rows([Row(target, asked=examples)], None, settings)
    return res


def _in_the_zoo(target: Any, examples: int, seed: int) -> Any:
    """The target as ``numoracle zoo`` judges it (edges first where this code has them)."""
    from numoracle.running.runner import run_target  # noqa: PLC0415

    kw: dict[str, Any] = {}
    if "edges" in inspect.signature(run_target).parameters:
        from numoracle.running.draws import edge_cases  # noqa: PLC0415

        kw["edges"] = edge_cases(target, seed)
    return run_target(target, examples=examples, seed=seed, store=None, shrink=False, **kw)


def _in_check_kernel(target: Any, examples: int, seed: int) -> Any:
    """The target's kernel as ``check_kernel(fn, op=...)`` judges it (and ``validate``:
    the same run), with its stored-repro folder off; the result its listeners see."""
    from numoracle.api import add_listener, check_kernel, remove_listener  # noqa: PLC0415

    seen: list[Any] = []
    add_listener(seen.append)
    try:
        check_kernel(target.fn, op=target.op, precision=target.precision,
                     backend=target.backend, examples=examples, seed=seed, store=None,
                     name=target.name)
    except AssertionError:
        pass
    finally:
        remove_listener(seen.append)
    return seen[-1]


def _traced_check(name: str, examples: int, seed: int) -> Any:
    """Traced mutant ``name`` as ``check_kernel(fn, reference=...)`` judges it (with
    its stored-repro folder off): the result its listeners see, or None where the
    check could not run (a reference refusing the drawn sizes)."""
    from numoracle.api import add_listener, check_kernel, remove_listener  # noqa: PLC0415
    from numoracle.errors import InvalidArgument  # noqa: PLC0415

    from benchmarks.traced import size_mutants  # noqa: PLC0415 - torch-heavy

    reference, inputs, dims = size_mutants.SPECS[name]
    seen: list[Any] = []
    add_listener(seen.append)
    try:
        check_kernel(getattr(size_mutants, name), reference=reference, inputs=inputs, dims=dims,
                     op=f"traced_{name}",
                     backend="torch-cpu", examples=examples, seed=seed, store=None)
    except AssertionError:
        pass
    except InvalidArgument as exc:
        print(f"{name} seed {seed}: {str(exc)[:160]}", flush=True)
        return None
    finally:
        remove_listener(seen.append)
    return seen[-1] if seen else None


#: the paths a mutant is judged through: name -> judge(target, examples, seed)
PATHS = {"run": _in_a_row, "zoo": _in_the_zoo, "check_kernel": _in_check_kernel}


def _summary(caught: list[int | None]) -> dict[str, Any]:
    got = [c for c in caught if c is not None]
    return {"per_seed": caught, "missed": caught.count(None),
            "median": statistics.median(got) if got else None, "max": max(got) if got else None}


def run(a: argparse.Namespace) -> int:
    """Measure and record under ``a.out``."""
    from numoracle.kernels import get_target  # noqa: PLC0415
    from numoracle.zoo import mutants  # noqa: PLC0415

    if a.traced:
        return _run_traced(a)
    paths = [p for p in a.paths.split(",") if p]
    unknown = sorted(set(paths) - set(PATHS))
    if unknown:
        raise SystemExit(f"--paths names {unknown}; use some of {','.join(PATHS)}")
    zoo = {t.name: t for t in mutants(["linear", "conv2d"])}
    rows: list[dict[str, Any]] = []
    for module, name, needs in MUTANTS:
        t = zoo.get(name)
        if t is None or t.unavailable_reason():
            rows.append({"mutant": name, "op": module, "needs": needs, "skipped": True})
            continue
        row: dict[str, Any] = {"mutant": name, "op": t.op, "needs": needs}
        for path in paths:
            judge = PATHS[path]
            caught = []
            for seed in range(a.seeds):
                res = judge(t, a.examples, seed)
                caught.append(res.cases_to_catch if res.verdict == "FAIL" else None)
            row[path] = _summary(caught)
        rows.append(row)
        print(name, *(row[p] for p in paths), flush=True)
    correct = []
    for name, op in CORRECT if "run" in paths else ():
        t = get_target(name, op)
        if t.unavailable_reason():
            continue
        cases = failures = 0
        for seed in range(a.seeds):
            res = _in_a_row(t, a.correct, seed)
            cases, failures = cases + res.cases, failures + (res.verdict == "FAIL")
        correct.append({"target": name, "op": op, "cases": cases, "failures": failures})
        print(name, op, cases, failures, flush=True)
    write_json(a.out / "edges.json", {"meta": meta(a.argv), "mutants": rows, "correct": correct})
    lines = ["| mutant | op | fails where | " + " | ".join(
        f"{p}: {k}" for p in paths for k in ("median", "max", "missed")) + " |",
        "|---|---|---|" + "---|" * (3 * len(paths))]
    for r in rows:
        if r.get("skipped"):
            continue
        lines.append(f"| {r['mutant']} | {r['op']} | {r['needs']} | " + " | ".join(
            str(r[p][k]) for p in paths for k in ("median", "max", "missed")) + " |")
    if correct:
        lines += ["", "| correct target | op | cases | rows failed |", "|---|---|---|---|"]
        lines += [f"| {c['target']} | {c['op']} | {c['cases']} | {c['failures']} |"
                  for c in correct]
    write_text(a.out / "edges.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    missed = any(r[p]["missed"] for r in rows if not r.get("skipped") for p in paths)
    return 1 if missed or any(c["failures"] for c in correct) else 0


def _run_traced(a: argparse.Namespace) -> int:
    """The traced mutants through ``check_kernel``, over the seeds: ``traced.json``,
    ``traced.md`` under ``a.out``."""
    from benchmarks.traced.size_mutants import MUTANTS as TRACED  # noqa: PLC0415

    rows = []
    for name, needs in TRACED:
        caught = []
        for seed in range(a.seeds):
            res = _traced_check(name, a.examples, seed)
            caught.append(res.cases_to_catch if res is not None and res.verdict == "FAIL"
                          else None)
        rows.append({"mutant": name, "needs": needs, "check_kernel": _summary(caught)})
        print(name, rows[-1]["check_kernel"], flush=True)
    write_json(a.out / "traced.json", {"meta": meta(a.argv), "mutants": rows})
    lines = ["| mutant | fails where | median | max | missed | per seed |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['mutant']} | {r['needs']} | {r['check_kernel']['median']} | "
              f"{r['check_kernel']['max']} | {r['check_kernel']['missed']} | "
              f"{r['check_kernel']['per_seed']} |" for r in rows]
    write_text(a.out / "traced.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if any(r["check_kernel"]["missed"] for r in rows) else 0
