"""Value families: the bulk input values of a case, made on the host from a seed.

Hypothesis draws the *structure* of a case (shapes, layouts, family, seed); the
values themselves come from :func:`generate_inputs` and a seeded NumPy
generator, so that a case replays bit for bit anywhere without Hypothesis.
Every value is exactly representable in the storage format and finite (except
in the ``"special"`` family).

Families
--------
``normal``
    N(0, 1).
``uniform``
    U(-1, 1).
``positive``
    U(0, 1], clamped to at least the storage format's smallest normal: every
    product is positive, no reduction cancels.
``heavy``
    Random signs, magnitudes log-uniform over :data:`HEAVY_DECADES` decades
    (never below the smallest normal), the largest magnitude ``M`` chosen so
    that ``n * M**2 <= SUM_LIMIT`` for the longest reduction ``n``: sums stay
    below about 1e3, far from fp16's overflow at 65504.
``cancel``
    A large structured part plus a small random one. The large part of the
    ``r``-th multiplied input is, along every axis, row ``r`` of a Sylvester
    Hadamard matrix repeated over blocks with a random sign and magnitude per
    block; rows of distinct inputs are orthogonal on every block, so in every
    contraction the large products cancel block by block and the result is
    of the size of the small part: ``|y|`` is far below ``S = sum |a_i b_i|``.
``exact``
    Integers on a power-of-two grid such that every product and every partial
    sum is exactly representable in fp32 accumulation: the bound is 0 in any
    order and any deviation is a bug (see :func:`exact_widths` for the rule).
``special``
    Normal bulk with a few elements (:data:`SPECIAL_SHARE`, at least one per
    input) replaced by :func:`special_values`. Strategies usually deliver
    specials as overlays on another family instead, which shrink better.

Two families come from the inputs real workloads feed a normalising op
(softmax, log-softmax, log-sum-exp, the norms, cross-entropy): drawn only for
ops that name them (:data:`WORKLOAD_FAMILIES`; a traced reference that
normalises), since elsewhere they only saturate or overflow.

``rows``
    N(0, 1) rows (along the last axis) of four kinds, drawn per row: plain;
    shifted by a large common offset ``+2**k`` (``k`` in :data:`ROW_SHIFT_EXPONENTS`:
    a shift, not a scale, as large logits are); shifted by ``-2**k`` (a row
    with a very negative log-sum-exp, as the rows of an attention sink's
    heads); one massive entry ``+2**k`` in a plain row (a massive activation,
    the sink itself).
``large``
    Rows near overflow with a finite exact result after normalising: each
    row is ``M * (1 + LARGE_SPREAD * N(0, 1))`` with a random sign and
    ``M = max / 2**j`` (``j`` in :data:`LARGE_EXPONENTS`), so that ``exp``
    without the max subtracted, ``x * x`` or a long row's sum (past
    ``2**j`` terms) overflow in the storage format while the normalised result is of order one.

Boolean inputs (masks, :func:`generate_integers`) come in the patterns
attention uses: causal (lower triangular over the last two axes), padding
(a prefix of each row, of random length) or random, each as drawn or
inverted (so both conventions, True keeps and True masks, meet every
pattern); rows of one value — fully masked in one of the conventions —
come among them (padding rows of length 0, the rows of a causal mask past
its diagonal), judged by the kernel's claim for fully masked rows
(:data:`CONSTANT_MASK_ROWS`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidArgument
from ..oracle.formats import Format, get_format, quantize

if TYPE_CHECKING:
    from ..oracle.ops.base import IntegerInput, Product

__all__ = [
    "FAMILIES",
    "WORKLOAD_FAMILIES",
    "MASK_PATTERNS",
    "ACC_BITS",
    "EXACT_MARGIN_BITS",
    "EXACT_FLOOR_BITS",
    "HEAVY_DECADES",
    "SUM_LIMIT",
    "SPECIAL_SHARE",
    "generate_inputs",
    "generate_integers",
    "exact_widths",
    "special_values",
]

FAMILIES: tuple[str, ...] = ("normal", "uniform", "positive", "heavy", "cancel", "exact", "special",
                             "rows", "large")
#: the families drawn only for ops that name them (``Op.value_families``)
WORKLOAD_FAMILIES: tuple[str, ...] = ("rows", "large")
#: exponents ``k`` of the ``rows`` family's offsets ``2**k``
ROW_SHIFT_EXPONENTS = (6, 12)
#: exponents ``j`` of the ``large`` family's magnitudes ``max / 2**j``
LARGE_EXPONENTS = (3, 6)
#: relative spread of a ``large`` row about its magnitude
LARGE_SPREAD = 2.0**-6
#: boolean patterns of :func:`generate_integers`
MASK_PATTERNS = ("random", "causal", "padding")
#: whether a mask may hold a row of one value (a fully masked row in one of
#: the two conventions, judged by the kernel's ``masked_rows`` claim); False:
#: one entry of such a row is flipped (rows of one entry kept True)
CONSTANT_MASK_ROWS = True

#: significant bits of the accumulation format the exact family is exact in (fp32)
ACC_BITS = 24
#: spare bit kept in every exact reduction: ``w_a + w_b + ceil(log2 n) + 1 <= 24``
EXACT_MARGIN_BITS = 1
#: width the exact family reserves for the partners of its widest input
EXACT_FLOOR_BITS = 3
#: decades the magnitudes of the heavy family span
HEAVY_DECADES = 4.0
#: bound on ``n * M**2`` for the heavy and cancel families (M: largest magnitude)
SUM_LIMIT = 1e3
#: largest magnitude of the heavy family and of the cancel family's large part
MAX_MAGNITUDE = 16.0
#: share of elements the special family replaces by special values
SPECIAL_SHARE = 0.02

Shapes = Mapping[str, tuple[int, ...]]
Generator = Callable[[Shapes, Sequence["Product"], Format, np.random.Generator],
                     dict[str, np.ndarray]]


# -- helpers ---------------------------------------------------------------
def _product_inputs(products: Sequence[Product]) -> list[str]:
    """Names of the multiplied inputs, in order of first appearance."""
    names: list[str] = []
    for p in products:
        for name in (p.a, p.b):
            if name not in names:
                names.append(name)
    return names


def _uses(products: Sequence[Product]) -> dict[str, int]:
    """How many products each multiplied input is in, in order of first appearance."""
    return {n: sum(n in (p.a, p.b) for p in products) for n in _product_inputs(products)}


def _least_shared(uses: Mapping[str, int]) -> list[str]:
    """The inputs in the fewest products, in order of first appearance."""
    return [n for n, k in uses.items() if k == min(uses.values())]


def _longest(products: Sequence[Product]) -> int:
    """The longest reduction of the op (1 when it multiplies nothing)."""
    return max((int(p.n) for p in products), default=1)


def _scale_for_sums(products: Sequence[Product]) -> float:
    """Largest magnitude ``M`` with ``n * M**2 <= SUM_LIMIT`` (at most MAX_MAGNITUDE)."""
    return min(MAX_MAGNITUDE, math.sqrt(SUM_LIMIT / _longest(products)))


def _signs(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return np.where(rng.random(shape) < 0.5, -1.0, 1.0)


# -- special values ----------------------------------------------------------
def special_values(storage: Format | str) -> tuple[float, ...]:
    """Special values of ``storage``, simplest first.

    ``+0.0, -0.0``, the smallest and the largest subnormal, ``+-tiny`` (the
    smallest normal), ``+-max / 2**8``, ``+inf, -inf, nan``; every one exactly
    representable in ``storage``.

    Examples
    --------
    >>> special_values("fp16")[:4]
    (0.0, -0.0, 5.960464477539063e-08, 6.097555160522461e-05)
    """
    fmt = get_format(storage)
    sub_min = 2.0 ** (fmt.emin - fmt.t)
    big = fmt.max / 2.0**8
    return (0.0, -0.0, sub_min, fmt.tiny - sub_min, fmt.tiny, -fmt.tiny, big, -big,
            math.inf, -math.inf, math.nan)


# -- the exact family's bit widths ---------------------------------------------
def _budget(n: int) -> int:
    """Bits ``w_a + w_b`` a product summed over ``n`` terms may use."""
    return ACC_BITS - EXACT_MARGIN_BITS - math.ceil(math.log2(max(int(n), 1)))


def _width_limit(name: str, products: Sequence[Product], widths: Mapping[str, int],
                 cap: int) -> int:
    """Widest ``name`` may be given the widths assigned so far; unassigned partners
    keep :data:`EXACT_FLOOR_BITS`."""
    limit = cap
    for p in products:
        if name not in (p.a, p.b):
            continue
        budget = _budget(p.n)
        partner = p.b if p.a == name else p.a
        if partner == name:
            limit = min(limit, budget // 2)
        else:
            limit = min(limit, budget - widths.get(partner, EXACT_FLOOR_BITS))
    return max(1, limit)


def exact_widths(products: Sequence[Product], shapes: Shapes, storage: Format | str,
                 *, wide: str | None = None) -> dict[str, int]:
    """Bit width ``w`` of every input of the exact family.

    Values are ``k * 2**-w`` with integers ``|k| <= 2**w - 1``. The rule:

    * for every product ``(a, b, n)``: ``w_a + w_b + ceil(log2 n) + 1 <= 24``,
      so every product and every partial sum (magnitude below ``n``, on the grid
      ``2**-(w_a + w_b)``) is an integer multiple of the grid below ``2**23``
      grid steps: exact in fp32 accumulation in any order, with a bit to spare;
    * ``1 <= w <= min(p, 24)`` with ``p`` the storage precision (fp32 24,
      bf16 8, fp16 11), so every value is representable (all lie in ``(-1, 1)``);
    * ``wide`` (by default the first input in the fewest products) is given as
      many bits as its products allow while its partners keep
      :data:`EXACT_FLOOR_BITS`: with fp32 storage and reductions up to 256 it
      has 12 or more bits, so a kernel that rounds its inputs to tf32, fp16 or
      bf16 cannot be exact. The other multiplied inputs follow, most shared
      first, each as wide as the widths already given allow; inputs that are
      never multiplied (a bias) get the narrowest width given, so they lie on
      the grid of every product they are added to.

    Raises
    ------
    InvalidArgument
        When a reduction is longer than ``2**21`` (no width fits) or ``wide``
        is not a multiplied input.

    Examples
    --------
    >>> from numoracle.oracle.ops.base import Product
    >>> exact_widths([Product("a", "b", 8)], {"a": (2, 8), "b": (8, 3)}, "fp32")
    {'a': 17, 'b': 3}
    """
    fmt = get_format(storage)
    cap = min(fmt.p, ACC_BITS)
    for p in products:
        if _budget(p.n) < 2:
            raise InvalidArgument(
                f"a reduction of n={p.n} terms ({p.a} x {p.b}) is too long for the exact "
                f"family (at most 2**{ACC_BITS - EXACT_MARGIN_BITS - 2}); use another family"
            )
    uses = _uses(products)
    if wide is not None and wide not in uses:
        raise InvalidArgument(f"{wide=} must be one of the multiplied inputs {list(uses)}")
    first = [wide] if wide is not None else _least_shared(uses)[:1]
    rest = sorted((n for n in uses if n not in first), key=lambda n: -uses[n])
    widths: dict[str, int] = {}
    for name in first + rest:
        widths[name] = _width_limit(name, products, widths, cap)
    narrowest = min(widths.values(), default=cap)
    return {name: widths.get(name, narrowest) for name in shapes}


# -- the families --------------------------------------------------------------
def _normal(shapes: Shapes, products: Sequence[Product], fmt: Format,
            rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {n: rng.standard_normal(s) for n, s in shapes.items()}


def _uniform(shapes: Shapes, products: Sequence[Product], fmt: Format,
             rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {n: rng.uniform(-1.0, 1.0, s) for n, s in shapes.items()}


def _positive(shapes: Shapes, products: Sequence[Product], fmt: Format,
              rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {n: np.maximum(1.0 - rng.random(s), fmt.tiny) for n, s in shapes.items()}


def _heavy(shapes: Shapes, products: Sequence[Product], fmt: Format,
           rng: np.random.Generator) -> dict[str, np.ndarray]:
    hi = _scale_for_sums(products)
    lo = max(hi * 10.0**-HEAVY_DECADES, fmt.tiny)
    out = {}
    for name, shape in shapes.items():
        mag = np.exp(rng.uniform(math.log(lo), math.log(hi), shape))
        out[name] = _signs(rng, shape) * mag
    return out


def _hadamard_axis(row: int, length: int, block: int, rng: np.random.Generator) -> np.ndarray:
    """Row ``row`` of the order-``block`` Sylvester Hadamard matrix, repeated over
    ``length``, each block scaled by a random sign and a magnitude in [1/2, 1)."""
    k = np.arange(length)
    bits, parity = row & (k % block), np.zeros(length, dtype=np.int64)
    while np.any(bits):
        parity ^= bits & 1
        bits >>= 1
    pattern = np.where(parity == 1, -1.0, 1.0)
    blocks = -(-length // block)
    scale = _signs(rng, (blocks,)) * rng.uniform(0.5, 1.0, blocks)
    return pattern * scale[k // block]


def _cancel(shapes: Shapes, products: Sequence[Product], fmt: Format,
            rng: np.random.Generator) -> dict[str, np.ndarray]:
    rows = _product_inputs(products)
    block = 1 << max(1, (len(rows) - 1).bit_length())
    large = 2.0 ** math.floor(math.log2(_scale_for_sums(products)))
    small = large * 2.0 ** -(min(fmt.p, ACC_BITS) // 2)
    out = {}
    for name, shape in shapes.items():
        if name not in rows:
            out[name] = large * small * rng.standard_normal(shape)
            continue
        part = np.full(shape, large)
        for axis, length in enumerate(shape):
            v = _hadamard_axis(rows.index(name), length, block, rng)
            part = part * v.reshape((length,) + (1,) * (len(shape) - axis - 1))
        out[name] = part + small * rng.standard_normal(shape)
    return out


def _exact(shapes: Shapes, products: Sequence[Product], fmt: Format,
           rng: np.random.Generator) -> dict[str, np.ndarray]:
    fewest = _least_shared(_uses(products))
    wide = fewest[int(rng.integers(len(fewest)))] if fewest else None
    widths = exact_widths(products, shapes, fmt, wide=wide)
    out = {}
    for name, shape in shapes.items():
        top = (1 << widths[name]) - 1
        out[name] = rng.integers(-top, top, shape, endpoint=True) * 2.0 ** -widths[name]
    return out


def _special(shapes: Shapes, products: Sequence[Product], fmt: Format,
             rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = _normal(shapes, products, fmt, rng)
    specials = np.array(special_values(fmt))
    for arr in out.values():
        flat = arr.reshape(-1)
        if flat.size == 0:
            continue
        count = max(1, math.ceil(SPECIAL_SHARE * flat.size))
        where = rng.choice(flat.size, size=count, replace=False)
        flat[where] = specials[rng.integers(len(specials), size=count)]
    return out


def _as_rows(x: np.ndarray) -> np.ndarray:
    """``x`` as a 2-D view of its rows (the last axis); a 0-d array as one row."""
    return x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)


def _by_rows(shapes: Shapes, rng: np.random.Generator,
             change: Callable[[np.ndarray, np.random.Generator], None]) -> dict[str, np.ndarray]:
    """N(0, 1) inputs whose rows (a 2-D view, :func:`_as_rows`) ``change`` alters in place."""
    out = {}
    for name, shape in shapes.items():
        x = rng.standard_normal(shape)
        if x.size:
            change(_as_rows(x), rng)
        out[name] = x
    return out


def _shift_rows(rows: np.ndarray, rng: np.random.Generator) -> None:
    lo, hi = ROW_SHIFT_EXPONENTS
    count, width = rows.shape
    kind = rng.integers(4, size=count)
    shift = 2.0 ** rng.integers(lo, hi, size=count, endpoint=True)
    rows += np.select([kind == 1, kind == 2], [shift, -shift], 0.0)[:, None]
    sink = np.flatnonzero(kind == 3)
    rows[sink, rng.integers(width, size=sink.size)] += shift[sink]


def _rows(shapes: Shapes, products: Sequence[Product], fmt: Format,
          rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _by_rows(shapes, rng, _shift_rows)


def _large(shapes: Shapes, products: Sequence[Product], fmt: Format,
           rng: np.random.Generator) -> dict[str, np.ndarray]:
    lo, hi = LARGE_EXPONENTS

    def near_overflow(rows: np.ndarray, rng: np.random.Generator) -> None:
        count = rows.shape[0]
        magnitude = fmt.max / 2.0 ** rng.integers(lo, hi, size=count, endpoint=True)
        sign = _signs(rng, (count,))
        rows[:] = (sign * magnitude)[:, None] * (1.0 + LARGE_SPREAD * rows)

    return _by_rows(shapes, rng, near_overflow)


_GENERATORS: dict[str, Generator] = {
    "normal": _normal,
    "uniform": _uniform,
    "positive": _positive,
    "heavy": _heavy,
    "cancel": _cancel,
    "exact": _exact,
    "special": _special,
    "rows": _rows,
    "large": _large,
}


def _check_arguments(family: str, shapes: Shapes, products: Sequence[Product]) -> None:
    if family not in _GENERATORS:
        raise InvalidArgument(f"{family=} is unknown; use one of {FAMILIES}")
    for p in products:
        missing = [n for n in (p.a, p.b) if n not in shapes]
        if missing:
            raise InvalidArgument(
                f"product {p} multiplies {missing}, which are not among the inputs "
                f"{sorted(shapes)}"
            )


def generate_inputs(family: str, shapes: Shapes, products: Sequence[Product],
                    storage: Format | str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Bulk input values of ``family``, as float64 arrays exact in ``storage``.

    Parameters
    ----------
    family : str
        One of :data:`FAMILIES` (see the module docstring).
    shapes : mapping
        Shape of each input, by name; arrays come back in this order and are
        drawn from ``rng`` in this order.
    products : sequence of Product
        The op's products (``op.products(params)``): the heavy and cancel
        families scale by the longest reduction, the cancel family pairs the
        multiplied inputs, the exact family budgets its bit widths by them.
    storage : Format or str
        Storage format; every value is quantized into it (round to nearest).
    rng : numpy.random.Generator
        The case's generator; the result is a function of its state.

    Returns
    -------
    dict of str to ndarray
        One float64 array per input, finite except in the ``"special"`` family.

    Examples
    --------
    >>> from numoracle.oracle.ops.base import Product
    >>> rng = np.random.default_rng(0)
    >>> xs = generate_inputs("exact", {"a": (2, 3), "b": (3, 2)}, (Product("a", "b", 3),),
    ...                      "bf16", rng)
    >>> bool(np.all(xs["a"] @ xs["b"] == (xs["a"].astype(np.float32) @ xs["b"].astype(np.float32))))
    True
    """
    fmt = get_format(storage)
    _check_arguments(family, shapes, products)
    raw = _GENERATORS[family](shapes, tuple(products), fmt, rng)
    with np.errstate(over="ignore"):
        return {name: quantize(raw[name], fmt) for name in shapes}


