"""A run's plan: rows (target × op × size regime), a warm-up before the clock,
then a fair share of the budget for every row.

The budget of a run is shared among its rows so that every row is judged:

1. **Warm-up, before the clock.** Each target runs one small case first, so
   that the one-time costs — imports, the CUDA context, CuPy's NVRTC
   compilation, torch's first cuDNN call, numba's JIT — are paid once and
   outside the budget; :class:`RunPlan` reports them as a line of their own.
2. **One case each.** Every row's first case (block 0, the run's seed) runs
   before any row gets a second, while the budget lasts: a row judged by no
   case has no result.
3. **The minimum next.** Every row gets up to ``min_cases`` cases (block 1,
   seed :func:`~numoracle.running.blocks.block_seed` ``(seed, 1)``; in the
   small regime it starts with a case at every edge of the row's sizes,
   :func:`~numoracle.running.draws.edge_cases`) within
   its share of the time left — the time left divided among the rows still
   to run, weighted by the row's part of its target's time — before any row
   gets more; a case starts only when the row's cases so far say it ends
   within the share (:func:`expected_seconds`). The cheapest rows go first,
   so that a slow row's last case cannot eat a cheap row's share.
4. **The rest.** The time left is shared again among the rows that passed
   and want more: block 2 (seed ``block_seed(seed, 2)``), the rest of the
   cases asked for. The blocks of a row merge into one result.

The cases of every block are drawn chunk by chunk as the budget consumes
them (:class:`RunDraws`, :class:`~numoracle.running.draws.BlockDraws`): by
the process that runs the schedule, or for a worker process
(:mod:`numoracle.running.pool`) by its own draw process (``RunDraws(raw=)``)
or the driver. The cases depend on the run's seed and the row alone, so
per-row results do not depend on the number of workers when time does not
cut a row short.

A failure is shrunk within its own cap (``shrink_seconds``, and never past
the budget's end plus a twentieth) by the shrinker of given cases
(:func:`numoracle.checking.shrink.shrink`), and the row stops there. A
passing case still running at the budget's end plus that twentieth is cut
(``run_target(cut_after=...)``): not counted, the row's cases before it
kept, so that a case slower than its row's earlier ones cannot overrun the
budget.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ..outcome import Outcome, RunVerdict
from ..settings import MIN_CASES, REPORT_RESERVE, SHRINK_SHARE, RunSettings
from .blocks import block_seed, merge_results
from .draws import CHUNK, BlockCases, BlockDraws, default_strategy
from .runner import TargetResult, run_target

if TYPE_CHECKING:
    from ..cases.case import Case
    from ..targets.target import Target
    from ..checking.verdict import Verdict

__all__ = ["Row", "RunPlan", "RunSettings", "RunDraws", "judge_rows", "warm_up", "totals_line",
           "starved",
           "block_sizes", "AHEAD_CHUNKS", "WARM_AHEAD_CHUNKS",
           "MIN_CASES", "REPORT_RESERVE", "SHRINK_SHARE"]

#: chunk ``j`` of block ``index`` of row ``k``: ``fetch(k, index, j)``
Fetch = Callable[[int, int, int], "list[Case]"]

#: chunks of a block a driver draws before they are asked for (:meth:`RunDraws.ahead`) ...
AHEAD_CHUNKS = 2
#: ... and while its workers warm up, before the clock
WARM_AHEAD_CHUNKS = 8


@dataclass
class Row:
    """One line of a run's report: a target on its op in one size regime,
    ``asked`` cases, ``weight`` its part of the target's time."""

    target: Target
    regime: str = "small"
    weight: float = 1.0
    asked: int = 2000
    isolate: bool = False

    @property
    def label(self) -> str:
        extra = "" if self.regime == "small" else f" ({self.regime})"
        return f"{self.target.name} {self.target.op}{extra}"


