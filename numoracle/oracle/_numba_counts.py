"""The exact count of larger entries in a row, compiled by numba (imported only where
numba is installed, through :mod:`~numoracle.oracle._numba_rows`): the ``k`` of the
softmax family's online bound, per entry the number of entries of its row that may
exceed it.

Both counts sort the row's upper ends ``hi`` into ``2 n`` buckets of equal width over
their finite range (a counting sort: a histogram, its prefix sums, a scatter). The
buckets are non-decreasing in the value, so for a query ``v`` in bucket ``b`` every
entry of a higher bucket exceeds ``v`` and none of a lower one does: the count is
``n`` less the end of ``b`` plus the entries of ``b`` itself above ``v``, compared
with ``v`` one by one where ``b`` holds at most :data:`_SMALL` (four compares without
a branch, the slots past the bucket masked), else counted in the bucket sorted. The
queries run in the buckets' order (each query's bucket lies beside it in the sorted
row, in the first-level cache, instead of anywhere in the row), with unsigned
indices (numba adds no test for a negative index). Ties do not count (``>``); no
entry may be NaN; ``-inf`` takes the lowest bucket and ``+inf`` the highest (the
range is over the finite entries; a range too wide for float64 puts every entry in
one bucket, sorted). At most ``2^30`` entries (the offsets are uint32).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

__all__ = ["larger_counts_row", "larger_counts_self"]

_jit = numba.njit(cache=True, nogil=True)
_inline = numba.njit(cache=True, nogil=True, inline="always")

_U = np.uint64
_ONE = np.uint64(1)
#: the most entries of a bucket that a query compares with one by one, without a
#: branch (the compares below are written out for four)
_SMALL = 4
#: the most entries of a crowded bucket that :func:`larger_counts_self` compares in
#: pairs (a bucket of more is sorted and searched)
_PAIRS = 48


@_inline
def _bucket(v: float, low: float, scale: float, top: int) -> Any:
    """The bucket of ``v`` among ``top + 1`` (non-decreasing in ``v``: each step is;
    NaN in bucket 0), without a branch."""
    f = (v - low) * scale
    f = f if f > 0.0 else 0.0
    f = f if f < top else float(top)
    return np.uint32(f)


@_inline
def _histogram(hi: Any) -> tuple[float, float, int, Any, Any, Any, Any]:
    """The buckets of ``hi``: the finite range's low end, the scale and the highest
    bucket of :func:`_bucket`, each entry's bucket, the buckets' starts (``2 n + 1``
    offsets: bucket ``b`` is ``[start[b], start[b + 1])``), the crowded buckets (more
    than :data:`_SMALL` entries) and how many there are."""
    n = hi.size
    low, high = np.inf, -np.inf
    for j in range(n):
        h = hi[j]
        fin = abs(h) < np.inf
        low = min(low, h) if fin else low
        high = max(high, h) if fin else high
    nb = 2 * n
    top = nb - 1
    width = high - low
    scale = top / width if width > 0.0 and width < np.inf else 0.0
    start = np.zeros(nb + 1, dtype=np.uint32)
    which = np.empty(n, dtype=np.uint32)
    for j in range(n):
        which[j] = _bucket(hi[j], low, scale, top)
    for j in range(n):
        start[_U(which[j])] += np.uint32(1)
    crowded = np.empty(n // (_SMALL + 1) + 1, dtype=np.uint32)
    n_crowded = _U(0)
    acc = np.uint32(0)
    for b in range(nb + 1):  # (the counts into their exclusive prefix sums)
        c = start[b]
        crowded[n_crowded] = b  # (written always, kept where crowded: no branch)
        n_crowded += _U(c > _SMALL)
        start[b] = acc
        acc += c
    return low, scale, top, which, start, crowded, n_crowded


@_inline
def _above(v: float, a: Any, e: Any, buf: Any) -> Any:
    """How many of the (up to :data:`_SMALL`) entries ``buf[a:e]`` exceed ``v``
    (``buf`` holds :data:`_SMALL` slots past its last bucket)."""
    c = _U(0)
    c += _U(a < e) & _U(buf[a] > v)
    c += _U(a + _ONE < e) & _U(buf[a + _ONE] > v)
    c += _U(a + _U(2) < e) & _U(buf[a + _U(2)] > v)
    c += _U(a + _U(3) < e) & _U(buf[a + _U(3)] > v)
    return c


@_jit
def larger_counts_self(x: Any, out: Any) -> None:
    """Per entry of ``x``: how many entries of ``x`` exceed it (``lo`` and ``hi`` of
    :func:`larger_counts_row` one array: an exact row), into ``out``. The entries are
    scattered into their buckets with their positions; each is then counted against
    its own bucket, those of crowded buckets in pairs (or by a binary search of the
    bucket sorted, past :data:`_PAIRS` entries)."""
    n = x.size
    low, scale, top, which, start, crowded, n_crowded = _histogram(x)
    pos = start[:-1].copy()
    buf = np.zeros(n + _SMALL)  # (read past a bucket's end, masked)
    idx = np.empty(n, dtype=np.uint32)  # each slot's entry
    slot = np.empty(n, dtype=np.uint32)  # each slot's bucket
    for j in range(n):
        b = _U(which[j])
        p = _U(pos[b])
        buf[p] = x[j]
        idx[p] = j
        slot[p] = b
        pos[b] = p + _ONE
    for k in range(n):
        v = buf[k]
        b = _U(slot[k])
        e = _U(start[b + _ONE])
        out[_U(idx[k])] = float(_U(n) - e + _above(v, _U(start[b]), e, buf))
    for q in range(n_crowded):
        b = _U(crowded[q])
        a, e = _U(start[b]), _U(start[b + _ONE])
        if e - a <= _U(_PAIRS):
            for k in range(a, e):
                v = buf[k]
                c = _U(0)
                for t in range(a, e):
                    c += _U(buf[t] > v)
                out[_U(idx[k])] = float(_U(n) - e + c)
        else:
            s = np.sort(buf[a:e])
            for k in range(a, e):
                ends = _U(np.searchsorted(s, buf[k], side="right"))
                out[_U(idx[k])] = float(_U(n) - a - ends)


@_jit
def larger_counts_row(lo: Any, hi: Any, out: Any) -> None:
    """Per entry of ``lo``: how many entries of ``hi`` exceed it (into ``out``). The
    entries of ``hi`` are scattered into their buckets, the crowded ones sorted; each
    query is counted against its bucket (those of crowded buckets by a binary search,
    after the rest)."""
    n = hi.size
    low, scale, top, which, start, crowded, n_crowded = _histogram(hi)
    pos = start[:-1].copy()
    buf = np.zeros(n + _SMALL)  # (read past a bucket's end, masked)
    for j in range(n):
        b = _U(which[j])
        p = _U(pos[b])
        buf[p] = hi[j]
        pos[b] = p + _ONE
    for q in range(n_crowded):
        b = _U(crowded[q])
        buf[start[b]:start[b + _ONE]].sort()
    m = lo.size
    late = np.empty(m, dtype=np.uint32)  # (the queries of crowded buckets)
    n_late = _U(0)
    for i in range(m):
        v = lo[i]
        b = _U(_bucket(v, low, scale, top))
        a, e = _U(start[b]), _U(start[b + _ONE])
        out[i] = float(_U(n) - e + _above(v, a, e, buf))
        late[n_late] = i  # (written always, kept where crowded: no branch)
        n_late += _U(e - a > _U(_SMALL))
    for q in range(n_late):
        i = _U(late[q])
        v = lo[i]
        b = _U(_bucket(v, low, scale, top))
        a, e = _U(start[b]), _U(start[b + _ONE])
        while a < e:  # the first entry of the bucket above v
            mid = (a + e) >> _ONE
            if buf[mid] <= v:
                a = mid + _ONE
            else:
                e = mid
        out[i] = float(_U(n) - a)
