"""Planning the official run before it starts: each problem's float64 floor, kind,
estimated work and host bytes (:func:`plan_problem`, on the meta device: nothing
allocated), and ``plan.md``: what a memory model plans for every problem on a device
of a given size, the share planned whole, and the schedule :mod:`.admission` would
make of them within a deadline (measured seconds where the model has them).

    python -m benchmarks.kernelbench.official plan PROBLEMS --out DIR
        [--memory-gib 139.8] [--memory-model MODEL.json] [--slots 14]
        [--deadline 520] [--unmeasured-seconds 30]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.kernelbench.admission import (
    GIB,
    Admission,
    MemoryModel,
    Planned,
    Room,
    kind_of,
    simulate,
)

__all__ = ["plan_problem", "plans_of", "plan", "planned", "HOST_PER_INPUT",
           "HOST_PER_OUTPUT"]


#: how many times a multiply-add of a transposed convolution costs the oracle one of a
#: direct one, per unit of its stride's product (zeros inserted between the input's
#: elements, windows over them): the order the driver starts problems in
TRANSPOSED_WEIGHT = 8
#: the oracle's cost of one float64 floor element against one multiply-add
ELEMENT_WEIGHT = 50
#: host bytes a judgement takes per floating input element (its two draws in fp32, the
#: shared inputs file, the candidate's copy of its inputs before the call) and per
#: output element (the shared outputs, the judge's copy, torch's reference)
HOST_PER_INPUT, HOST_PER_OUTPUT = 20, 12


def _work(problem: Any, base: dict[str, Any]) -> tuple[float, str]:
    """The oracle's work on the official instance, in multiply-adds: the forward's
    FLOPs (a transposed convolution's weighted by :data:`TRANSPOSED_WEIGHT` times its
    stride's product), found on the meta device; and the problem's kind
    (:func:`~benchmarks.kernelbench.admission.kind_of` of the ATen ops it dispatched)."""
    import math  # noqa: PLC0415

    import torch  # noqa: PLC0415 - torch-heavy, in the planning pool's processes
    from torch.utils._python_dispatch import TorchDispatchMode  # noqa: PLC0415
    from torch.utils.flop_counter import FlopCounterMode  # noqa: PLC0415

    transposed: list[float] = []
    ops: set[str] = set()

    class Strides(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            ops.add(func.overloadpacket.__name__)
            if func.overloadpacket is torch.ops.aten.convolution and len(args) > 6 \
                    and args[6]:
                transposed.append(float(math.prod(args[3])))
            return func(*args, **(kwargs or {}))

    specs = problem.input_specs(base)
    args = [torch.empty(s.shape, dtype=s.dtype, device="meta") if s.dtype is not None
            else v for s, v in zip(specs, problem.meta_inputs(base), strict=False)]
    with torch.device("meta"):
        model = problem.model(base)
        counter = FlopCounterMode(display=False)
        with counter, Strides():
            model(*args)
    flops = float(counter.get_total_flops())
    if transposed:
        flops *= TRANSPOSED_WEIGHT * max(transposed)
    return flops / 2, kind_of(ops, transposed=bool(transposed))


def plan_problem(path: str) -> dict[str, Any]:
    """The float64 floor of ``path``'s official instance, its floating inputs'
    elements, an estimate of the oracle's work on it and its kind (what the
    driver plans its memory and orders the queue by)."""
    from numoracle.kernelbench.cases import float64_bytes  # noqa: PLC0415 - torch-heavy
    from numoracle.kernelbench.problem import load_problem  # noqa: PLC0415

    try:
        problem = load_problem(path)
        base = problem.dropout_off()
        floor = float64_bytes(problem, base)
        inputs = sum(s.elements() for s in problem.input_specs(base) if s.floating)
        outputs = max(floor // 8 - inputs, 0)
    except Exception as exc:  # noqa: BLE001 - a problem that does not load is refused by the judge
        return {"path": path, "floor": 0, "inputs": 0, "outputs": 0, "work": 0.0,
                "kind": "other", "plan_error": f"{type(exc).__name__}: {str(exc)[:120]}"}
    try:
        work, kind = _work(problem, base)
    except Exception:  # noqa: BLE001 - not counted: scheduled by its floor alone
        work, kind = 0.0, "other"
    work += ELEMENT_WEIGHT * min(floor, 1 << 40) / 8
    return {"path": path, "floor": floor, "inputs": inputs, "outputs": outputs, "work": work,
            "kind": kind}


def plans_of(files: Sequence[Path]) -> list[dict[str, Any]]:
    """:func:`plan_problem` of every file, in a pool of processes (torch imported in
    each)."""
    with ProcessPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1)),
                             mp_context=mp.get_context("spawn")) as pool:
        return list(pool.map(plan_problem, [str(p) for p in files]))


def planned(name: str, plan: dict[str, Any], host_total: int) -> Planned:
    """What the admission knows of a problem from its plan."""
    host = HOST_PER_INPUT * plan["inputs"] + HOST_PER_OUTPUT * plan["outputs"]
    return Planned(name, plan["floor"], plan.get("kind", "other"), plan.get("work", 0.0),
                   min(host, host_total))


def _floor_text(q: dict[str, Any]) -> str:
    if q.get("plan_error"):
        return f"- ({q['plan_error']})"
    if q["floor"] >= 1 << 62:
        return "- (the model does not run on the meta device at these sizes)"
    return f"{q['floor'] / GIB:.3g}"


def plan(args: argparse.Namespace, model: MemoryModel) -> int:
    """``plan.md``: every problem's float64 floor, kind and planned device memory under
    ``model`` on a device of ``--memory-gib`` (90% of it usable), whether it is planned
    whole, the memory-time bound on the run's seconds and the schedule simulated
    within ``--deadline`` (the model's measured seconds, else ``--unmeasured-seconds``
    for problems planned at more than a quarter of the device and the measured median
    for the rest)."""
    from benchmarks.kernelbench.candidates import problem_files, problem_name  # noqa: PLC0415
    from benchmarks.record import meta  # noqa: PLC0415

    files = problem_files(args.problems)
    plans = plans_of(files)
    usable = int(0.9 * args.memory_gib * GIB)
    admission = Admission(usable, model)
    tickets = [admission.ticket(planned(problem_name(p), q, 1 << 62))
               for p, q in zip(files, plans, strict=True)]
    measured = [v for v in model.seconds.values() if v > 0]
    usual = statistics.median(measured) if measured else args.unmeasured_seconds

    def seconds(t: Any) -> float:
        known = model.seconds.get(t.problem.name)
        if known:
            return min(known, 120.0)
        return args.unmeasured_seconds if admission.big(t) else usual

    bound = sum(t.reserve * seconds(t) for t in tickets) / usable
    runs = simulate(admission, tickets, [Room("device", usable, args.slots)], seconds,
                    tick=1.0, deadline=args.deadline)
    done = [r for r in runs if r.end <= args.deadline + 20]
    whole = sum(t.whole for t in tickets)
    n = max(len(files), 1)
    head = meta(args.argv)
    lines = ["# KernelBench official instances: planned device memory", "",
             f"Command: `python -m benchmarks.kernelbench.official {' '.join(args.argv)}`  ",
             f"Commit {head['commit']}, {head['date']}; {len(files)} problems; a device of "
             f"{args.memory_gib:g} GiB, 90% of it usable; the floor is the float64 bytes of "
             "the inputs, parameters and every intermediate result (found on the meta "
             "device: nothing allocated).  ", f"Memory model: {model.how}.", "",
             f"**Planned whole: {whole} of {len(files)} ({100 * whole / n:.0f}%).** "
             f"Memory-time bound on the run (planned bytes times seconds over the device): "
             f"{bound:.0f} s. Simulated with {args.slots} slots, the big ones first: "
             f"{len(done)} judged within {args.deadline:g} s ({sum(r.whole for r in done)} "
             f"whole); seconds: measured where known, else {args.unmeasured_seconds:g} s "
             f"for those planned at more than a quarter of the device and {usual:.1f} s "
             "(the measured median) for the rest.", "",
             "| problem | float64 floor GiB | kind | planned GiB | whole | measured s |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {t.problem.name} | {_floor_text(q)} | {t.problem.kind} | "
              f"{t.reserve / GIB:.1f} | {'yes' if t.whole else 'no'} | "
              f"{model.seconds.get(t.problem.name, '-')} |"
              for t, q in zip(tickets, plans, strict=True)]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "plan.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:8]))
    return 0
