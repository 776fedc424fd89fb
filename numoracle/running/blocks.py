"""Seed blocks: the cases of one target and op, cut into blocks that each
draw with a seed of their own, and their results merged back into one.

Block 0 draws with the run's seed and block ``i`` with :func:`block_seed`;
the process that starts the run draws every block's cases
(:mod:`numoracle.running.draws`) and hands them to whichever process judges
them, so which cases a block holds depends on the run's seed and the
block's index — not on the node, the number of workers or the order in
which blocks finish. A scheduled run
(:mod:`numoracle.running.schedule`) gives each row a block of one case, a
block up to its minimum of cases and a block of the rest; a cluster run
(:mod:`numoracle.running.cluster`) cuts the cases into blocks of a fixed size.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence

from ..outcome import RunVerdict
from .runner import TargetResult

__all__ = ["block_seed", "merge_results"]


def block_seed(seed: int, index: int) -> int:
    """The Hypothesis seed of block ``index`` of a run seeded ``seed``.

    Block 0 keeps ``seed`` (one block draws a local run's cases); the others
    take 64 bits of SHA-256 of both, so they depend on nothing else — not on
    the node, the order of completion or the number of workers.

    >>> block_seed(0, 0), block_seed(0, 1) == block_seed(0, 1), block_seed(0, 1) != block_seed(1, 1)
    (0, True, True)
    """
    if index == 0:
        return seed
    digest = hashlib.sha256(f"numoracle-block:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


#: fields merge_results merges by their meaning; the others by their type (_merge_rest)
_MERGED_BY_MEANING = {"target", "op", "precision", "verdict", "diagnosis", "message", "repro",
                      "repro_shape", "cases_to_catch", "worst_ratio", "seconds", "per_model",
                      "regime", "asked", "model"}


def merge_results(blocks: Sequence[TargetResult]) -> TargetResult:
    """The judged blocks of one target, op and regime, in block order, as one
    result: cases summed, the worst ratio the largest, samples concatenated,
    the first failure (by block order) kept with its repro and the cases it
    took to catch counted from the first block."""
    if not blocks:
        raise ValueError("merge_results needs at least one block")
    first = blocks[0]
    merged = TargetResult(first.target, first.op, first.precision, regime=first.regime,
                          asked=sum(b.asked for b in blocks), model=first.model)
    for r in blocks:
        first_failure = r.verdict is RunVerdict.FAIL and merged.verdict is not RunVerdict.FAIL
        if first_failure:
            merged.verdict, merged.diagnosis = RunVerdict.FAIL, r.diagnosis
            merged.message = r.message
            merged.repro, merged.repro_shape = r.repro, r.repro_shape
            if r.cases_to_catch is not None:
                merged.cases_to_catch = merged.cases + r.cases_to_catch
        elif (r.verdict not in (RunVerdict.PASS, RunVerdict.FAIL)
              and merged.verdict is RunVerdict.PASS):
            merged.verdict, merged.diagnosis = r.verdict, r.diagnosis
        merged.worst_ratio = max(merged.worst_ratio, r.worst_ratio)
        merged.seconds += r.seconds
        for name, ratios in r.per_model.items():
            seen = merged.per_model.setdefault(name, {})
            for m, v in ratios.items():
                seen[m] = max(seen.get(m, 0.0), v)
        _merge_rest(merged, r, first_failure)
    return merged


def _merge_rest(merged: TargetResult, r: TargetResult, first_failure: bool) -> None:
    """Counts add up (cases, failures, ...), lists concatenate (samples, ...);
    any other field is the first failing block's."""
    for f in dataclasses.fields(TargetResult):
        if f.name in _MERGED_BY_MEANING:
            continue
        mine, theirs = getattr(merged, f.name), getattr(r, f.name)
        if isinstance(theirs, int) and not isinstance(theirs, bool):
            setattr(merged, f.name, mine + theirs)
        elif isinstance(theirs, list):
            mine.extend(theirs)
        elif first_failure:
            setattr(merged, f.name, theirs)
