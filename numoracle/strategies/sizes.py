"""Sizes: feature dimensions, batch sizes and reduction lengths.

Bugs hide at particular sizes: 1 (broadcasting, squeezed axes), odd and prime
sizes (tails of vectorised or tiled loops), powers of two and their
neighbours (tile boundaries, off-by-one), sizes ``≡ 64 mod 128`` (a half tile
of 128 left over: sequence lengths that fused attention kernels get wrong).
:func:`dims` draws those often and any size in range otherwise; it shrinks
towards the smallest size.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ..errors import InvalidArgument
from ._validate import check_int

__all__ = ["MAX_SIZE", "dims", "batch_sizes", "interesting_sizes"]

#: largest size a strategy draws (the ops' own limit on a dimension)
MAX_SIZE = 1 << 24

#: sizes ``64 + 128 k`` favoured, up to this one
HALF_TILES_UP_TO = 4096
#: the largest prime below each power of two from 4 on, and a few small primes
_PRIMES = (2, 3, 5, 7, 11, 13, 17, 31, 61, 127, 251, 509, 1021, 2039, 4093, 8191, 16381,
           32749, 65521, 131071, 262139, 524287, 1048573)


def interesting_sizes(min_value: int, max_value: int,
                      include: Iterable[int] = ()) -> tuple[int, ...]:
    """Sizes in ``[min_value, max_value]`` that :func:`dims` favours, ascending:
    the bounds, ``include``, primes, powers of two and their neighbours, and
    ``64 + 128 k`` up to :data:`HALF_TILES_UP_TO`."""
    powers = [1 << j for j in range(MAX_SIZE.bit_length())]
    near = {p + d for p in powers for d in (-1, 0, 1)}
    half_tiles = set(range(64, HALF_TILES_UP_TO, 128))
    pool = near | half_tiles | set(_PRIMES) | set(include) | {min_value, max_value}
    return tuple(sorted(v for v in pool if min_value <= v <= max_value))


def _check_include(include: object) -> tuple[int, ...]:
    if isinstance(include, (str, bytes)) or not isinstance(include, Iterable):
        raise InvalidArgument(f"{include=} must be a collection of positive ints, e.g. (1, 3)")
    return tuple(check_int("include entry", v, min_value=1) for v in include)


def dims(*, min_value: int = 1, max_value: int = 1024,
         include: Iterable[int] = (1,)) -> SearchStrategy[int]:
    """Feature sizes in ``[min_value, max_value]``.

    Half the draws come from :func:`interesting_sizes` (1, primes, powers of two
    and their neighbours, the bounds and ``include``), the rest from the whole
    range. Entries of ``include`` outside the range are ignored, so the default
    works for any ``min_value``. Pass ``max_value=65536`` for reduction lengths
    up to 2**16.

    Examples
    --------
    >>> from hypothesis import find
    >>> 100 < find(dims(max_value=1000), lambda v: v > 100) <= 1000
    True
    """
    lo = check_int("min_value", min_value, min_value=1, max_value=MAX_SIZE)
    hi = check_int("max_value", max_value, min_value=1, max_value=MAX_SIZE)
    if hi < lo:
        raise InvalidArgument(f"{max_value=} must be at least {min_value=}")
    return _dims(lo, hi, _check_include(include))


@lru_cache(maxsize=4096)
def _dims(lo: int, hi: int, include: tuple[int, ...]) -> SearchStrategy[int]:
    """One strategy per range, built and validated once (the case strategy asks
    for a range per dimension per draw)."""
    return st.one_of(st.sampled_from(interesting_sizes(lo, hi, include)), st.integers(lo, hi))


def batch_sizes(*, min_value: int = 1, max_value: int = 128) -> SearchStrategy[int]:
    """Batch sizes in ``[min_value, max_value]``, favouring 1 and ``max_value``
    besides the sizes :func:`dims` favours; shrinks towards ``min_value``."""
    return dims(min_value=min_value, max_value=max_value, include=(1, max_value))
