"""Verdicts: a kernel's outputs judged against the oracle's bounds.

Each element gets the ratio ``err / bound`` (``< 1`` passes; where the bound
is 0, the exact regime, any error at all fails). Non-finite values are judged
by placement first: NaN or Inf where the reference has none fails whatever
the ratios say.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..oracle.formats import FORMATS
from ..oracle.precision import (
    DEVICE_LANES,
    PRESETS,
    STANDARD_MODELS,
    PrecisionModel,
    device_order,
    gamma,
)
from ..oracle.tracked import Tracked
from ..oracle.transforms import ALGORITHMS, TRANSFORMS
from ..oracle.xp import array_module
from .diagnosis import Diagnosis, DiagnosisKind, Fault, failure_class, most_specific
from .message import format_verdict
from .ratios import max_median, nonfinite_parts, part, ratios, rows, sentence
from .storage_grid import on_grid, rule_out

__all__ = ["ElementReport", "OutputVerdict", "Verdict", "candidates", "compare", "diagnose",
           "explain", "explaining_algorithms", "ladder_for", "advise", "FLUSH_ADVICE",
           "traced_ladder", "TRACED_RUNGS", "zeros_pass", "degenerate_order",
           "degenerate_note",
           "Diagnosis", "ALGORITHM_WORDS"]

WORST_SHOWN = 5
#: the candidate model that allows every algorithm class (see :func:`candidates`)
TRANSFORM_SUFFIX = "+winograd/fft"
#: the candidate model that lets subnormal inputs be read as zero
FLUSHED_SUFFIX = "+flushed-subnormals"
_TRANSFORM_WORDS = "a Winograd or FFT algorithm at the claimed formats"
#: how a diagnosis names each transform algorithm class
ALGORITHM_WORDS = {"winograd": "a Winograd algorithm", "fft": "an FFT algorithm"}


@dataclass(frozen=True)
class ElementReport:
    """One element of an output: where, what was expected, what came back."""

    index: tuple[int, ...]
    reference: float
    got: float
    error: float
    bound: float
    ratio: float
    n: int
    magnitude: float


@dataclass
class OutputVerdict:
    """The judgement of one output array."""

    name: str
    shape: tuple[int, ...]
    n: int
    passed: bool
    mismatched: int
    worst_ratio: float
    median_ratio: float
    worst_ratio_det: float
    worst_ratio_prob: float
    median_ratio_det: float
    median_ratio_prob: float
    exact: bool
    nonfinite: str | None = None
    worst: list[ElementReport] = field(default_factory=list)
    diagnosis: Diagnosis = field(default_factory=Diagnosis)
    per_model: dict[str, float] = field(default_factory=dict)
    #: what the verdict assumed beyond the claim (an order a degenerate claim left open)
    note: str = ""

    @property
    def count(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1


@dataclass
class Verdict:
    """The judgement of one case on one target."""

    case: Any
    target: str
    op: str
    precision: str
    passed: bool
    outputs: dict[str, OutputVerdict] = field(default_factory=dict)
    #: why the kernel gave no outputs (a :class:`~numoracle.checking.diagnosis.Fault`,
    #: or a sentence)
    error: Fault | str | None = None
    repro: str | None = None
    seconds: float = 0.0
    got: dict[str, np.ndarray] | None = field(default=None, repr=False)
    #: the engine or algorithm the library used, where its target can tell
    #: (:attr:`~numoracle.targets.target.Target.engine`); recorded on failures
    engine: str | None = None
    #: the precision model claimed (``precision`` is its name)
    model: PrecisionModel | None = None
    #: calls this process had made to the target before this case's (a failure
    #: that needs them shows only after as many: a replay repeats the case)
    calls_before: int = 0

    @property
    def worst_ratio(self) -> float:
        if self.error is not None:
            return float("inf")
        return max((o.worst_ratio for o in self.outputs.values()), default=0.0)

    @property
    def cause(self) -> tuple[str, Diagnosis] | None:
        """The failing output whose diagnosis is the most specific (a logic bug in
        any output makes the failure a logic bug), with its diagnosis; None for a
        pass or a kernel error."""
        return most_specific((o.name, o.diagnosis) for o in self.outputs.values()
                             if not o.passed)

    @property
    def failure_class(self) -> str:
        """The class of the failure (:func:`~numoracle.checking.diagnosis.failure_class`):
        the fault's, or the most specific failing output's; ``pass`` for a pass."""
        if self.passed:
            return "pass"
        return failure_class(self.error, (o.diagnosis for o in self.outputs.values()
                                          if not o.passed))

    @property
    def diagnosis(self) -> str:
        """The headline: the error, else the most specific failing output's
        diagnosis, else the passing output of the largest ratio's."""
        if self.error is not None:
            return str(self.error)
        cause = self.cause
        if cause is not None:
            return f"{cause[0]}: {cause[1]}"
        pick = max(self.outputs.values(), key=lambda o: o.worst_ratio, default=None)
        return "" if pick is None else f"{pick.name}: {pick.diagnosis}"

    def message(self) -> str:
        """numpy.testing-style report: criterion, non-finite placement, counts,
        worst elements, diagnosis, then the repro and how to replay it."""
        return format_verdict(self)


