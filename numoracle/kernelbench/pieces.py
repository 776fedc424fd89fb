"""Judging a row-separable official instance whole, in pieces of rows.

Where an official instance's float64 floor is above what the oracle holds but
its model is row-separable (:mod:`.sampling`: output row ``i`` depends on input
row ``i`` alone), every row can still be judged: the candidate runs once on the
whole instance and all of its output is kept; the oracle evaluates consecutive
pieces of rows ``[i0, i1)`` of the inputs, as many rows per piece as the floor
admits (:func:`piece_rows`), and each piece is compared with the same rows of
the candidate's outputs. The comparisons merge into one verdict per output
(:func:`merged`): the worst ratio and the failing elements' count over every
piece, the worst elements at their indices in the whole output.

A piece is a range of rows, so a case names it by its ends
(:attr:`~.cases.KBCase.span`), never by a list of rows: a failing piece's
repro replays that piece alone. An instance whose pieces would be more than
:data:`MAX_PIECES` (the oracle's time grows with them) is judged on a sample of
its rows instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..checking.verdict import WORST_SHOWN, OutputVerdict
from .cases import float64_bytes, valid_sizes
from .problem import Problem
from .sampling import RowPlan

__all__ = ["MAX_PIECES", "piece_rows", "spans", "merged"]

#: pieces an official instance is judged in at most (more: on a sample of its rows)
MAX_PIECES = 32


def piece_rows(problem: Problem, base: Mapping[str, Any], plan: RowPlan,
               max_bytes: int) -> int:
    """The most rows of ``plan``'s knob whose float64 floor is within ``max_bytes``
    (at least 1; the floor grows with the rows, found by bisection), spread evenly:
    the instance's rows over as few pieces as that takes."""
    def fits(k: int) -> bool:
        sizes = {**base, plan.knob: k}
        return valid_sizes(problem, sizes) and float64_bytes(problem, sizes) <= max_bytes
    lo, hi = 1, plan.total  # fits(lo) assumed: the plan holds at least one row
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    count = -(-plan.total // lo)
    return -(-plan.total // count)


def spans(start: int, stop: int, per: int) -> list[tuple[int, int]]:
    """Consecutive ranges ``[i0, i1)`` of at most ``per`` rows covering ``[start, stop)``."""
    return [(i, min(i + per, stop)) for i in range(start, stop, per)]


def merged(parts: Sequence[tuple[int, OutputVerdict]]) -> OutputVerdict:
    """One output's verdict from its pieces' (``(first row, verdict)``, in order):
    passed where every piece passed; the failing elements counted over all; the
    worst ratios the largest; the worst elements the worst of all, at their indices
    in the whole output; the median ratios the median of the pieces' medians
    weighted by their elements (an estimate: the ratios of all are never held at
    once); a non-finite element's sentence that of the first piece with one."""
    first = parts[0][1]
    if len(parts) == 1 and parts[0][0] == 0:
        return first
    counts = np.array([v.count for _, v in parts], dtype=np.float64)
    shape = (sum(v.shape[0] for _, v in parts), *first.shape[1:]) if first.shape else ()
    worst = sorted((replace(w, index=(w.index[0] + i0, *w.index[1:])) if w.index else w
                    for i0, v in parts for w in v.worst), key=lambda w: -_key(w.ratio))
    nonfinite = next((f"rows {i0} to {i0 + v.shape[0] - 1}: {v.nonfinite}"
                      for i0, v in parts if v.nonfinite), None)
    return replace(
        first, shape=shape, n=max(v.n for _, v in parts),
        passed=all(v.passed for _, v in parts),
        mismatched=sum(v.mismatched for _, v in parts),
        worst_ratio=max(v.worst_ratio for _, v in parts),
        worst_ratio_det=max(v.worst_ratio_det for _, v in parts),
        worst_ratio_prob=max(v.worst_ratio_prob for _, v in parts),
        median_ratio=_weighted_median([v.median_ratio for _, v in parts], counts),
        median_ratio_det=_weighted_median([v.median_ratio_det for _, v in parts], counts),
        median_ratio_prob=_weighted_median([v.median_ratio_prob for _, v in parts], counts),
        exact=all(v.exact for _, v in parts), nonfinite=nonfinite,
        worst=worst[:WORST_SHOWN])


def _key(ratio: float) -> float:
    """A ratio's sort key: NaN first, as the worst."""
    return float("inf") if ratio != ratio else ratio


def _weighted_median(values: Sequence[float], weights: np.ndarray) -> float:
    v = np.asarray(values, dtype=np.float64)
    if np.isnan(v).any():
        return float("nan")
    order = np.argsort(v, kind="stable")
    cumulative = np.cumsum(weights[order])
    return float(v[order][int(np.searchsorted(cumulative, cumulative[-1] / 2))])
