"""Every output judged: kernels that corrupt one output, and how soon a check catches them.

A bound that never fails is a stub. For an op, this module takes a correct
kernel's outputs on drawn cases and corrupts exactly one output in one way:

* ``constant``: every element replaced by 7.0;
* ``bounds``: a few elements moved three bounds away from the reference (one
  unit in the last place where the bound is 0, the exact regime);
* ``nan``: a few elements made NaN where the reference and the bound are finite.

Each corrupted result is judged, and :func:`cases_to_catch` says after how many
cases the corrupted output was one that failed: end to end (handed to
:func:`~numoracle.checking.check.check_case` through a kernel that returns it:
the output is taken, brought back and judged), or against the reference
computed once per case (:func:`~numoracle.checking.verdict.compare`, what
judges every output). The ops come from the
registry (:func:`numoracle.oracle.ops.all_ops`), so an op added later is covered
by the same test; ``python -m benchmarks corruption`` writes the table of ops ×
outputs × corruptions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cases.case import Case
from ..errors import InvalidArgument, UnsupportedCase
from ..oracle.formats import quantize
from ..oracle.ops import get_op
from ..oracle.precision import PrecisionModel
from ..oracle.tracked import Tracked
from ..targets.target import Target
from .check import check_case, run_kernel
from .verdict import compare

__all__ = ["CORRUPTIONS", "Trial", "corrupt", "prepare", "cases_to_catch"]

#: the ways one output is corrupted
CORRUPTIONS = ("constant", "bounds", "nan")
#: elements a ``bounds`` or ``nan`` corruption changes
FEW = 3
#: the constant of a ``constant`` corruption
CONSTANT = 7.0


@dataclass
class Trial:
    """One case with a correct kernel's outputs and the reference under the claimed model."""

    case: Case
    inputs: dict[str, np.ndarray]
    got: dict[str, np.ndarray]
    reference: dict[str, Tracked]


def prepare(cases: list[Case], correct: Target) -> list[Trial]:
    """The trials of ``cases``: the correct kernel run and the reference computed
    once per case (cases the oracle does not judge, or where the kernel gives no
    outputs, are left out)."""
    op = get_op(correct.op)
    out = []
    for case in cases:
        inputs = case.inputs()
        got, _ = run_kernel(case, correct, inputs)
        if got is None:
            continue
        try:
            ref = op.reference(inputs, case.params, correct.precision, tuple(got))
        except UnsupportedCase:
            continue
        out.append(Trial(case, inputs, got, {k: v.to_host() for k, v in ref.items()}))
    return out


def _away(ref: np.ndarray, bound: np.ndarray, model: PrecisionModel) -> np.ndarray:
    """Values of the storage format outside ``ref +- bound``: three bounds above
    (one unit in the last place above where the bound is 0)."""
    up = np.where(bound > 0, ref + 3.0 * bound, ref)
    q = np.asarray(quantize(up, model.storage), dtype=np.float64)
    for _ in range(4):  # rounding may fall back inside: step up in the storage format
        inside = ~(np.abs(q - ref) > bound)
        if not inside.any():
            break
        step = np.maximum(np.abs(q), model.storage.tiny) * 2.0 ** -model.storage.t
        q = np.where(inside, np.asarray(quantize(q + step, model.storage)), q)
    return q


def corrupt(trial: Trial, output: str, how: str, model: PrecisionModel,
            seed: int = 0) -> dict[str, np.ndarray] | None:
    """The correct outputs of ``trial`` with ``output`` corrupted ``how`` (one of
    :data:`CORRUPTIONS`); None when the case has no element to corrupt that way
    (every element unjudged)."""
    if how not in CORRUPTIONS:
        raise InvalidArgument(f"{how=} is not a corruption; use one of {CORRUPTIONS}")
    got = {k: np.array(v, dtype=np.float64) for k, v in trial.got.items()}
    ref = trial.reference[output]
    value = ref.value if ref.lo is None else ref.value + ref.lo
    bound = ref.bound(model.probabilistic)
    if how == "constant":
        got[output] = np.full_like(got[output], CONSTANT)
        return got
    with np.errstate(invalid="ignore"):
        judged = np.isfinite(value) & np.isfinite(bound)
    where = np.flatnonzero(judged.reshape(-1))
    if where.size == 0:
        return None
    pick = np.random.default_rng(seed).choice(where, size=min(FEW, where.size), replace=False)
    flat = got[output].reshape(-1)
    if how == "nan":
        flat[pick] = np.nan
    else:
        flat[pick] = _away(value.reshape(-1)[pick], bound.reshape(-1)[pick], model)
    got[output] = flat.reshape(got[output].shape)
    return got


def _returning(op: str, model: PrecisionModel, outputs: Mapping[str, np.ndarray]) -> Target:
    """A NumPy kernel that returns ``outputs`` (in the storage format) whatever its inputs."""
    dtype = model.storage.numpy_dtype() if model.storage.name in ("fp32", "fp64") else None
    if dtype is None:
        raise InvalidArgument(f"a corrupted kernel needs fp32 or fp64 storage, not "
                              f"{model.storage.name!r}; give a correct target of one of them")
    fixed = {k: np.ascontiguousarray(v, dtype=dtype) for k, v in outputs.items()}

    def kernel(**_: Any) -> dict[str, np.ndarray]:
        return {k: v.copy() for k, v in fixed.items()}

    return Target(name="corrupted", op=op, backend="numpy", precision=model, fn=kernel,
                  outputs=tuple(fixed))


def cases_to_catch(trials: list[Trial], output: str, how: str, model: PrecisionModel, *,
                   end_to_end: bool = True) -> int | None:
    """After how many trials that have ``output`` a kernel corrupting only it ``how``
    failed with ``output`` among the failing outputs; None when no trial caught
    it. ``end_to_end=False`` judges the corrupted output against the trial's
    reference directly (no kernel call, no second reference)."""
    i = 0
    for trial in trials:
        if output not in trial.got:
            continue
        i += 1
        bad = corrupt(trial, output, how, model, seed=i)
        if bad is None:
            continue
        if end_to_end:
            target = _returning(trial.case.op, model, bad)
            v = check_case(trial.case, target, inputs=trial.inputs, update_first=False)
            caught = not v.passed and v.error is None and not v.outputs[output].passed
        else:
            spread = model.nan_spreads and not all(bool(np.isfinite(a).all())
                                                   for a in trial.inputs.values())
            caught = not compare(output, bad[output], trial.reference[output],
                                 probabilistic=model.probabilistic,
                                 nan_may_spread=spread).passed
        if caught:
            return i
    return None