def _nonfinite(got: Any, ref: Any, bound: Any,
               nan_may_spread: bool = False) -> tuple[Any, str | None]:
    """Elements whose NaN/Inf placement is wrong, and a sentence about them
    (:func:`~numoracle.checking.ratios.nonfinite_parts`)."""
    bad, parts = nonfinite_parts(got, ref, bound, nan_may_spread)
    return bad, sentence(parts)


def _at(a: Any, ix: tuple[int, ...]) -> float:
    """Element ``ix`` of ``a`` as a float (a 0-d result may be a NumPy scalar)."""
    return float(a[ix]) if getattr(a, "ndim", 0) else float(a)


#: an output of more elements than this is compared a piece of whole rows at a time
#: (:func:`compare`), each piece at most this many elements
COMPARE_PIECE = 1 << 24


def compare(name: str, got: np.ndarray, ref: Tracked, *,
            probabilistic: bool = False, nan_may_spread: bool = False) -> OutputVerdict:
    """Judge ``got`` (an array of any dtype, on the host or where the reference is)
    against a tracked reference (``nan_may_spread``: see :func:`_nonfinite`).

    The comparison runs where the reference lives: for a reference on a GPU
    (CuPy), ``got`` goes to the device (one transfer) rather than the
    reference's five arrays to the host; only scalars and the worst elements
    come back. An output of more than :data:`COMPARE_PIECE` elements is compared a
    piece of whole rows at a time: its errors, bounds and masks exist a piece at
    once, the two ratio arrays whole (their medians, by
    :func:`~numoracle.checking.ratios.kth_smallest` past
    :data:`~numoracle.checking.ratios.SELECT_LEAST` elements: no sorted copy)."""
    xp = array_module(ref.value)
    if getattr(got, "ndim", 0) and got.size > COMPARE_PIECE and \
            len(list(rows(tuple(got.shape), COMPARE_PIECE))) > 1:
        return _compare_in_pieces(name, xp.asarray(got), ref, xp, probabilistic,
                                  nan_may_spread)
    value = ref.value
    got = xp.asarray(got, dtype=xp.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = got - value
        if ref.lo is not None:
            diff = diff - ref.lo
        err = xp.abs(diff)
    det_b, prob_b = ref.bound(False), ref.bound(True)
    # a finite sum has no NaN or Inf among its terms (one read of each array; a sum
    # that overflows sends the check to the elementwise test)
    with np.errstate(over="ignore", invalid="ignore"):
        all_finite = all(bool(xp.isfinite(xp.sum(a))) for a in (value, got))
    if not all_finite:
        finite = xp.isfinite(value) & xp.isfinite(got)
        all_finite = bool(finite.all())
    if all_finite:  # no NaN or Inf to place: the masks below would all be empty
        nonfinite = None
        r_det, r_prob = ratios(err, det_b), ratios(err, prob_b)
        exact = not bool(det_b.any())
    else:
        bad_place, nonfinite = _nonfinite(got, value, det_b, nan_may_spread)
        err_f = xp.where(finite, err, 0.0)
        r_det = xp.where(finite, ratios(err_f, det_b), 0.0)
        r_prob = xp.where(finite, ratios(err_f, prob_b), 0.0)
        exact = bool(xp.all(det_b[xp.isfinite(value)] == 0))
    ratio = r_prob if probabilistic else r_det
    if nonfinite is not None:
        ratio = xp.where(bad_place, xp.inf, ratio)
    failing = ratio >= 1.0
    bound = prob_b if probabilistic else det_b
    flat_r = ratio.reshape(-1)
    top = xp.argpartition(-flat_r, min(WORST_SHOWN, flat_r.size) - 1)[:WORST_SHOWN] \
        if flat_r.size > WORST_SHOWN else xp.arange(flat_r.size)
    order = _host(top[xp.argsort(-flat_r[top], kind="stable")])
    worst = _worst(order, ratio, value, got, ref, lambda ix: _at(err, ix),
                   lambda ix: _at(bound, ix))
    worst_det, median_det = max_median(xp, r_det)
    worst_prob, median_prob = max_median(xp, r_prob)
    if nonfinite is None:  # the ratios judged are one of the two, unchanged
        worst_ratio, median_ratio = (worst_prob, median_prob) if probabilistic \
            else (worst_det, median_det)
    else:
        worst_ratio, median_ratio = max_median(xp, ratio)
    return OutputVerdict(
        name=name, shape=tuple(got.shape), n=ref.max_n, passed=not bool(failing.any()),
        mismatched=int(failing.sum()), worst_ratio=worst_ratio, median_ratio=median_ratio,
        worst_ratio_det=worst_det, worst_ratio_prob=worst_prob,
        median_ratio_det=median_det, median_ratio_prob=median_prob,
        exact=exact, nonfinite=nonfinite, worst=worst,
    )


def _worst(order: Any, ratio: Any, value: Any, got: Any, ref: Tracked,
           err_at: Callable[[tuple[int, ...]], float],
           bound_at: Callable[[tuple[int, ...]], float]) -> list[ElementReport]:
    """The worst elements' reports, at the flat indices ``order`` (worst first; after
    the first, those of ratio 0 are left out)."""
    worst: list[ElementReport] = []
    for flat in order:
        ix = tuple(int(i) for i in np.unravel_index(int(flat), ratio.shape)) if ratio.ndim \
            else ()
        if _at(ratio, ix) == 0 and worst:
            break
        worst.append(ElementReport(ix, _at(value, ix), _at(got, ix), err_at(ix),
                                   bound_at(ix), _at(ratio, ix), ref.n_at(ix),
                                   _at(ref.mag, ix)))
    return worst


def _compare_in_pieces(name: str, got: Any, ref: Tracked, xp: Any, probabilistic: bool,
                       nan_may_spread: bool) -> OutputVerdict:
    """:func:`compare` of a large output a piece of whole rows at a time: the same
    verdict, with its errors, bounds and masks a piece at once (see :func:`compare`)."""
    shape = tuple(got.shape)
    value, lo = ref.value, ref.lo
    r_det, r_prob = xp.empty(shape, dtype=xp.float64), xp.empty(shape, dtype=xp.float64)
    bad_place = None
    found: dict[str, list[Any]] = {}
    any_det = any_det_finite = False
    all_finite = True
    for i0, i1 in rows(shape, COMPARE_PIECE):
        g = xp.asarray(got[i0:i1], dtype=xp.float64)
        v = part(value, shape, i0, i1)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = g - v
            if lo is not None:
                diff = diff - part(lo, shape, i0, i1)
            err = xp.abs(diff)
        del diff
        det_b = part(ref.det, shape, i0, i1) + part(ref.ref_err, shape, i0, i1)
        prob_b = part(ref.prob, shape, i0, i1) + part(ref.ref_err, shape, i0, i1)
        finite = xp.isfinite(v) & xp.isfinite(g)
        det_here = bool(det_b.any())
        any_det |= det_here
        if bool(finite.all()):
            any_det_finite |= det_here
            r_det[i0:i1], r_prob[i0:i1] = ratios(err, det_b), ratios(err, prob_b)
            continue
        all_finite = False
        bad, parts = nonfinite_parts(g, v, det_b, nan_may_spread)
        for what, count, first in parts:
            seen = found.setdefault(what, [0, (first[0] + i0, *first[1:])])
            seen[0] += count
        if parts:
            if bad_place is None:
                bad_place = xp.zeros(shape, dtype=bool)
            bad_place[i0:i1] = bad
        any_det_finite |= bool(xp.any(xp.broadcast_to(det_b, g.shape)[xp.isfinite(
            xp.broadcast_to(v, g.shape))] != 0))
        err_f = xp.where(finite, err, 0.0)
        r_det[i0:i1] = xp.where(finite, ratios(err_f, det_b), 0.0)
        r_prob[i0:i1] = xp.where(finite, ratios(err_f, prob_b), 0.0)
    nonfinite = sentence([(w, c, f) for w, (c, f) in found.items()])
    exact = not (any_det if all_finite else any_det_finite)
    ratio = r_prob if probabilistic else r_det
    if bad_place is not None:
        ratio = xp.where(bad_place, xp.inf, ratio)
    mismatched = int(xp.count_nonzero(ratio >= 1.0))
    det_all = xp.broadcast_to(ref.det, shape)
    prob_all = xp.broadcast_to(ref.prob, shape)
    err_all = xp.broadcast_to(ref.ref_err, shape)
    lo_all = None if lo is None else xp.broadcast_to(lo, shape)

    def err_at(ix: tuple[int, ...]) -> float:
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.float64(_at(got, ix)) - np.float64(_at(value, ix))
            if lo_all is not None:
                d = d - np.float64(_at(lo_all, ix))
            return float(abs(d))

    def bound_at(ix: tuple[int, ...]) -> float:
        r = prob_all if probabilistic else det_all
        with np.errstate(invalid="ignore", over="ignore"):
            return float(np.float64(_at(r, ix)) + np.float64(_at(err_all, ix)))
    worst = _worst(_top_in_pieces(xp, ratio), ratio, value, got, ref, err_at, bound_at)
    worst_det, median_det = max_median(xp, r_det)
    worst_prob, median_prob = max_median(xp, r_prob)
    if bad_place is None:
        worst_ratio, median_ratio = (worst_prob, median_prob) if probabilistic \
            else (worst_det, median_det)
    else:
        worst_ratio, median_ratio = max_median(xp, ratio)
    return OutputVerdict(
        name=name, shape=shape, n=ref.max_n, passed=mismatched == 0,
        mismatched=mismatched, worst_ratio=worst_ratio, median_ratio=median_ratio,
        worst_ratio_det=worst_det, worst_ratio_prob=worst_prob,
        median_ratio_det=median_det, median_ratio_prob=median_prob,
        exact=exact, nonfinite=nonfinite, worst=worst,
    )


def _top_in_pieces(xp: Any, ratio: Any) -> np.ndarray:
    """The flat indices of the :data:`WORST_SHOWN` largest ratios, largest first
    (NaN last), each piece's largest found on its own and merged on the host."""
    values, where = [], []
    per_row = int(np.prod(ratio.shape[1:], dtype=np.int64))
    for i0, i1 in rows(tuple(ratio.shape), COMPARE_PIECE):
        flat = ratio[i0:i1].reshape(-1)
        top = xp.argpartition(-flat, WORST_SHOWN - 1)[:WORST_SHOWN] \
            if flat.size > WORST_SHOWN else xp.arange(flat.size)
        values.append(_host(flat[top]))
        where.append(_host(top) + i0 * per_row)
    v, w = np.concatenate(values), np.concatenate(where)
    return w[np.argsort(-v, kind="stable")][:WORST_SHOWN]


def zeros_pass(ref: Tracked) -> bool:
    """Whether an all-zeros result would pass: the bound is degenerate (every
    finite exact value within its bound of 0, some value not 0)."""
    ref = ref.to_host()
    value = np.asarray(ref.value if ref.lo is None else ref.value + ref.lo)
    bound = np.asarray(ref.bound(False))
    finite = np.isfinite(value)
    if not bool(np.any(value[finite] != 0)):
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.all(~finite | (np.abs(value) < bound)))


