"""Telling apart the causes that one failing case cannot.

On one case several models often explain a failure: inputs rounded to TF32 or
to fp16 have the same 11-bit significand, and at a short reduction fp16
accumulation rounds no more than either. :func:`discriminate` runs the kernel
on more cases, chosen so that the candidates' behaviours differ, and keeps the
models that explain every one of them:

* **reruns** of the failing case: a result that changes from run to run, by as
  much as it misses the bound, is nondeterminism (noise, a race, state kept
  between calls), which no precision model names;
* **fp16-exact values** (normal range): inputs an fp16 or TF32 multiplier reads
  exactly, so input rounding costs nothing there, while fp16 partial sums and
  bf16 inputs still round;
* **values below fp16's normal range** (the same values times ``2^-20``): fp16
  input rounding loses them, TF32 (fp32's exponent range) keeps them, and fp16
  partial sums underflow;
* **small integers**, sized to the longest reduction ``n`` so that sums reach
  about 2^14 (past 2048, where fp16 partial sums round, and below 65504, where
  they overflow): exact in every format, so a summation in fp32 is exact (the
  bound is 0), while fp16 partial sums are not.

Every case is judged by the oracle under every candidate model (the same sound
bounds as any case); the cause named is the most precise candidate, in the
order of :func:`~numoracle.checking.verdict.candidates`, that explains them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidArgument, UnsupportedCase
from ..oracle.formats import get_format, quantize
from ..oracle.ops import get_op
from ..oracle.precision import PrecisionModel
from ..targets.target import Target
from .check import DEFAULT_TIMEOUT, judge, run_kernel
from .diagnosis import Diagnosis, DiagnosisKind
from .storage_grid import rule_out
from .verdict import OutputVerdict, Verdict, traced_ladder

__all__ = ["discriminate", "Discrimination", "PROBES", "probe_inputs", "RERUNS"]

#: extra runs of the failing case that look for nondeterminism
RERUNS = 3
#: the scale that takes fp16-exact values below fp16's normal range (2^-14)
_BELOW_FP16 = 2.0**-20


#: the sum a small-integer probe aims at: past fp16's 2^11 integers, far below its 65504
_INTEGER_SUM = 2.0**14


def _fp16_values(shape: tuple[int, ...], rng: np.random.Generator, n: int) -> np.ndarray:
    return np.asarray(quantize(rng.standard_normal(shape), "fp16"), dtype=np.float64)


def _below_fp16(shape: tuple[int, ...], rng: np.random.Generator, n: int) -> np.ndarray:
    return _fp16_values(shape, rng, n) * _BELOW_FP16


def _small_integers(shape: tuple[int, ...], rng: np.random.Generator, n: int) -> np.ndarray:
    """Integers in ``[m, 2m)`` with ``n (1.5 m)^2`` about :data:`_INTEGER_SUM` (m from 2
    to 64: exact in bf16 and fp16, products exact in fp32)."""
    m = int(np.clip(np.sqrt(_INTEGER_SUM / max(n, 1)) / 1.5, 2, 64))
    return rng.integers(m, 2 * m, size=shape).astype(np.float64)


#: the cases that tell candidates apart: (name, words for the diagnosis, values from
#: the shape, a generator and the op's longest reduction)
PROBES: tuple[tuple[str, str, Callable[[tuple[int, ...], np.random.Generator, int],
                                       np.ndarray]], ...] = (
    ("fp16-exact", "fp16-exact values", _fp16_values),
    ("below-fp16", "values below fp16's normal range", _below_fp16),
    ("integers", "small integers (exact in every format)", _small_integers),
)


def probe_inputs(case: Any, probe: str, seed: int = 0) -> dict[str, np.ndarray]:
    """The inputs of ``case``'s shapes for one of :data:`PROBES`, made as a case
    makes its inputs (the op's own structure, a KAN layer's knots, applied after,
    every value exact in the storage format); integer inputs (class labels, masks)
    are the case's own."""
    makers = {name: make for name, _, make in PROBES}
    if probe not in makers:
        raise InvalidArgument(f"{probe=} is unknown; use one of {sorted(makers)}")
    op = get_op(case.op)
    fmt = get_format(case.storage)
    rng = np.random.default_rng([seed, case.seed])
    n = max(op.reductions(case.params).values(), default=1)
    arrays = {k: makers[probe](tuple(s), rng, n) for k, s in op.input_shapes(case.params).items()}
    arrays = op.prepare_inputs(arrays, case.params, fmt, rng)
    arrays = {k: np.asarray(quantize(v, fmt), dtype=np.float64) for k, v in arrays.items()}
    integer_inputs = getattr(op, "integer_inputs", None)  # a traced op's labels, masks
    if integer_inputs is not None and integer_inputs(case.params):
        own = case.inputs()  # indices and masks: the case's own (a probe changes values)
        arrays.update({k: np.asarray(own[k]) for k in integer_inputs(case.params)})
    return arrays


