"""Drawn-case validity: how many drawn cases torch's own ``Model`` rejects, per problem.

For every problem file under the given folders, ``--cases`` size draws are made as the
judge makes them (each size knob from 1 to twice its official value, or around the
reduced sizes where the official instance is too large for the float64 oracle); a draw
the ``meta`` check refuses, or above ``--max-mib`` of float64, is not a case. Each
remaining case is run for real: torch's ``Model`` on ``get_inputs()``'s values at those
sizes (:func:`numoracle.kernelbench.reference.torch_reference`). A case it raises on is
*rejected*. Two ways of drawing are compared:

``before``  every module-level int constant of at least 4 is a knob, drawn on its own,
            and nothing computed from a knob follows it (``input_shape = (num_classes,)``
            keeps the official value)
``after``   constants computed from another module-level name are not knobs, and every
            assignment that reads a drawn knob is evaluated again

    python -m benchmarks.kernelbench.validity DIR [DIR ...] [--cases 4] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.kernelbench.candidates import problem_files, problem_name

__all__ = ["survey_problem"]


class _TimeUp(BaseException):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _TimeUp


def _old_way(problem: Any) -> Any:
    """The problem as drawn before: every int constant a knob, nothing re-derived."""
    ints = {k: int(v) for k, v in vars(problem.module).items()
            if not k.startswith("_") and isinstance(v, int) and not isinstance(v, bool)}
    return replace(problem, knobs=ints, derived=[])


def _draws(problem: Any, cases: int, seed: int, max_bytes: int) -> list[dict[str, int]]:
    from numoracle.kernelbench.cases import float64_bytes, reduced_sizes, varied_knobs  # noqa: PLC0415

    knobs = varied_knobs(problem)
    fits = float64_bytes(problem, {}) <= max_bytes
    small = {} if fits else (reduced_sizes(problem, {}, most=max_bytes // 512 // 8) or {})
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(cases):
        sizes = {}
        for name, value in sorted(knobs.items()):
            hi = 2 * value if fits else min(value, max(4 * small.get(name, value), 16))
            sizes[name] = int(rng.integers(1, hi + 1))
        out.append(sizes)
    return out


def survey_problem(path: Path, cases: int, max_bytes: int, seed: int = 0) -> dict[str, Any]:
    """The row of one problem: valid cases and rejected ones, before and after."""
    import torch  # noqa: PLC0415 - torch-heavy

    from numoracle.kernelbench.cases import KBCase, case_inputs, case_state  # noqa: PLC0415
    from numoracle.kernelbench.cases import float64_bytes, valid_sizes  # noqa: PLC0415
    from numoracle.kernelbench.problem import load_problem  # noqa: PLC0415
    from numoracle.kernelbench.reference import torch_reference  # noqa: PLC0415

    row: dict[str, Any] = {"problem": problem_name(path)}
    try:
        after = load_problem(path)
    except Exception as exc:  # noqa: BLE001 - a problem that does not load is said so
        row["error"] = f"{type(exc).__name__}: {str(exc)[:100]}"
        return row
    base = after.dropout_off()
    for label, problem in (("before", _old_way(after)), ("after", after)):
        valid = rejected = 0
        first = ""
        for sizes in _draws(problem, cases, seed, max_bytes):
            sizes = {**base, **sizes}
            try:
                if not valid_sizes(problem, sizes) or float64_bytes(problem, sizes) > max_bytes:
                    continue
                case = KBCase(sizes=tuple(sorted(sizes.items())))
                with problem.at(sizes):
                    second = case_inputs(problem, case, base, draw=2, dtype=torch.float32)
                    state = case_state(problem, case, base, dtype=torch.float32)
                    ref = torch_reference(problem, init=problem.init_args(sizes), state=state,
                                          args=second, layouts=["C"] * len(second),
                                          device="cpu", dtype="float32", tf32=False, seed=0)
            except Exception as exc:  # noqa: BLE001 - the harness's own failure, said
                first = first or f"{sizes}: harness {type(exc).__name__}: {str(exc)[:80]}"
                continue
            valid += 1
            if ref.fault is not None and not ref.out_of_memory:
                rejected += 1
                first = first or f"{sizes}: {ref.fault[:120]}"
        row[label] = {"valid": valid, "rejected": rejected, "first": first}
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", type=Path, nargs="+")
    ap.add_argument("--cases", type=int, default=4)
    ap.add_argument("--max-mib", type=int, default=32)
    ap.add_argument("--seconds", type=int, default=90, help="per problem")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    t0 = time.perf_counter()
    signal.signal(signal.SIGALRM, _alarm)
    for folder in args.folders:
        for path in problem_files(folder):
            signal.alarm(args.seconds)
            try:
                row = survey_problem(path, args.cases, args.max_mib << 20)
            except _TimeUp:
                row = {"problem": problem_name(path), "error": f"over {args.seconds} s"}
            finally:
                signal.alarm(0)
            row["set"] = folder.name
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.out is not None:
                args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = [f"command: python -m benchmarks.kernelbench.validity "
             f"{' '.join(str(f) for f in args.folders)} --cases {args.cases} --max-mib "
             f"{args.max_mib}; {time.perf_counter() - t0:.0f} s", "",
             "| set | problems | with a rejected case before | after | cases valid before "
             "| rejected | valid after | rejected |", "|---|---|---|---|---|---|---|---|"]
    for name in sorted({r["set"] for r in rows}):
        mine = [r for r in rows if r["set"] == name and "after" in r]
        def tot(label: str, key: str, mine: list[dict[str, Any]] = mine) -> int:
            return sum(r[label][key] for r in mine)
        lines.append(f"| {name} | {len(mine)} | "
                     f"{sum(r['before']['rejected'] > 0 for r in mine)} | "
                     f"{sum(r['after']['rejected'] > 0 for r in mine)} | "
                     f"{tot('before', 'valid')} | {tot('before', 'rejected')} | "
                     f"{tot('after', 'valid')} | {tot('after', 'rejected')} |")
    lines += ["", "Problems with a rejected case:", ""]
    for r in rows:
        if "after" in r and (r["before"]["rejected"] or r["after"]["rejected"]):
            lines.append(f"- {r['set']}/{r['problem']}: before {r['before']['rejected']}/"
                         f"{r['before']['valid']} ({r['before']['first']}); after "
                         f"{r['after']['rejected']}/{r['after']['valid']} "
                         f"({r['after']['first']})")
    errors = [r for r in rows if "error" in r]
    lines += ["", f"Not surveyed: {len(errors)} ("
              + "; ".join(f"{r['set']}/{r['problem']}: {r['error']}" for r in errors[:20])
              + ")"]
    text = "\n".join(lines) + "\n"
    if args.out is not None:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