def degenerate_order(model: PrecisionModel, n: int) -> PrecisionModel | None:
    """Where ``model``'s order leaves an ``n``-term reduction no useful bound, the
    same claim under :func:`~numoracle.oracle.precision.device_order` (named
    ``<claimed>@<order>``); None where the order is not what made it so (already
    as short, or pairwise)."""
    if not 2 <= n < 2**53 or model.order.kind == "pairwise":
        return None  # no reduction, or a length that counts no terms
    order = device_order(n)
    if int(order.height(n)) >= int(model.order.height(n)):
        return None
    return model.with_(order=order, name=f"{model.name}@{order}")


def degenerate_note(model: PrecisionModel, device: PrecisionModel, n: int) -> str:
    """The sentence a verdict judged under ``device`` instead of ``model`` carries."""
    h = int(model.order.height(n))
    g = float(gamma(np.asarray(h), model.acc_unit()))
    g_text = "infinite" if not np.isfinite(g) else f"{g:.3g}"
    return (f"the claimed order {model.order} leaves n = {n} terms in "
            f"{model.accumulate} no useful bound (gamma_{h}(u) = {g_text}: zeros would pass); "
            f"judged under {device.order}, the order a GPU reduction keeps at the least "
            f"({DEVICE_LANES} lanes each summing {device.order.block} terms in turn, then "
            "combined), which a kernel summing one term at a time on one thread does not")


