"""Precision models: what a kernel claims about how it computes.

A :class:`PrecisionModel` is the one frozen record of a kernel's claims, handed
to every hand-written op and (through a
:class:`~numoracle.oracle.traced.rules.RuleContext`) to every traced rule: the
storage format of the arrays, the format the multiplier sees (``compute``), the
format partial sums live in (``accumulate``), the reduction :class:`Order`, the
algorithm classes, how the kernel rounds (per op or fused), the elementwise
accuracy profile (:mod:`numoracle.oracle.accuracy`) with per-function ulps, and
the variance algorithm. The other shapes claims come in are constructors of
it: :func:`claims` (the traced ``Claims``),
:meth:`~numoracle.kernels.torch_targets.TorchMode.precision` and KernelBench's
precisions (:data:`PRESETS` names). The oracle turns a model into a bound; the
kernel is judged against it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import cached_property
from types import MappingProxyType

import numpy as np

from ..errors import InvalidArgument
from .accuracy import Profile, Ulps, get_profile
from .formats import Format, KeptHash, get_format

__all__ = ["Order", "PrecisionModel", "PRESETS", "STANDARD_MODELS", "get_model", "claims",
           "device_order", "DEVICE_LANES",
           "gamma", "gamma_tilde", "gamma_prob", "lam", "VARIANCES", "ROUNDINGS",
           "MASKED_ROWS", "STAGNATION_LIMIT"]

#: how a normalisation computes its variance
VARIANCES = ("two-pass", "one-pass")
#: where low-precision intermediates are rounded to the storage format
ROUNDINGS = ("per-op", "fused")
#: what a softmax gives on a row whose every entry is -inf
MASKED_ROWS = ("nan", "zero")

_ORDER_RE = re.compile(r"^(any|sequential|pairwise|blocked\((\d+)\))$")


@dataclass(frozen=True)
class Order:
    """The reduction tree of a sum of ``n`` terms, through its height.

    ``any`` (atomics, split-K, unknown) and ``sequential`` have height n-1,
    ``pairwise`` ceil(log2 n), ``blocked(b)`` b + ceil(n/b) - 2: the number of
    additions the longest path from a term to the result goes through.
    """

    kind: str
    block: int = 0

    @classmethod
    def parse(cls, spec: str | Order) -> Order:
        """``"any"``, ``"sequential"``, ``"pairwise"`` or ``"blocked(b)"``."""
        if isinstance(spec, Order):
            return spec
        m = _ORDER_RE.match(str(spec).strip())
        if not m:
            raise InvalidArgument(
                f"order {spec!r} is unknown; use 'any', 'sequential', 'pairwise' or "
                "'blocked(b)' with a positive block length b, e.g. 'blocked(32)'"
            )
        if m.group(2) is not None:
            b = int(m.group(2))
            if b < 1:
                raise InvalidArgument(f"block length {b=} must be a positive int")
            return cls("blocked", b)
        return cls(m.group(1))

    def height(self, n: np.ndarray | int) -> np.ndarray:
        """Additions on the longest path of a reduction of ``n`` terms (0 for n <= 1)."""
        n = np.asarray(n, dtype=np.int64)
        one = np.maximum(n, 1)
        if self.kind in ("any", "sequential"):
            h = one - 1
        elif self.kind == "pairwise":
            h = np.ceil(np.log2(one)).astype(np.int64)
        else:
            b = self.block
            h = np.where(one <= b, one - 1, b + -(-one // b) - 2)
        return h.astype(np.int64)

    def chain(self, n: np.ndarray | int) -> np.ndarray:
        """The longest run of additions of terms into one running sum of a
        reduction of ``n`` terms: n-1 for ``any`` and ``sequential``, the longer
        of the in-block and across-block runs for ``blocked(b)``, 1 for
        ``pairwise`` (each addition joins two partial sums of like size). Along
        such a run the partial sum grows past its terms and may stagnate
        (:data:`STAGNATION_LIMIT`)."""
        n = np.maximum(np.asarray(n, dtype=np.int64), 1)
        if self.kind in ("any", "sequential"):
            return n - 1
        if self.kind == "pairwise":
            return np.minimum(n - 1, 1)
        b = self.block
        return np.maximum(np.minimum(n, b) - 1, -(-n // b) - 1)

    def __str__(self) -> str:
        return f"blocked({self.block})" if self.kind == "blocked" else self.kind


@dataclass(frozen=True)
class PrecisionModel(KeptHash):
    """How a kernel computes, as it claims.

    Parameters
    ----------
    storage : Format
        Format of inputs and outputs in memory.
    compute : Format
        Format the multiplier sees; narrower than ``storage`` means the kernel
        rounds its inputs (fp32 storage, tf32 compute).
    accumulate : Format
        Format of partial sums.
    order : Order
        Reduction order.
    input_rounding : str or None
        How inputs are rounded to ``compute``: ``"rne"``, ``"rz"``, or None when
        unknown (the oracle then charges ``c_in = 2u + u^2`` with the larger u).
    accumulate_rounding : str
        ``"rne"`` for round-to-nearest adders; ``"rz"`` where partial sums are
        truncated (tensor cores): the probabilistic bound is not sound there.
    probabilistic : bool
        Judge by the probabilistic bound (Higham & Mary) instead of the
        deterministic one. Only allowed with round-to-nearest accumulation.
    alpha : float
        Failure budget per element of the probabilistic bound.
    deterministic_runs : bool
        Whether the target promises bit-identical results across runs.
    flush_subnormal_inputs : bool
        Subnormal inputs may be read as zero (denormals-are-zero): each such
        input carries its own magnitude as radius.
    inputs_maybe_unrounded : bool
        The kernel may skip rounding its inputs to ``compute`` (libraries fall
        back to plain ``storage`` arithmetic for some shapes): the result lies
        within the bound of either behaviour.
    bias_after_store : bool
        The contraction is rounded to the storage format before the bias is
        added (an unfused epilogue: two roundings of the output).
    algorithms : tuple of str
        The algorithm classes the kernel may use: ``"summation"`` (direct,
        implicit GEMM, split-K: the order says which trees), ``"winograd"``,
        ``"fft"`` (:mod:`numoracle.oracle.transforms`). A convolution's bound is
        the largest of the classes' bounds; only summations keep the exact
        regime. ``get_model(..., algorithm="direct")`` demands summation
        accuracy.
    nan_spreads : bool
        A non-finite input may turn finite results into NaN (a vectorised
        kernel whose packed neighbours meet ``0 * inf``, as torch's CPU bfloat16
        GEMM does: ``benchmarks/results/findings/``). In a case whose
        inputs hold a non-finite value, a NaN where the reference is finite is
        then not counted against the kernel; every finite result is still
        judged, and cases with finite inputs are judged as usual.
    accuracy : str
        The elementwise accuracy profile (:mod:`numoracle.oracle.accuracy`):
        ``"ieee"`` (correctly rounded arithmetic, precise libm), ``"cuda-fast"``
        (``--use_fast_math``), ``"triton"`` (Triton's fp32 defaults).
    ulps : mapping of str to float
        Per-function maximum errors in ulps of the accumulation format
        (``{"tanh": 64.0}``), over the profile's.
    variance : str
        ``"two-pass"`` (mean first, then squared deviations) or ``"one-pass"``
        (``E[x²] − E[x]²``, which cancels).
    rounding : str
        ``"per-op"``: every intermediate rounded to the storage format, as
        eager torch does in bf16/fp16; ``"fused"``: intermediates kept in the
        accumulation format, rounded once at each output.
    summation : Format or None
        The format the running sums of reductions (``sum``, ``mean``, a
        softmax's denominator) are kept in where a kernel sums in a narrower
        format than its other arithmetic (a bf16 accumulator beside fp32
        ``exp`` and division); None (default): ``accumulate``, as every other
        operation.
    masked_rows : str or None
        What the kernel's softmax gives on a row whose every entry is ``-inf``
        (a fully masked attention row): ``"nan"`` (``0 / 0``, as
        ``torch.softmax`` gives), ``"zero"`` (as
        ``F.scaled_dot_product_attention`` and FlashAttention give), or None
        (default): what the reference's own op gives there.
    """

    name: str
    storage: Format
    compute: Format
    accumulate: Format
    order: Order = Order("any")
    input_rounding: str | None = "rne"
    accumulate_rounding: str = "rne"
    probabilistic: bool = False
    alpha: float = 1e-6
    deterministic_runs: bool = False
    flush_subnormal_inputs: bool = False
    inputs_maybe_unrounded: bool = False
    bias_after_store: bool = False
    algorithms: tuple[str, ...] = ("summation",)
    nan_spreads: bool = False
    accuracy: str = "ieee"
    ulps: tuple[tuple[str, float], ...] = ()
    variance: str = "two-pass"
    rounding: str = "per-op"
    masked_rows: str | None = None
    summation: Format | None = None

    __hash__ = KeptHash.__hash__  # (a dataclass's own: else the generated one replaces it)

    def __post_init__(self) -> None:
        get_profile(self.accuracy)
        if self.masked_rows is not None and self.masked_rows not in MASKED_ROWS:
            raise InvalidArgument(f"masked_rows={self.masked_rows!r} is unknown; use one of "
                                  f"{MASKED_ROWS} or None (the reference's own convention)")
        if self.variance not in VARIANCES:
            raise InvalidArgument(f"variance={self.variance!r} is unknown; use one of {VARIANCES}")
        if self.rounding not in ROUNDINGS:
            raise InvalidArgument(f"rounding={self.rounding!r} is unknown; use one of {ROUNDINGS}")
        pairs = dict(self.ulps.items() if isinstance(self.ulps, Mapping) else self.ulps)
        for fname, u in pairs.items():
            if isinstance(u, bool) or not isinstance(u, (int, float)) or not (u >= 0):
                raise InvalidArgument(f"ulps[{fname!r}]={u!r} must be a non-negative number "
                                      "of ulps, e.g. {'tanh': 4.0}")
        object.__setattr__(self, "ulps", tuple(sorted((str(k), float(v))
                                                      for k, v in pairs.items())))
        known = ("summation", "winograd", "fft")
        if isinstance(self.algorithms, str) or not self.algorithms or any(
                a not in known for a in self.algorithms):
            raise InvalidArgument(
                f"algorithms={self.algorithms!r} must be a non-empty tuple of {known}, e.g. "
                "('summation', 'winograd', 'fft') for what cuDNN may choose"
            )
        if self.probabilistic and self.accumulate_rounding != "rne":
            raise InvalidArgument(
                f"model {self.name!r}: probabilistic=True needs round-to-nearest "
                f"accumulation, got accumulate_rounding={self.accumulate_rounding!r}; "
                "use the deterministic bound for truncating adders"
            )
        if not (0.0 < self.alpha < 1.0):
            raise InvalidArgument(f"alpha={self.alpha!r} must lie in (0, 1), e.g. 1e-6")
        if self.input_rounding not in (None, "rne", "rz"):
            raise InvalidArgument(
                f"input_rounding={self.input_rounding!r} must be 'rne', 'rz' or None"
            )

    @cached_property  # (read at every contraction)
    def rounds_inputs(self) -> bool:
        """True when the compute format is narrower than the storage format."""
        return self.compute.t < self.storage.t

    def input_unit(self) -> float:
        """Relative error of one input rounding (0 when inputs are not rounded)."""
        if not self.rounds_inputs:
            return 0.0
        return self.compute.unit_roundoff(self.input_rounding or "rz")

    def summing(self) -> PrecisionModel:
        """The model a reduction's running sum is bounded under: its
        :attr:`summation` format as the accumulation format, where claimed."""
        if self.summation is None:
            return self
        return replace(self, accumulate=self.summation, summation=None)

    def acc_unit(self) -> float:
        """Unit roundoff of one accumulation step."""
        return self.accumulate.unit_roundoff(self.accumulate_rounding)

    def gamma_prob(self, h: np.ndarray | int, n: np.ndarray | int) -> np.ndarray:
        """The probabilistic bound's coefficient for a reduction of ``n`` terms of
        height ``h`` (:func:`gamma_prob`): Higham & Mary's where this model's order
        keeps running sums from stagnating, the deterministic one elsewhere."""
        return gamma_prob(h, self.acc_unit(), self.alpha, self.order.chain(n))

    @property
    def profile(self) -> Profile:
        """The elementwise accuracy profile claimed."""
        return get_profile(self.accuracy)

    def error_of(self, name: str, default: float | Ulps | None = None) -> float | Ulps | None:
        """The claimed maximum error of elementwise function ``name``: a per-function
        claim (:attr:`ulps`), else the profile's figure, else ``default`` (the
        ``ieee`` one) with the profile's excess; None where nothing is known."""
        for fname, u in self.ulps:
            if fname == name:
                return u
        return self.profile.error(name, default)

    def div_rel(self) -> float:
        """The relative error of one division, in units of ``u``: 1 where it is
        correctly rounded, ``2 k`` for a ``k``-ulp division (one ulp is at most
        ``2 u`` of the result)."""
        e = self.error_of("div")
        if e is None:
            return 1.0
        k = e.ulps if isinstance(e, Ulps) else float(e)
        return max(1.0, 2.0 * k)

    def to_dict(self) -> dict[str, object]:
        """Plain data (formats and order by name), for repros and reports."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in ("storage", "compute", "accumulate", "order"):
            d[key] = str(d[key])
        d["summation"] = None if self.summation is None else str(self.summation)
        d["ulps"] = dict(self.ulps)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> PrecisionModel:
        """Inverse of :meth:`to_dict`."""
        kw = dict(d)
        for key in ("storage", "compute", "accumulate"):
            kw[key] = get_format(kw[key])  # type: ignore[arg-type]
        kw["order"] = Order.parse(kw["order"])  # type: ignore[arg-type]
        if kw.get("summation") is not None:
            kw["summation"] = get_format(kw["summation"])  # type: ignore[arg-type]
        kw["algorithms"] = tuple(kw.get("algorithms", ("summation",)))  # type: ignore[arg-type]
        return cls(**kw)  # type: ignore[arg-type]

    def with_(self, **changes: object) -> PrecisionModel:
        """A copy with fields changed (``model.with_(order=Order.parse('pairwise'))``)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def describe(self) -> str:
        """One line: ``fp32 storage, tf32 compute (rne), fp32 accumulate, order any``."""
        s = f"{self.storage} storage"
        if self.rounds_inputs:
            s += f", {self.compute} compute ({self.input_rounding or 'rounding unknown'})"
        s += f", {self.accumulate} accumulate"
        if self.accumulate_rounding != "rne":
            s += f" ({self.accumulate_rounding})"
        if self.summation is not None:
            s += f" ({self.summation} sums)"
        s += f", order {self.order}"
        if self.flush_subnormal_inputs:
            s += ", subnormal inputs may be flushed"
        if self.inputs_maybe_unrounded and self.rounds_inputs:
            s += f", or inputs not rounded to {self.compute}"
        if self.bias_after_store:
            s += ", bias added after a store"
        if self.algorithms != ("summation",):
            s += f", algorithms {'/'.join(self.algorithms)}"
        if self.nan_spreads:
            s += ", NaN may spread from non-finite inputs"
        if self.accuracy != "ieee":
            s += f", {self.accuracy} elementwise accuracy"
        if self.ulps:
            s += ", ulps " + ", ".join(f"{k} {v:g}" for k, v in self.ulps)
        if self.variance != "two-pass":
            s += f", {self.variance} variance"
        if self.rounding != "per-op" and self.storage.t < self.accumulate.t:
            s += ", intermediates fused"
        if self.probabilistic:
            s += f", probabilistic (alpha={self.alpha:g})"
        return s

    def __str__(self) -> str:
        return self.name


def _m(name: str, storage: str, compute: str, acc: str, **kw: object) -> PrecisionModel:
    return PrecisionModel(
        name, get_format(storage), get_format(compute), get_format(acc), **kw  # type: ignore[arg-type]
    )


PRESETS: dict[str, PrecisionModel] = {
    m.name: m
    for m in (
        _m("fp64", "fp64", "fp64", "fp64"),
        _m("fp32", "fp32", "fp32", "fp32"),
        # cuBLAS/cuDNN TF32: fp32 arrays, inputs rounded to tf32 (mode not documented).
        _m("tf32", "fp32", "tf32", "fp32", input_rounding=None),
        _m("bf16", "bf16", "bf16", "fp32"),
        _m("fp16", "fp16", "fp16", "fp32"),
        # fp32 arrays, bf16/fp16 multiplies (autocast-like), fp32 accumulation
        _m("fp32-bf16in", "fp32", "bf16", "fp32", input_rounding=None),
        _m("fp32-fp16in", "fp32", "fp16", "fp32", input_rounding=None),
        # fp16 accumulation
        _m("fp16-acc16", "fp16", "fp16", "fp16"),
        _m("fp32-acc16", "fp32", "fp32", "fp16"),
        # bf16 accumulation
        _m("bf16-acc16", "bf16", "bf16", "bf16"),
        _m("fp32-accbf16", "fp32", "fp32", "bf16"),
        # fp32 storage under Triton's and CUDA fast maths' elementwise accuracy
        _m("triton", "fp32", "fp32", "fp32", accuracy="triton"),
        _m("cuda-fast", "fp32", "fp32", "fp32", accuracy="cuda-fast",
           flush_subnormal_inputs=True),
        # WGSL: its accuracy table, and no rounding mode (either neighbour: one ulp)
        _m("wgsl", "fp32", "fp32", "fp32", accuracy="wgsl", accumulate_rounding="rz",
           flush_subnormal_inputs=True),
    )
}

# The models the diagnosis tries for fp32 storage, from the most precise to the least.
STANDARD_MODELS: tuple[str, ...] = ("fp32", "tf32", "fp32-fp16in", "fp32-acc16", "fp32-bf16in")


#: ``get_model(..., algorithm=NAME)``: one name for a set of algorithm classes
_ALGORITHM_NAMES: dict[str, tuple[str, ...]] = {
    "direct": ("summation",), "summation": ("summation",),
    "winograd": ("summation", "winograd"), "fft": ("summation", "fft"),
    "any": ("summation", "winograd", "fft"),
}


def get_model(spec: str | PrecisionModel | Mapping[str, object],
              **overrides: object) -> PrecisionModel:
    """The one reading of a claimed precision: a preset by name (``"bf16+triton"``:
    a preset under an accuracy profile), a model, or a model's dict as
    :meth:`PrecisionModel.to_dict` writes it (a spec file's, a repro's),
    optionally with fields changed (claims: ``order=``, ``accuracy=``,
    ``algorithm=``, ...). Every place that takes a user's ``precision=``
    reads it here.

    Examples
    --------
    >>> get_model(get_model("tf32").to_dict()) == get_model("tf32")
    True
    >>> get_model("fp32", order="pairwise").order.kind
    'pairwise'
    >>> get_model("fp32", algorithm="direct").algorithms
    ('summation',)
    >>> get_model("bf16+triton").accuracy
    'triton'
    """
    if isinstance(spec, PrecisionModel):
        model = spec
    elif isinstance(spec, Mapping):
        model = PrecisionModel.from_dict(spec)
    elif isinstance(spec, str) and "+" in spec:  # "bf16+triton": a preset under a profile
        base, _, accuracy = spec.partition("+")
        return get_model(base, **{"accuracy": accuracy, **overrides})
    else:
        try:
            model = PRESETS[spec]
        except (KeyError, TypeError):
            raise InvalidArgument(
                f"precision model {spec!r} is unknown; use one of {sorted(PRESETS)}"
            ) from None
    if "order" in overrides:
        overrides["order"] = Order.parse(overrides["order"])  # type: ignore[arg-type]
    for key in ("storage", "compute", "accumulate", "summation"):
        if overrides.get(key) is not None:
            overrides[key] = get_format(overrides[key])  # type: ignore[arg-type]
    accuracy = overrides.get("accuracy")
    if accuracy is not None and accuracy != model.accuracy:
        if get_profile(str(accuracy)).flushes_subnormals:
            overrides.setdefault("flush_subnormal_inputs", True)
        if accuracy != "ieee":  # the name says what was claimed: "bf16+triton"
            overrides.setdefault("name", f"{model.name.split('+')[0]}+{accuracy}")
    if "algorithm" in overrides:
        overrides["algorithms"] = _ALGORITHM_NAMES.get(str(overrides.pop("algorithm")), ())
        if not overrides["algorithms"]:
            raise InvalidArgument(f"algorithm must be one of {sorted(_ALGORITHM_NAMES)}, "
                                  "e.g. algorithm='direct' to demand summation accuracy")
    return model.with_(**overrides) if overrides else model


def claims(**changes: object) -> Mapping[str, object]:
    """Claims beyond the formats, as changes to a precision model (validated
    now): ``claims(rounding="fused", ulps={"tanh": 4.0})``. A
    :class:`~numoracle.oracle.traced.rules.RuleContext` applies them to the
    model it is given.

    Raises
    ------
    InvalidArgument
        For a field a model does not have, or a value it refuses.
    """
    names = {f.name for f in fields(PrecisionModel)} - {"name"}
    bad = sorted(set(changes) - names)
    if bad:
        raise InvalidArgument(f"claims: {bad} are not claims; use fields of PrecisionModel "
                              f"({sorted(names)})")
    get_model("fp32", **changes)
    if "ulps" in changes and isinstance(changes["ulps"], Mapping):
        changes["ulps"] = MappingProxyType(dict(changes["ulps"]))
    return MappingProxyType(dict(changes))


#: the lanes of the least parallel GPU reduction: a warp, each lane summing a contiguous
#: share of the terms in turn before the lanes are combined
DEVICE_LANES = 32


def device_order(n: int) -> Order:
    """The order a GPU reduction of ``n`` terms keeps at the least: ``blocked(b)``
    with ``b = ceil(n / 32)`` (a warp's lanes each summing ``b`` terms in turn,
    then combined; wider blocks and grids only shorten the runs). A kernel that
    sums one term at a time on one thread does not keep it."""
    return Order("blocked", max(1, -(-int(n) // DEVICE_LANES)))


def gamma(h: np.ndarray, u: float) -> np.ndarray:
    """Deterministic ``gamma_h(u) = h u / (1 - h u)``; inf where h u >= 1."""
    hu = np.asarray(h, dtype=np.float64) * u
    with np.errstate(divide="ignore"):
        return np.where(hu < 1.0, hu / np.maximum(1.0 - hu, 0.0), np.inf)


def lam(h: np.ndarray, alpha: float) -> np.ndarray:
    """``lambda = sqrt(2 ln(2h/alpha))`` of the probabilistic bound (h >= 1)."""
    return np.sqrt(2.0 * np.log(2.0 * np.maximum(np.asarray(h, dtype=np.float64), 1.0) / alpha))


#: the largest ``chain * u`` (:meth:`Order.chain`) at which the probabilistic bound is
#: used. Higham & Mary's model takes rounding errors to be mean-independent; along a
#: running sum that has grown to ``1 / (chain u)`` times its terms, terms near or below
#: half an ulp of the sum are rounded away with a bias that the data's distribution
#: decides (stagnation: a sequential fp32 sum of U[0,1) products exceeds the
#: probabilistic bound 2x at 2^22 terms, of U[0,1)^4 values already at 2^19; their
#: ratio starts to grow from its zero-mean level near ``chain u = 2^-9``)
STAGNATION_LIMIT = 2.0**-11


def gamma_prob(h: np.ndarray | int, u: float, alpha: float,
               chain: np.ndarray | int) -> np.ndarray:
    """``gamma~_h(u)`` (:func:`gamma_tilde`) where the longest running sum of the
    reduction (``chain`` additions) stays within :data:`STAGNATION_LIMIT`, else the
    deterministic ``gamma_h(u)``: the probabilistic bound only where its
    assumption of mean-independent rounding errors survives data of nonzero mean.

    Examples
    --------
    >>> u = 2.0**-24
    >>> float(gamma_prob(2**22, u, 1e-6, 2**22)) == float(gamma(2**22, u))
    True
    >>> float(gamma_prob(22, u, 1e-6, 1)) == float(gamma_tilde(22, u, 1e-6))
    True
    """
    h = np.asarray(h, dtype=np.float64)
    ok = np.asarray(chain, dtype=np.float64) * u <= STAGNATION_LIMIT
    return np.where(ok, gamma_tilde(h, u, alpha), gamma(h, u))


def gamma_tilde(h: np.ndarray, u: float, alpha: float) -> np.ndarray:
    """Probabilistic ``exp(lambda sqrt(h) u + h u^2 / (1 - u)) - 1`` (Higham & Mary 2019),
    never above the deterministic gamma_h(u)."""
    h = np.asarray(h, dtype=np.float64)
    g = np.expm1(lam(h, alpha) * np.sqrt(h) * u + h * u * u / (1.0 - u))
    return np.where(h > 0, np.minimum(g, gamma(h, u)), 0.0)