def _mask(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """A boolean mask of ``shape`` in one of :data:`MASK_PATTERNS`, inverted
    half the time: causal (``j <= i`` over the last two axes; a prefix for a
    1-d mask), padding (each row a prefix of random length, the empty and the
    full prefix among the lengths) or random (True with chance one half);
    rows of one value then mixed (rows of one entry True) unless
    :data:`CONSTANT_MASK_ROWS`."""
    pattern = MASK_PATTERNS[int(rng.integers(len(MASK_PATTERNS)))]
    invert = bool(rng.random() < 0.5)
    if pattern == "random" or not shape or math.prod(shape) == 0:
        mask = rng.random(shape) < 0.5
    elif pattern == "causal" and len(shape) >= 2:
        rows, cols = shape[-2:]
        mask = np.broadcast_to(np.arange(cols)[None, :] <= np.arange(rows)[:, None], shape)
    else:  # padding (and a 1-d causal mask: a prefix)
        width = shape[-1]
        lead = shape[:-1]
        lengths = rng.integers(-1, width + 1, size=lead, endpoint=True)
        lengths = np.clip(lengths, 0, width)  # the empty and the full prefix twice as often
        mask = np.arange(width) < lengths[..., None]
    mask = np.array(mask ^ invert, dtype=bool)
    if not CONSTANT_MASK_ROWS and mask.ndim:
        rows = mask.reshape(-1, mask.shape[-1])
        if rows.shape[1] == 1:  # one key: kept, as torch's boolean attention masks keep True
            rows[:] = True
        else:
            constant = rows.all(axis=1) | ~rows.any(axis=1)
            rows[constant, -1] ^= True  # one entry of a row of one value flipped: mixed
    return mask


def generate_integers(specs: Mapping[str, IntegerInput], shapes: Shapes,
                      rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Values of the integer and boolean inputs (class labels, indices, masks).

    A boolean input is a mask in one of :data:`MASK_PATTERNS`; any other
    value is ``lo + floor(u * (hi - lo))`` with ``u`` uniform in
    ``[0, 1)`` from ``rng``: uniform in ``[lo, hi)``, and a function of the
    case's seed whatever the range, so that a case shrunk to fewer classes
    keeps every label below the new count and moves each one only as far as
    the range shrank. No value family, storage rounding or special value
    applies to them.

    Parameters
    ----------
    specs : mapping of str to IntegerInput
        The op's integer inputs (``op.integer_inputs(params)``), drawn in this
        order after the floating-point ones.
    shapes : mapping
        Shape of each input, by name.
    rng : numpy.random.Generator
        The case's generator.

    Returns
    -------
    dict of str to ndarray
        One ``int64`` (or ``bool``) array per integer input.

    Examples
    --------
    >>> from numoracle.oracle.ops.base import IntegerInput
    >>> labels = generate_integers({"labels": IntegerInput(0, 5)}, {"labels": (1000,)},
    ...                            np.random.default_rng(0))["labels"]
    >>> labels.dtype.name, int(labels.min()), int(labels.max())
    ('int64', 0, 4)
    """
    out: dict[str, np.ndarray] = {}
    for name, spec in specs.items():
        if spec.hi <= spec.lo:
            raise InvalidArgument(f"integer input {name!r} has the empty range [{spec.lo}, "
                                  f"{spec.hi}); hi must exceed lo")
        if spec.dtype == "bool":
            out[name] = _mask(shapes[name], rng)
            continue
        u = rng.random(shapes[name])
        values = np.minimum(spec.lo + np.floor(u * (spec.hi - spec.lo)), spec.hi - 1)
        out[name] = values.astype(np.int64).astype(spec.dtype)
    return out