def _host(a: Any) -> np.ndarray:
    """A small index array on the host (from a device one where it lives there)."""
    return a.get() if hasattr(a, "get") else np.asarray(a)


def ladder_for(model: PrecisionModel) -> tuple[str, ...]:
    """The standard models a result of ``model``'s storage is tried against,
    from the most precise to the least."""
    by_storage = {
        "fp32": STANDARD_MODELS,
        "bf16": ("bf16",),
        "fp16": ("fp16", "fp16-acc16"),
        "fp64": ("fp64",),
    }
    return by_storage.get(model.storage.name, (model.name,))


#: the rungs of the traced ladder, from the most precise: (suffix, what changes)
TRACED_RUNGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("approximate-elementwise", {"accuracy": "triton"}),
    ("one-pass-variance", {"variance": "one-pass"}),
    ("tf32-inputs", {"compute": FORMATS["tf32"], "input_rounding": None}),
    ("fp16-inputs", {"compute": FORMATS["fp16"], "input_rounding": None}),
    ("fp16-accumulation", {"summation": FORMATS["fp16"]}),
    ("fp16-rounding-per-op", {"storage": FORMATS["fp16"], "rounding": "per-op"}),
    ("fp16-arithmetic", {"accumulate": FORMATS["fp16"]}),
    ("bf16-accumulation", {"summation": FORMATS["bf16"]}),
    ("bf16-rounding-per-op", {"storage": FORMATS["bf16"], "rounding": "per-op"}),
    ("bf16-arithmetic", {"accumulate": FORMATS["bf16"]}),
)