@dataclass
class RunPlan:
    """How a run went: its results in row order, the warm-up per target, the
    seconds of warm-up, of judging and in all, and the workers used."""

    results: list[TargetResult]
    warm: dict[str, float] = field(default_factory=dict)
    warm_seconds: float = 0.0
    judge_seconds: float = 0.0
    budget: float | None = None
    jobs: int = 1
    notes: list[str] = field(default_factory=list)
    #: with workers: where the time went (:func:`~numoracle.running.pool.run_pool`'s ``stats``)
    pool: dict[str, Any] = field(default_factory=dict)

    def summary(self, wall: float | None = None, report: float | None = None) -> dict[str, Any]:
        """The run in numbers (``run.json``): rows by status, cases (in all,
        per judged row min and median), seconds of warm-up, judging,
        reporting and in all, the budget and the processes (with workers,
        ``pool``: each one's GPU, the driver's seconds drawing cases and the
        workers' seconds waiting for them)."""
        counts = {o.value: 0 for o in Outcome}  # saved by its strings
        for r in self.results:
            counts[r.status()[0].value] += 1
        judged = sorted(r.cases for r in self.results
                        if r.status()[0] in (Outcome.PASS, Outcome.FAIL))
        cases = sum(r.cases for r in self.results)
        return {"budget_s": self.budget, "jobs": self.jobs, "rows": counts,
                "cases": cases,
                "cases_per_judged_row": {"min": judged[0], "median": judged[len(judged) // 2],
                                         "max": judged[-1]} if judged else None,
                "cases_per_minute": round(60 * cases / self.judge_seconds, 1)
                if self.judge_seconds > 0 else None,
                "warm_up_s": round(self.warm_seconds, 2), "judge_s": round(self.judge_seconds, 2),
                "report_s": None if report is None else round(report, 2),
                "wall_s": None if wall is None else round(wall, 2),
                "warm_up_per_target_s": {k: round(v, 2) for k, v in self.warm.items()},
                **({"pool": self.pool} if self.pool else {})}

    def warm_line(self) -> str:
        """The warm-up as one line: its wall time and the slowest targets."""
        slow = sorted(self.warm.items(), key=lambda kv: -kv[1])[:3]
        where = ", ".join(f"{k} {s:.1f} s" for k, s in slow)
        return (f"warm-up (before the clock: imports, JIT, compilation, device contexts): "
                f"{self.warm_seconds:.1f} s for {len(self.warm)} targets and tools"
                + (f"; slowest {where}" if where else ""))


def warm_up(rows: Sequence[Row], settings: RunSettings) -> dict[str, float]:
    """Run one small case of each target of ``rows`` (not judged, nothing
    saved) and return the seconds each took, keyed ``"target op"``."""
    took: dict[str, float] = {}
    for row in rows:
        t = row.target
        key = f"{t.name} {t.op}"
        if key in took or t.unavailable_reason() is not None:
            continue
        t0 = time.perf_counter()
        run_target(t, settings, examples=1, store=None, shrink=False, isolate=row.isolate,
                   diagnose=False, strategy=default_strategy(t, regime="small"))
        took[key] = time.perf_counter() - t0
    return took


def block_sizes(row: Row, settings: RunSettings) -> list[int]:
    """Cases of each block of ``row``: one, then up to ``settings.min_cases``
    in all, then the rest of those asked for."""
    first = min(settings.min_cases, row.asked)
    return [1, first - 1, row.asked - first]


class RunDraws:
    """The cases of every row of a run: block ``index`` of row ``k`` draws
    with :func:`block_seed` ``(seed, index)`` in chunks of at most
    :data:`~numoracle.running.draws.CHUNK` cases, in the row's size regime.

    A chunk is drawn when it is asked for (:meth:`chunk`) or, by a process
    that would otherwise wait, before (:meth:`ahead`): the chunks of a block
    are drawn in turn either way, so they hold the same cases. With ``raw``
    (``raw(k, index, j)``: the raw cases of a chunk,
    :meth:`~numoracle.running.draws.BlockDraws.raw`, drawn by another process)
    this process draws nothing itself and only leaves out, in order, the
    cases earlier chunks gave.
    """

    def __init__(self, rows: Sequence[Row], settings: RunSettings, *,
                 ahead: int = AHEAD_CHUNKS, raw: Fetch | None = None) -> None:
        self.rows, self.settings, self.ahead_chunks = rows, settings, ahead
        self._sizes = [block_sizes(r, settings) for r in rows]
        self._blocks: dict[tuple[int, int], BlockDraws] = {}
        self._ready: dict[tuple[int, int, int], list[Case]] = {}
        self._asked: dict[tuple[int, int], int] = {}
        self.seconds = 0.0  # spent drawing (or waiting for the raw cases) so far
        self.raw = raw

    def block(self, k: int, index: int) -> BlockDraws:
        """The draws of block ``index`` of row ``k``."""
        key = (k, index)
        if key not in self._blocks:
            row, size = self.rows[k], self._sizes[k][index]
            self._blocks[key] = BlockDraws(row.target, block_seed(self.settings.seed, index),
                                           chunk=min(CHUNK, max(size, 1)), regime=row.regime,
                                           edges=index == 1 and row.regime == "small")
        return self._blocks[key]

    def _draw(self, k: int, index: int, j: int) -> None:
        """Chunks of the block in turn up to ``j``, into the chunks ready."""
        b = self.block(k, index)
        t0 = time.monotonic()
        try:
            while b.drawn <= j:
                jj = b.drawn
                raw = None if self.raw is None else self.raw(k, index, jj)
                self._ready[(k, index, jj)] = b.chunk(jj, raw)
        finally:
            self.seconds += time.monotonic() - t0

    def chunk(self, k: int, index: int, j: int) -> list[Case]:
        """Chunk ``j`` of block ``index`` of row ``k`` (chunks of a block in turn)."""
        self._asked[(k, index)] = max(self._asked.get((k, index), -1), j)
        if (k, index, j) not in self._ready:
            self._draw(k, index, j)
        return self._ready.pop((k, index, j))

    def ahead(self, chunks: int | None = None) -> bool:
        """Draw one chunk before it is asked for and say whether there was
        one: of the blocks with fewer than ``chunks`` (default: the ``ahead``
        given at construction) in hand beyond the last one asked, the first a
        schedule reaches (blocks 0, then 1, then 2), of those the row with the
        fewest in hand."""
        got = self.next_ahead(chunks)
        if got is None:
            return False
        self._draw(*got)
        return True

    def next_ahead(self, chunks: int | None = None,
                   drawn: Callable[[int, int], int] | None = None) -> tuple[int, int, int] | None:
        """The chunk :meth:`ahead` would draw (``(k, index, j)``), or None.
        ``drawn(k, index)``, where given, counts the chunks of a block already
        drawn (else this process's count)."""
        limit = self.ahead_chunks if chunks is None else chunks
        best: tuple[int, int, int] | None = None
        for index in range(3):
            for k in range(len(self.rows)):
                size = self._sizes[k][index]
                if size <= 0:
                    continue
                b = self.block(k, index)
                nxt = b.drawn if drawn is None else drawn(k, index)
                held = nxt - self._asked.get((k, index), -1) - 1
                if b.ended or nxt * b.size >= size or held >= limit:
                    continue
                if best is None or (index, held) < best[:2]:
                    best = (index, held, k)
            if best is not None:
                break
        if best is None:
            return None
        index, _, k = best
        return k, index, (self.block(k, index).drawn if drawn is None else drawn(k, index))

    def asked(self, k: int, index: int, j: int) -> None:
        """Note that chunk ``j`` of block ``index`` of row ``k`` was asked for
        elsewhere (what :meth:`next_ahead` counts from)."""
        self._asked[(k, index)] = max(self._asked.get((k, index), -1), j)


def _share(left: float, weights: Sequence[float], k: int) -> float:
    """Row ``k``'s part of ``left`` seconds among rows ``k`` onwards."""
    rest = sum(weights[k:])
    return max(left, 0.0) * weights[k] / rest if rest > 0 else 0.0


def judge_rows(rows: Sequence[Row], seconds: float | None, settings: RunSettings, *,
               on_case: Callable[[int, Verdict], None] | None = None,
               on_row: Callable[[int, TargetResult], None] | None = None,
               fetch: Fetch | None = None,
               ) -> list[TargetResult]:
    """Judge ``rows`` in this process within ``seconds`` (None: no limit):
    one case for every row, then up to ``settings.min_cases`` for every row,
    then the rest of the cases asked for, each within its share of the time
    left.

    ``on_case(i, verdict)`` is called per case of row ``i``, ``on_row(i,
    result)`` whenever row ``i``'s result changes; the results come back in
    row order. ``fetch(i, block, j)`` gives chunk ``j`` of a block of row
    ``i``; by default this process draws them (:class:`RunDraws`).
    """
    if fetch is None:
        fetch = RunDraws(rows, settings).chunk
    start = time.monotonic()
    end = None if seconds is None else start + seconds
    weights = [r.weight for r in rows]
    results: list[TargetResult | None] = [None] * len(rows)
    # block 0: one case per row, started whatever the shares while the budget lasts;
    # block 1: up to min_cases per row in shares; block 2: the rest in shares
    sizes = [block_sizes(r, settings) for r in rows]
    for index in range(3):
        todo = [k for k, r in enumerate(results) if sizes[k][index] > 0
                and (r.verdict is RunVerdict.PASS if r is not None else index == 0)]
        if index > 0:  # the cheapest rows first: a slow case cannot eat a cheap row's share
            todo.sort(key=lambda k: expected_seconds(results[k]))
        todo_weights = [weights[k] for k in todo]
        for i, k in enumerate(todo):
            now = time.monotonic()
            if end is not None and now >= end:
                break
            row, prev = rows[k], results[k]
            share = None if end is None or index == 0 else _share(end - now, todo_weights, i)
            cases = BlockCases(sizes[k][index], functools.partial(fetch, k, index), end)
            res = _block(row, k, cases, share, settings, end, on_case,
                         first_case=index == 0, expected_case=expected_seconds(prev))
            results[k] = res if prev is None else merge_results([prev, res])
            if on_row is not None:
                on_row(k, cast(TargetResult, results[k]))
    out = []
    for k, got in enumerate(results):
        t = rows[k].target
        final = got or TargetResult(t.name, t.op, t.precision.name, regime=rows[k].regime)
        final.asked = rows[k].asked
        out.append(final)
    return out


def expected_seconds(result: TargetResult | None) -> float:
    """What the next case of a row is expected to take: halfway between the
    mean and the longest of its cases so far (case times of realistic
    shapes spread widely; the mean alone starts cases that overrun)."""
    if result is None or not result.case_seconds:
        return 0.0
    times = result.case_seconds
    return (sum(times) / len(times) + max(times)) / 2


def _block(row: Row, k: int, cases: BlockCases, share: float | None,
           settings: RunSettings, end: float | None,
           on_case: Callable[[int, Verdict], None] | None, *, first_case: bool = False,
           expected_case: float = 0.0) -> TargetResult:
    """A block of row ``k``: its ``cases`` within ``share`` seconds."""
    shrink = settings.shrink_cap
    if end is not None:  # shrinking ends by the budget's end plus its grace at the latest
        left = max(end + settings.shrink_grace - time.monotonic(), 0.0)
        shrink = left if shrink is None else min(shrink, left)
    callback: Callable[[Verdict], None] | None = None
    if on_case is not None:
        def callback(v: Verdict, _k: int = k) -> None:
            on_case(_k, v)
    res = run_target(row.target, settings, cases=cases, on_case=callback, seconds=share,
                     cut_after=None if end is None else max(
                         end + settings.shrink_grace - time.monotonic(), 0.0),
                     isolate=row.isolate, shrink_seconds=shrink, first_case=first_case,
                     expected_case=expected_case)
    res.regime = row.regime
    return res


def starved(results: Sequence[TargetResult], min_cases: int = MIN_CASES) -> list[TargetResult]:
    """The passing rows that got fewer than ``min_cases`` cases (or than they
    asked for, when fewer): the time ran out before the floor every row is
    promised, so their pass rests on a handful of cases."""
    return [r for r in results if r.status()[0] is Outcome.PASS and r.asked
            and r.cases < min(min_cases, r.asked)]


def totals_line(results: Sequence[TargetResult], plan: RunPlan | None = None,
                wall: float | None = None, min_cases: int = MIN_CASES) -> str:
    """``rows: P passed (S starved: fewer than m cases), F failed, S skipped,
    U unjudged; N cases (min m, median d per judged row); judged in T s of a
    B s budget``."""
    counts = dict.fromkeys(Outcome, 0)
    for r in results:
        counts[r.status()[0]] += 1
    judged = sorted(r.cases for r in results if r.status()[0] in (Outcome.PASS, Outcome.FAIL))
    cases = sum(r.cases for r in results)
    thin = starved(results, min_cases)
    flag = (f" ({len(thin)} STARVED: fewer than {min_cases} cases each, not a real pass; give "
            "a larger --budget, fewer rows, or run on a quieter machine)") if thin else ""
    parts = [f"rows: {counts[Outcome.PASS]} passed{flag}, {counts[Outcome.FAIL]} failed, "
             f"{counts[Outcome.SKIPPED]} skipped, {counts[Outcome.UNJUDGED]} unjudged",
             f"{cases:,} cases" + (f" (per judged row min {judged[0]}, median "
                                   f"{judged[len(judged) // 2]})" if judged else "")]
    if plan is not None:
        budget = f" of a {plan.budget:g} s budget" if plan.budget is not None else ""
        parts.append(f"judged in {plan.judge_seconds:.1f} s{budget} on {plan.jobs} "
                     f"process{'es' if plan.jobs > 1 else ''}")
    if wall is not None:
        parts.append(f"{wall:.1f} s in all")
    return "; ".join(parts)


def describe(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """The rows as plain data (target, op, regime, asked)."""
    return [{"target": r.target.name, "op": r.target.op, "regime": r.regime, "asked": r.asked}
            for r in rows]
