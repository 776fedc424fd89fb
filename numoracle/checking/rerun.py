"""Running a case twice: legitimate nondeterminism or a race?

Two runs of the same reduction in two orders differ by at most
``2 gamma_h(u_acc) S`` (DESIGN §2, "two runs / two orders"), with ``h`` the
reduction's height and ``S`` the sum of the magnitudes of its terms. A target
whose reduction order changes between runs (atomics, split-K) stays within that
yardstick; one that loses updates, reads stale buffers or accumulates across
calls leaves it. A target that claims deterministic runs must be bit-identical.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..cases.case import Case
from ..oracle.ops import get_op
from ..oracle.precision import gamma
from ..targets.target import Target
from .check import DEFAULT_TIMEOUT, run_kernel

__all__ = ["RerunVerdict", "check_reruns"]


@dataclass
class RerunVerdict:
    """What repeated runs of one case showed."""

    target: str
    case: Case
    runs: int
    passed: bool
    deterministic: bool
    #: per output: the worst |run_i - run_0| / yardstick (0 when bit-identical)
    ratios: dict[str, float] = field(default_factory=dict)
    diagnosis: str = ""


def _yardstick(mag: np.ndarray, n: int | np.ndarray, target: Target) -> np.ndarray:
    model = target.precision
    h = model.order.height(np.maximum(np.asarray(n), 1)) + 1  # + the product's rounding
    return 2.0 * gamma(h, model.acc_unit()) * mag + 2.0 * (h + 1) * model.accumulate.tiny


def check_reruns(case: Case, target: Target, *, runs: int = 3,
                 timeout: float = DEFAULT_TIMEOUT) -> RerunVerdict:
    """Run ``case`` on ``target`` ``runs`` times and compare every run with the first.

    Bit-identical results pass; otherwise each element's difference is divided
    by the two-order yardstick ``2 gamma_h(u_acc) S`` (``S`` and ``h`` from the
    oracle's reference), and a ratio of 1 or more is a race or stale state. A
    target whose model claims ``deterministic_runs`` must be bit-identical.
    """
    inputs = case.inputs()
    results: list[dict[str, np.ndarray]] = []
    for _ in range(runs):
        got, error = run_kernel(case, target, inputs, timeout)
        if got is None:
            return RerunVerdict(target.name, case, runs, False, target.precision.deterministic_runs,
                                diagnosis=str(error or "the kernel returned nothing"))
        results.append(got)
    first = results[0]
    refs = get_op(case.op).reference(inputs, case.params, target.precision, tuple(first))
    verdict = RerunVerdict(target.name, case, runs, True, target.precision.deterministic_runs)
    problems = []
    for name, base in first.items():
        ref = refs[name]
        stick = _yardstick(np.asarray(ref.mag), ref.n, target)
        worst = 0.0
        for other in results[1:]:
            same = (other[name] == base) | (np.isnan(other[name]) & np.isnan(base))
            if same.all():
                continue
            with np.errstate(invalid="ignore", divide="ignore"):
                ratio = np.where(same, 0.0, np.abs(other[name] - base) / stick)
            ratio = np.nan_to_num(ratio, nan=np.inf)
            worst = max(worst, float(ratio.max()))
            if target.precision.deterministic_runs:
                problems.append(f"{name} differs between runs although the target claims "
                                "deterministic runs")
            elif worst >= 1.0:
                ix = tuple(int(i) for i in np.unravel_index(int(np.argmax(ratio)), ratio.shape))
                problems.append(f"{name} differs between runs by {worst:.3g} times the two-order "
                                f"yardstick at {ix}: a race, lost update or stale state")
        verdict.ratios[name] = worst
    verdict.passed = not problems
    if problems:
        verdict.diagnosis = "; ".join(dict.fromkeys(problems))
    elif any(verdict.ratios.values()):
        verdict.diagnosis = ("runs differ within the two-order yardstick: legitimate "
                             "nondeterminism (reduction order)")
    else:
        verdict.diagnosis = "bit-identical runs"
    return verdict