def traced_ladder(claimed: PrecisionModel) -> list[tuple[str, PrecisionModel]]:
    """The coarser models a traced reference's result is tried against, from the
    most precise: approximate elementwise ops (Triton's and fast maths'
    division, ``exp``, ``log``), a one-pass variance (``E[x²] - E[x]²``, the
    claim ``variance="one-pass"``), inputs rounded to tf32 or fp16 by the
    multiplier, fp16 accumulation (the running sums of reductions in fp16, every
    other op as claimed), one extra fp16 rounding per op (fp16 storage), fp16
    arithmetic (every op in fp16), and the same three in bf16. A rung that does not make the claim
    coarser (bf16 rounding of a kernel already rounding per op to bf16) is left
    out. Each model is named ``<claimed>+<rung>``."""
    out = []
    for suffix, change in TRACED_RUNGS:
        if "accuracy" in change and claimed.accuracy != "ieee":
            continue
        if "variance" in change and claimed.variance == change["variance"]:
            continue
        if "compute" in change and change["compute"].t >= claimed.compute.t:
            continue
        if "accumulate" in change and change["accumulate"].t >= claimed.accumulate.t:
            continue
        if "summation" in change and change["summation"].t >= claimed.summing().accumulate.t:
            continue
        if "storage" in change and not (
                change["storage"].t < claimed.storage.t
                or (change["storage"] == claimed.storage and claimed.rounding == "fused")):
            continue
        name = f"{claimed.name}+{suffix}"
        out.append((name, claimed.with_(name=name, **change)))
    return out


def candidates(claimed: PrecisionModel, *,
               ladder: bool | str = True) -> list[tuple[str, PrecisionModel]]:
    """Models a result is tried against: the claimed one, the claimed one with
    subnormal inputs flushed, and, with ``ladder`` (ops whose outputs are single
    contractions: :attr:`~numoracle.oracle.ops.base.Op.precision_ladder`), the
    claimed one with an unfused bias epilogue, the standard ladder of its
    storage format and, last, the claimed formats under any algorithm class
    (Winograd, FFT: :mod:`numoracle.oracle.transforms`; ops other than conv2d
    ignore it). Each model is named as it is listed (the claimed model's
    variants ``<claimed>+flushed-subnormals``, ``<claimed>+bias-after-store``,
    ``<claimed>+winograd/fft``), so a diagnosis carries the model itself.
    ``ladder="traced"`` (a traced reference): the claimed model, flushed
    subnormals, then :func:`traced_ladder`."""
    out = [(claimed.name, claimed)]
    if not claimed.flush_subnormal_inputs:
        name = f"{claimed.name}{FLUSHED_SUFFIX}"
        out.append((name, claimed.with_(flush_subnormal_inputs=True, name=name)))
    if ladder == "traced":
        return out + traced_ladder(claimed)
    if not ladder:
        return out
    if not claimed.bias_after_store:
        name = f"{claimed.name}+bias-after-store"
        out.append((name, claimed.with_(bias_after_store=True, name=name)))
    out += [(name, PRESETS[name]) for name in ladder_for(claimed) if name != claimed.name]
    if not set(TRANSFORMS) <= set(claimed.algorithms):
        # last: a transform bound is looser than the coarser formats' summations
        name = f"{claimed.name}{TRANSFORM_SUFFIX}"
        out.append((name, claimed.with_(algorithms=ALGORITHMS, name=name)))
    return out