@dataclass
class Discrimination:
    """What the extra runs showed.

    ``per_model``: per output, the worst ratio under each candidate model over
    the probe cases (to merge into a run's record, so that
    :meth:`~numoracle.running.runner.TargetResult.effective` sees them);
    ``nondeterministic``: the outputs whose results changed between runs;
    ``probes``: the probe cases run."""

    per_model: dict[str, dict[str, float]] = field(default_factory=dict)
    nondeterministic: list[str] = field(default_factory=list)
    probes: list[str] = field(default_factory=list)


def _varies(verdict: Verdict, target: Target, inputs: Mapping[str, np.ndarray],
            timeout: float | None, isolate: bool, reruns: int) -> dict[str, str]:
    """Per failing output whose results change between runs: a sentence saying
    so; none unless at least one output's runs differ by as much as its result
    misses the bound (then the kernel is nondeterministic, and every failing
    output that varies is named with it)."""
    assert verdict.got is not None
    runs = [verdict.got]
    for _ in range(reruns):
        got, _ = run_kernel(verdict.case, target, inputs, timeout, isolate=isolate)
        if got is None:
            return {}
        runs.append(got)
    bad = [o for o in verdict.outputs.values() if not o.passed and o.diagnosis.kind in
           ("precision", "logic", "algorithm")]
    if not bad:
        return {}
    op = get_op(verdict.case.op)
    claimed = target.precision
    refs = op.reference(inputs, verdict.case.params, claimed, tuple(o.name for o in bad))
    varying, explained = {}, False
    for o in bad:
        stack = np.stack([np.asarray(r[o.name], dtype=np.float64) for r in runs])
        with np.errstate(invalid="ignore", over="ignore"):
            spread = np.max(stack, axis=0) - np.min(stack, axis=0)
            ref = refs[o.name].to_host()
            exact = ref.value if ref.lo is None else ref.value + ref.lo
            err = np.abs(stack[0] - exact)
            bound = ref.bound(claimed.probabilistic)
            failing = np.isfinite(err) & ~(err < bound)
        if not bool(np.any(spread > 0)):
            continue
        # the runs differ by as much as the result misses the bound
        explained |= bool(failing.any()) and bool(np.all((err <= bound + spread)[failing]))
        varying[o.name] = (
            f"exceeds {claimed.name}, but its result changes from run to run of the same "
            f"case ({int(np.count_nonzero(spread))} of {spread.size} elements, up to "
            f"{_ulps(stack, claimed)} apart) by as much as it misses the bound: "
            "nondeterminism (noise, a race, or state kept between calls), which no "
            "precision model explains")
    return varying if explained else {}


