"""Parallel against sequential: is a parallel kernel equivalent to its sequential
version (seed 004's acceptance test, DESIGN §2 "two runs / two orders")?

A parallel backward pass computes per-cell gradients independently and merges them
into shared accumulators. Where it keeps the sequential merge order (a
deterministic merge in cell order) its results must be **bit-identical** to the
sequential version's. Where the order varies (atomics) the two may differ by
rounding only: both lie within the oracle's deterministic bound of the exact
result under any order, so they differ by at most **twice that bound** per
element. For an output that is one reduction of ``n`` terms this is the two-order
yardstick ``2 gamma_{n-1}(u) S`` (plus the product's rounding and underflow slack);
for an output composed of many reductions (a gradient accumulated over cells and
steps, then through a softmax) it is the same yardstick carried through the
composition, which the oracle's bound already does. A race that loses updates
leaves it either way.

Which claim a target makes comes from its precision model: ``order`` sequential
with ``deterministic_runs`` claims the sequential merge (bit-identical); anything
else claims only some order.

Examples
--------
>>> import numpy as np
>>> from numoracle.oracle.precision import get_model
>>> from numoracle.oracle.tracked import exact, matmul
>>> x = np.array([[1.0, 2.0**-30, -1.0]])
>>> ref = {"y": matmul(exact(x), exact(np.ones((3, 1))), get_model("fp32"))}
>>> compare({"y": np.array([[0.0]])}, {"y": np.array([[2.0**-30]])}, ref, get_model("fp32"),
...         sequential=False).passed
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cases.case import Case
from ..oracle.ops import get_op
from ..oracle.precision import PrecisionModel
from ..oracle.tracked import Tracked
from ..targets.target import Target
from .check import DEFAULT_TIMEOUT, run_kernel

__all__ = ["EquivalenceVerdict", "check_equivalence", "compare", "claims_sequential"]


@dataclass
class EquivalenceVerdict:
    """What comparing a parallel kernel with its sequential version showed."""

    target: str
    baseline: str
    sequential: bool
    passed: bool
    bit_identical: bool
    #: per output: the worst ``|parallel - sequential| / (2 bound)`` (0 when identical)
    ratios: dict[str, float] = field(default_factory=dict)
    #: per output: elements that differ at all
    differing: dict[str, int] = field(default_factory=dict)
    diagnosis: str = ""
    case: Case | None = None


def claims_sequential(model: PrecisionModel) -> bool:
    """Whether ``model`` claims the sequential merge order (bit-identical results)."""
    return model.order.kind == "sequential" and bool(model.deterministic_runs)


def compare(parallel: Mapping[str, np.ndarray], sequential_out: Mapping[str, np.ndarray],
            refs: Mapping[str, Tracked], model: PrecisionModel, *, sequential: bool,
            target: str = "parallel", baseline: str = "sequential") -> EquivalenceVerdict:
    """Compare outputs of a parallel kernel with those of its sequential version.

    Parameters
    ----------
    parallel, sequential_out : mapping of str to ndarray
        The two kernels' outputs by name (host arrays).
    refs : mapping of str to Tracked
        The oracle's reference of each output under ``model`` (its ``det`` is the
        bound of one run in any order).
    sequential : bool
        True where the parallel kernel claims the sequential merge order: then any
        difference fails.
    """
    verdict = EquivalenceVerdict(target, baseline, sequential, True, True)
    problems = []
    for name, base in sequential_out.items():
        if name not in parallel:
            problems.append(f"{name} missing from {target}'s outputs")
            continue
        got = np.asarray(parallel[name], dtype=np.float64)
        base = np.asarray(base, dtype=np.float64)
        same = (got == base) | (np.isnan(got) & np.isnan(base))
        verdict.differing[name] = int((~same).sum())
        if same.all():
            verdict.ratios[name] = 0.0
            continue
        verdict.bit_identical = False
        stick = 2.0 * np.asarray(refs[name].det, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(same, 0.0, np.abs(got - base) / stick)
        # an unjudged element (NaN or infinite bound) says nothing
        ratio = np.where(np.isfinite(stick), np.nan_to_num(ratio, nan=np.inf), 0.0)
        worst = float(ratio.max())
        verdict.ratios[name] = worst
        ix = tuple(int(i) for i in np.unravel_index(int(np.argmax(ratio)), ratio.shape))
        if sequential:
            problems.append(f"{name} differs from {baseline} in {verdict.differing[name]} of "
                            f"{same.size} elements although {target} claims the sequential "
                            f"merge order (worst at {ix}: {worst:.3g} times the two-order "
                            "yardstick)")
        elif worst >= 1.0:
            problems.append(f"{name} differs from {baseline} by {worst:.3g} times the two-order "
                            f"yardstick at {ix}: a race or lost update, not a change of order")
    verdict.passed = not problems
    if problems:
        verdict.diagnosis = "; ".join(problems)
    elif verdict.bit_identical:
        verdict.diagnosis = "bit-identical to the sequential version"
    else:
        verdict.diagnosis = ("differs from the sequential version within the two-order "
                             "yardstick: a change of summation order")
    return verdict


def check_equivalence(case: Case, target: Target, baseline: Target, *,
                      timeout: float = DEFAULT_TIMEOUT) -> EquivalenceVerdict:
    """Run ``case`` on a parallel ``target`` and on its sequential version
    ``baseline`` and compare (:func:`compare`): bit-identical where ``target``
    claims the sequential merge order (:func:`claims_sequential`), within twice the
    oracle's bound under ``target``'s model elsewhere."""
    inputs = case.inputs()
    seq = claims_sequential(target.precision)
    outs = []
    for t in (target, baseline):
        got, error = run_kernel(case, t, inputs, timeout)
        if got is None:
            return EquivalenceVerdict(target.name, baseline.name, seq, False, False,
                                      diagnosis=f"{t.name}: {error}", case=case)
        outs.append(got)
    names = tuple(k for k in outs[1] if k in outs[0])
    refs = get_op(case.op).reference(inputs, case.params, target.precision, names)
    verdict = compare(outs[0], {k: outs[1][k] for k in names}, refs, target.precision,
                      sequential=seq, target=target.name, baseline=baseline.name)
    verdict.case = case
    return verdict


def _describe(v: EquivalenceVerdict) -> dict[str, Any]:
    """A JSON-ready summary of a verdict."""
    return {"target": v.target, "baseline": v.baseline, "sequential": v.sequential,
            "passed": v.passed, "bit_identical": v.bit_identical, "ratios": v.ratios,
            "differing": v.differing, "diagnosis": v.diagnosis,
            "case": None if v.case is None else v.case.to_dict()}