def _fit_ratio(out: OutputVerdict) -> float:
    """The worst ratio of a comparison, Inf where NaN or Inf stand where they must not."""
    return out.worst_ratio if out.nonfinite is None else float("inf")


def diagnose(
    out: OutputVerdict,
    got: np.ndarray,
    claimed: PrecisionModel,
    reference_for: Callable[[PrecisionModel], Tracked],
    *,
    ladder: bool | str = True,
    nan_may_spread: bool = False,
) -> None:
    """Fill ``out.diagnosis`` and ``out.per_model``: the worst ratio under each
    candidate model (Inf where NaN or Inf stand where the model allows none), and
    what the result is consistent with (:func:`explain`; ``nan_may_spread`` as
    in :func:`compare`).

    ``ladder=False`` (composed ops: an optimizer or training step, see
    :attr:`~numoracle.oracle.ops.base.Op.precision_ladder`) tries only the
    claimed model and its flushed-subnormals variant; a result beyond both
    "exceeds the bound: a logic bug", never "consistent with" a coarser format.
    """
    if out.nonfinite:
        out.diagnosis = Diagnosis(DiagnosisKind.NONFINITE, out.nonfinite)
        return
    models = candidates(claimed, ladder=ladder)
    for name, model in models:
        out.per_model[name] = _fit_ratio(compare(out.name, got, reference_for(model),
                                                 nan_may_spread=nan_may_spread))

    def ratio(model: PrecisionModel) -> float:
        return compare(out.name, got, reference_for(model), probabilistic=model.probabilistic,
                       nan_may_spread=nan_may_spread).worst_ratio

    if out.passed:
        how = "bit-exact as the exact regime requires" if out.exact else (
            f"worst ratio {out.worst_ratio:.3g}")
        text = f"within {claimed.name} ({how})"
        allowed = [a for a in TRANSFORMS if a in claimed.algorithms]
        if allowed and ladder is True and not out.exact:
            summed, named = explaining_algorithms(claimed, ratio, allowed)
            if summed >= 1.0:
                out.per_model[f"{claimed.name} summation only"] = summed
                text += (f"; beyond its summation bound (ratio {summed:.3g}): consistent "
                         f"with {_name_algorithms(named)}")
        out.diagnosis = Diagnosis(DiagnosisKind.PASS, text, model=claimed)
        return
    fits = [m for name, m in models if out.per_model[name] < 1.0 and name != claimed.name]
    note = ""
    if ladder == "traced":
        # a model storing every result in a narrower format returns values of it
        # (storage_grid): an output off that grid rules it out
        fits, grid = rule_out(got, claimed, fits)
        vacuous = [m for m in fits if not _informative(got, claimed, m, reference_for)]
        fits = [m for m in fits if m not in vacuous]
        notes = [grid]
        if vacuous and not fits:
            notes.append(_vacuous_note(vacuous))
        note = "; ".join(n for n in notes if n)
        # the traced rungs are not ordered by precision for every reference (an extra
        # rounding per op and a narrower accumulation trade places with the length of
        # the sums): first a narrower storage whose grid holds every output (where the
        # exact values are off it), then the models that coarsen one kind of op (the
        # sums, the elementwise functions, the multiplier's inputs) before those that
        # coarsen every op (a narrower storage or arithmetic: their bounds hold what
        # the others do, at short sums as tightly), then the model whose bound the
        # result comes nearest to, the largest worst ratio below 1
        ref = reference_for(claimed).to_host()
        exact_value = ref.value if ref.lo is None else ref.value + ref.lo
        fits.sort(key=lambda m: (not on_grid(got, exact_value, m, claimed),
                                 _every_op(m, claimed), -out.per_model[m.name]))
    algos: dict[str, float] | None = None
    if fits and fits[0].name.endswith(TRANSFORM_SUFFIX):
        algos = explaining_algorithms(claimed, ratio, TRANSFORMS)[1]
    out.diagnosis = explain(claimed, fits, exact=out.exact, ladder=ladder, algorithms=algos,
                            note=note)