def _ulps(stack: np.ndarray, model: PrecisionModel) -> str:
    """The largest difference between runs, in units in the last place of the storage format."""
    fmt = model.storage
    top = np.max(np.abs(stack), axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ulp = np.exp2(np.maximum(np.floor(np.log2(np.where(top > 0, top, 1.0))), fmt.emin)
                      - fmt.t)
        n = np.nanmax(np.where(top > 0, (np.max(stack, 0) - np.min(stack, 0)) / ulp, 0.0))
    return f"{n:.3g} ulp" if np.isfinite(n) else "a non-finite amount"


def _models_of(d: Diagnosis) -> list[PrecisionModel]:
    return ([d.model] if d.model is not None else []) + list(d.alternatives)


def discriminate(verdict: Verdict, target: Target, *,
                 inputs: Mapping[str, np.ndarray] | None = None,
                 timeout: float | None = DEFAULT_TIMEOUT, isolate: bool = False,
                 reruns: int = RERUNS) -> Discrimination:
    """Run the cases that tell the candidate causes of ``verdict``'s failure
    apart, and rewrite the diagnoses of its failing outputs with the cause found.

    Parameters
    ----------
    verdict : Verdict
        A failing verdict with outputs (a kernel error is left as it is).
    target : Target
        The kernel that gave it.
    inputs : dict of arrays, optional
        The case's inputs, where they are not its generated ones.
    timeout, isolate
        As for :func:`~numoracle.checking.check.run_kernel`.
    reruns : int
        Extra runs of the failing case that look for nondeterminism.

    Returns
    -------
    Discrimination
        The probes' ratios per output and model, the nondeterministic outputs.
    """
    found = Discrimination()
    if verdict.passed or verdict.got is None or not verdict.outputs:
        return found
    case = verdict.case
    ins = case.inputs() if inputs is None else dict(inputs)
    claimed = target.precision
    if reruns > 0:
        for name, text in _varies(verdict, target, ins, timeout, isolate, reruns).items():
            verdict.outputs[name].diagnosis = Diagnosis(DiagnosisKind.NONDETERMINISTIC, text)
            found.nondeterministic.append(name)
    if found.nondeterministic:
        return found  # other cases judge a kernel that changes its results no better
    ambiguous = {o.name: _models_of(o.diagnosis) for o in verdict.outputs.values()
                 if not o.passed and o.diagnosis.ambiguous}
    if not ambiguous:
        return found
    failed: dict[str, dict[str, str]] = {name: {} for name in ambiguous}
    for probe, words, _ in PROBES:
        try:
            pin = probe_inputs(case, probe)
        except (InvalidArgument, UnsupportedCase):
            continue
        got, _ = run_kernel(case, target, pin, timeout, isolate=isolate)
        if got is None:
            continue
        try:
            outs = judge(case, claimed, pin, got, with_diagnosis=True)
        except (InvalidArgument, UnsupportedCase):
            continue
        found.probes.append(probe)
        for name, o in outs.items():
            seen = found.per_model.setdefault(name, {})
            for m, r in o.per_model.items():
                seen[m] = max(seen.get(m, 0.0), r)
            for m in ambiguous.get(name, ()):
                if not o.per_model.get(m.name, np.inf) < 1.0:
                    failed[name].setdefault(m.name, words)
    if not found.probes:
        return found
    tried = ", ".join(w for p, w, _ in PROBES if p in found.probes)
    for name, models in ambiguous.items():
        o = verdict.outputs[name]
        # what the first case's values ruled out (a narrower storage's grid), said again
        _, grid = rule_out(verdict.got[name], claimed,
                           [m for n, m in traced_ladder(claimed)
                            if o.per_model.get(n, np.inf) < 1.0])
        o.diagnosis = _resolved(claimed, models, failed[name], tried, o, grid)
    return found


def _resolved(claimed: PrecisionModel, models: list[PrecisionModel],
              failed: Mapping[str, str], tried: str, out: OutputVerdict,
              grid: str = "") -> Diagnosis:
    """The diagnosis of an output that several models explained, after the probes
    (``grid``: the models the result's values ruled out, said at the end)."""
    alive = [m for m in models if m.name not in failed]
    listed = ", ".join(m.name for m in models)
    if not alive:
        why = "; ".join(f"{m} on {w}" for m, w in failed.items())
        return Diagnosis(DiagnosisKind.LOGIC,
                         f"exceeds {claimed.name}; {listed} explained the first case, "
                         f"but each exceeds its bound on a case that tells them apart ({why}): "
                         "no precision model explains the kernel, a logic bug")
    cause, looser = alive[0], alive[1:]
    ruled = ", ".join(f"{m} (exceeded on {w})" for m, w in failed.items())
    text = (f"exceeds {claimed.name}; consistent with {cause.name} ({cause.describe()}), "
            f"found on cases that tell {listed} apart ({tried})")
    if ruled:
        text += f": they rule out {ruled}"
    if looser:
        text += f"; {', '.join(m.name for m in looser)} fit them too, ranked after {cause.name}"
    if grid:
        text += f"; {grid}"
    return Diagnosis(DiagnosisKind.PRECISION, text, model=cause)
