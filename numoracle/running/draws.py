"""The cases a run judges, and how they are drawn.

Hypothesis draws a target's cases from :func:`default_strategy` under a seed
(:func:`draw_cases`, public API only: ``@given`` with ``hypothesis.seed``).
Which cases a seed gives may also depend on the process that draws them —
Hypothesis mixes literals of the modules loaded there into its draws — so
where work crosses a process boundary, the cases are drawn by the process
that starts the run (the *driver*) or by a process with exactly its modules
loaded, and the workers only judge what they are given:

- a cluster block (:mod:`numoracle.running.cluster`) takes its
  :func:`draw_cases` with the block's seed along with its task;
- a row of a scheduled run (:mod:`numoracle.running.schedule`, and its
  worker processes in :mod:`numoracle.running.pool`, each with a draw
  process of its own started with the driver's modules) takes the cases of each
  of its blocks chunk by chunk (:class:`BlockDraws`), as its time budget
  consumes them (block 1 of a row in the small regime starts with a case at
  every edge of its sizes, :func:`edge_cases`: the first ten or so cases of
  a row reach the top of every size range and a partial tile): chunk ``j`` of a block is :data:`CHUNK` cases drawn with
  :func:`chunk_seed` ``(block seed, j)``, cases an earlier chunk of the block
  already gave left out. The chunks depend on the seeds alone, so one process
  or several judge the same cases per row.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from ..cases.case import Case
from ..errors import InvalidArgument
from ..targets.target import Target

__all__ = ["default_strategy", "draw_cases", "edge_cases", "raw_chunk", "case_digest", "chunk_seed", "BlockDraws",
           "BlockCases", "CHUNK"]

#: cases per chunk of a block drawn on demand
CHUNK = 25


def default_strategy(target: Target, **overrides: Any) -> st.SearchStrategy[Case]:
    """Cases for ``target``: its op, its storage format, its layouts, its
    reduction limit; every value family (those of real workloads where the op
    names them), special values overlaid at times."""
    from ..strategies import cases, families_for  # noqa: PLC0415 - strategies need hypothesis

    kw: dict[str, Any] = {"op": target.op, "storage": target.precision.storage.name,
                          "max_reduction": target.max_reduction, "layouts": target.layouts,
                          "families": families_for(target.op), "max_overlays": 2}
    kw.update(overrides)
    return cases(**kw)


def draw_cases(target: Target, n: int, seed: int = 0, **overrides: Any) -> list[Case]:
    """The first ``n`` cases :func:`default_strategy` (with ``overrides``) draws
    for ``target`` under Hypothesis seed ``seed``, without running anything
    (fewer where the strategy has fewer distinct cases to give)."""
    drawn: list[Case] = []

    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet)
    @given(default_strategy(target, **overrides))
    def collect(case: Case) -> None:
        drawn.append(case)

    hypothesis_seed(seed)(collect)()
    return drawn[:n]


def edge_cases(target: Target, seed: int = 0, **overrides: Any) -> list[Case]:
    """A case at every edge of ``target``'s sizes
    (:func:`~numoracle.strategies.cases.edges`: each dimension at the top of
    its range, then every dimension at a partial tile).

    Unless ``overrides`` name the families, the tops are in the ``positive``
    family (partial sums grow with the length, so a narrower accumulator over
    the longest reduction stagnates far past the bound; the exact family's
    narrow grid there may be exact in it) and the partial tile in the
    ``exact`` family (where a lost or repeated term shows, however small);
    no special value is overlaid (an overlay may leave the element it lands
    on unjudged). The rest of each case — format, layouts, flags, seed — is
    drawn under a seed of ``seed`` and the edge (the second case Hypothesis
    draws: not its simplest).
    """
    from ..strategies import edges  # noqa: PLC0415 - strategies need hypothesis

    out = []
    for edge in edges(target.op, overrides.get("regime", "small")):
        digest = hashlib.sha256(f"numoracle-edge:{seed}:{edge}".encode()).digest()
        kw = {"families": ("exact",) if edge == "odd" else ("positive",), "max_overlays": 0,
              **overrides}
        drawn = draw_cases(target, 2, int.from_bytes(digest[:8], "little"), edge=edge, **kw)
        out.extend(drawn[-1:])
    return out


def case_digest(case: Case) -> str:
    """A short digest of ``case``'s plain data: equal cases, equal digests."""
    return hashlib.sha1(json.dumps(case.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


def chunk_seed(seed: int, chunk: int) -> int:
    """The Hypothesis seed of chunk ``chunk`` of a block seeded ``seed``.

    Chunk 0 keeps ``seed`` (a block of one chunk draws what :func:`draw_cases`
    draws with the block's seed); the others take 64 bits of SHA-256 of both.

    >>> chunk_seed(5, 0), chunk_seed(5, 1) == chunk_seed(5, 1), chunk_seed(5, 1) != chunk_seed(6, 1)
    (5, True, True)
    """
    if chunk == 0:
        return seed
    digest = hashlib.sha256(f"numoracle-chunk:{seed}:{chunk}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def raw_chunk(target: Target, seed: int, size: int, index: int, edges: bool,
              overrides: dict[str, Any]) -> list[Case]:
    """Chunk ``index`` of a block seeded ``seed`` before the cases of earlier
    chunks are left out (:meth:`BlockDraws.raw`)."""
    drawn = draw_cases(target, size, chunk_seed(seed, index), **overrides)
    if index == 0 and edges:
        drawn = edge_cases(target, seed, **overrides) + drawn
    return drawn


class BlockDraws:
    """The cases of one block of a row — ``target`` in one size regime, drawn
    with the block's ``seed`` — chunk after chunk, each case once.

    Chunk ``j`` holds the cases of :func:`draw_cases` ``(target, chunk,
    chunk_seed(seed, j))`` that no earlier chunk gave; a chunk that adds
    nothing new (the strategy has no more distinct cases) ends the block.
    With ``edges``, chunk 0 starts with :func:`edge_cases` ``(target, seed)``.
    """

    def __init__(self, target: Target, seed: int, *, chunk: int = CHUNK, edges: bool = False,
                 **overrides: Any) -> None:
        if chunk < 1:
            raise InvalidArgument(f"chunk={chunk!r} must be a positive int; give e.g. {CHUNK}")
        self.target, self.seed, self.size, self.overrides = target, seed, chunk, overrides
        self.edges = edges
        self.drawn = 0  # chunks drawn so far
        self._seen: set[str] = set()
        self.ended = False  # a chunk added nothing new: the block has no more cases

    def raw(self, index: int) -> list[Case]:
        """What chunk ``index`` draws before the cases of earlier chunks are
        left out: a function of the target, the seeds and the index alone, so
        that any process (with the same modules loaded) may draw it."""
        return raw_chunk(self.target, self.seed, self.size, index, self.edges, self.overrides)

    def chunk(self, index: int, raw: list[Case] | None = None) -> list[Case]:
        """Chunk ``index``, the next one to draw (chunks are drawn in order:
        which cases a chunk leaves out depends on those before it); ``raw``:
        its :meth:`raw` cases where they were drawn elsewhere."""
        if index != self.drawn:
            raise InvalidArgument(f"chunk index={index!r} is out of order: chunk {self.drawn} "
                                  "is the next to draw; ask for the chunks 0, 1, 2, ... in turn")
        self.drawn += 1
        if self.ended:
            return []
        fresh = []
        drawn = self.raw(index) if raw is None else raw
        for case in drawn:
            key = case_digest(case)
            if key not in self._seen:
                self._seen.add(key)
                fresh.append(case)
        if not fresh:
            self.ended = True
        return fresh


class BlockCases:
    """Up to ``n`` cases of one block, fetched chunk by chunk (``fetch(j)``
    gives chunk ``j``; an empty chunk ends the block) only as far as they are
    judged, and none fetched past ``end`` (a ``time.monotonic()`` instant):
    what :func:`~numoracle.running.runner.run_target` takes as ``cases`` in a
    scheduled run."""

    def __init__(self, n: int, fetch: Callable[[int], list[Case]],
                 end: float | None = None) -> None:
        self.n, self.fetch, self.end = n, fetch, end

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[Case]:
        given, index = 0, 0
        while given < self.n:
            if self.end is not None and time.monotonic() >= self.end:
                return
            chunk = self.fetch(index)
            if not chunk:
                return
            for case in chunk[:self.n - given]:
                given += 1
                yield case
            index += 1