def _every_op(model: PrecisionModel, claimed: PrecisionModel) -> bool:
    """Whether ``model`` departs from ``claimed`` at every op (a narrower storage or
    arithmetic format), not at one kind of op."""
    return model.storage != claimed.storage or model.accumulate != claimed.accumulate


def _vacuous_note(models: list[PrecisionModel]) -> str:
    """What a traced diagnosis adds where only bounds wider than the failing values
    fit: the models, and the claim that names a one-pass variance."""
    text = (f"{', '.join(m.name for m in models)} fit only by a bound wider than the "
            "failing values (zeros would pass it)")
    if any(m.variance == "one-pass" for m in models):
        text += ("; a kernel computing its variance in one pass (E[x²] - E[x]², which "
                 "cancels) claims it: Claims(variance=\"one-pass\")")
    return text


def _informative(got: Any, claimed: PrecisionModel, model: PrecisionModel,
                 reference_for: Callable[[PrecisionModel], Tracked]) -> bool:
    """Whether ``model`` explains a result beyond ``claimed`` by a bound that says
    something: at every element the claimed bound fails (by a nonzero error, at
    an element it judges), ``model``'s bound lies
    below the exact value's magnitude (a bound past it would pass any value of
    that size, zeros included, and explain nothing)."""
    mine, theirs = reference_for(claimed).to_host(), reference_for(model).to_host()
    g = np.asarray(got, dtype=np.float64)
    exact_value = np.asarray(mine.value if mine.lo is None else mine.value + mine.lo)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(g - exact_value)
        claimed_bound = np.asarray(mine.bound(claimed.probabilistic))
        # an error of 0 never fails, and an element the claim leaves unjudged (a NaN
        # bound) is no failure to explain
        failing = (np.isfinite(err) & (err > 0) & ~np.isnan(claimed_bound)
                   & ~(err < claimed_bound))
        bound = np.broadcast_to(np.asarray(theirs.bound(model.probabilistic)), err.shape)
        size = np.broadcast_to(np.abs(exact_value), err.shape)  # a 0-d output too
        return bool(np.all(bound[failing] < size[failing]))


def explaining_algorithms(claimed: PrecisionModel, ratio: Callable[[PrecisionModel], float],
                          algorithms: tuple[str, ...] | list[str]
                          ) -> tuple[float, dict[str, float]]:
    """The worst ratio of a result under ``claimed``'s formats with summations
    only, and, per transform class of ``algorithms``, its ratio under
    summations or that class, for the classes whose bound holds it (ratio < 1):
    which algorithm explains a result that no summation does. ``ratio(model)``
    judges the result under ``model``."""
    summed = ratio(claimed.with_(algorithms=("summation",)))
    named = {}
    for algo in algorithms:
        r = ratio(claimed.with_(algorithms=("summation", algo)))
        if r < 1.0:
            named[algo] = r
    return summed, named


def _name_algorithms(named: Mapping[str, float] | None) -> str:
    """``{"winograd": 0.4}`` -> ``"a Winograd algorithm (ratio 0.4)"``; several
    joined with "or"; none known: the classes together."""
    if not named:
        return "a Winograd or FFT algorithm"
    return " or ".join(f"{ALGORITHM_WORDS[a]} (ratio {r:.3g})" for a, r in named.items())


def explain(claimed: PrecisionModel, fits: list[PrecisionModel], *, exact: bool = False,
            ladder: bool | str = True, note: str = "",
            algorithms: Mapping[str, float] | None = None) -> Diagnosis:
    """The diagnosis of a result beyond ``claimed`` that the models ``fits``
    (in :func:`candidates` order, the claimed one left out) explain.

    One model: "consistent with" it. Several, the first a variant of the claimed
    model (flushed subnormals, an unfused epilogue): that variant, the others
    "also consistent". Several standard models: the headline names them all, as
    one case cannot tell them apart (:mod:`numoracle.checking.discriminate` runs
    the cases that can). Only a Winograd or FFT bound: the algorithm class,
    each class of ``algorithms`` (those whose own bound holds the result, with
    the ratio: :func:`explaining_algorithms`) by name. None: a logic bug.
    ``note`` ends the sentence (what told the models apart)."""
    tail = f"; {note}" if note else ""
    if not fits:
        if ladder == "traced":
            text = (f"exceeds the {claimed.name} bound and every coarser model tried "
                    "(approximate elementwise ops, a one-pass variance, tf32 or fp16 inputs, "
                    "fp16 or bf16 accumulation, an extra fp16 or bf16 rounding per op, fp16 "
                    "or bf16 arithmetic, flushed subnormals): "
                    "a logic bug")
        elif not ladder:
            text = (f"exceeds the {claimed.name} bound: a logic bug (the bound composes "
                    "every rounding of the claimed model, so no coarser precision explains "
                    "a result outside it)")
        elif exact:
            text = ("exceeds every precision model: the bound is 0 here (exact regime), so "
                    "this is a logic bug (wrong index or layout, a dropped or extra term)")
        else:
            text = "exceeds every precision model: a logic bug"
        return Diagnosis(DiagnosisKind.LOGIC, text + tail)
    first, rest = fits[0], fits[1:]
    if first.name.endswith(TRANSFORM_SUFFIX):
        return Diagnosis(DiagnosisKind.ALGORITHM, f"exceeds {claimed.name}; consistent with "
                         f"{_name_algorithms(algorithms)} at {claimed.name}'s formats; no "
                         f"summation order in the standard formats explains it{tail}",
                         model=first)
    words = [_TRANSFORM_WORDS if m.name.endswith(TRANSFORM_SUFFIX) else m.name for m in rest]
    summations = [m for m in rest if not m.name.endswith(TRANSFORM_SUFFIX)]
    if first.name.startswith(f"{claimed.name}+") or not summations:
        also = f"; also consistent with {', '.join(words)}" if words else ""
        return Diagnosis(DiagnosisKind.PRECISION,
                         f"exceeds {claimed.name}; consistent with {first.name} "
                         f"({first.describe()}){also}{tail}", model=first,
                         alternatives=tuple(summations))
    names = [first.name] + [m.name for m in summations]
    listed = ", ".join(names[:-1]) + f" or {names[-1]}"
    extra = f"; also with {_TRANSFORM_WORDS}" if len(words) > len(summations) else ""
    return Diagnosis(DiagnosisKind.PRECISION,
                     f"exceeds {claimed.name}; consistent with {listed}: this case "
                     f"cannot tell them apart ({first.name}, the first, is the most precise)"
                     f"{extra}{tail}", model=first, alternatives=tuple(summations))


def summarize_models(verdicts: Mapping[str, OutputVerdict]) -> dict[str, float]:
    """Worst ratio per standard model over several outputs."""
    res: dict[str, float] = {}
    for v in verdicts.values():
        for k, r in v.per_model.items():
            res[k] = max(res.get(k, 0.0), r)
    return res


#: what to do when a failure of a target on this backend is explained by
#: subnormal inputs flushed to zero (``{model}``: the claimed model's name)
FLUSH_ADVICE = {
    "cupy": (
        "CuPy compiles every RawKernel, RawModule and ElementwiseKernel with -ftz=true "
        "appended after your own options (cupy/cuda/compiler.py; CuPy issue 9576): "
        "subnormal float32 inputs are read as zero. "
        "Claim it: precision=numoracle.get_model({model!r}, flush_subnormal_inputs=True); "
        "or compile the kernel outside CuPy (nvcc -cubin without -ftz=true) and load the "
        "cubin with cupy.RawModule(path=...)."
    ),
}


def advise(verdict: Verdict, backend: str) -> None:
    """Add the backend's advice (:data:`FLUSH_ADVICE`) to every failing output whose
    diagnosis is the claimed model with subnormal inputs flushed: the user learns at
    the first such failure what happened and what to claim instead."""
    advice = FLUSH_ADVICE.get(backend)
    if advice is None:
        return
    for o in verdict.outputs.values():
        d = o.diagnosis
        if not o.passed and d.kind is DiagnosisKind.PRECISION and d.model is not None \
                and d.model.name == f"{verdict.precision}{FLUSHED_SUFFIX}":
            o.diagnosis = d.with_advice(advice.format(model=verdict.precision))
