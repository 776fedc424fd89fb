"""Several judgements at once: every candidate under every claim, with progress.

:func:`judge_many` runs :func:`~.judge.judge` for each (candidate, claim) pair,
one after the other or ``jobs`` at a time in worker processes of their own
(each judgement starts its candidate's process as it always does), and reports
every case run through ``progress(index, 1)``, so that a display can advance a
bar per candidate and claim while the cases of a long judgement run.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument
from .judge import Judgement, judge

__all__ = ["judge_many", "Job"]

#: (candidate, claim)
Job = tuple[Path, str]


def _judge_reporting(index: int, problem: str, candidate: str, precision: str,
                     kwargs: Mapping[str, Any], events: Any) -> Judgement:
    """One judgement in a pool's process, its cases reported on ``events``."""
    return judge(problem, candidate, precision=precision,
                 progress=lambda n: events.put((index, n)), **kwargs)


def judge_many(problem: str | Path, jobs: Sequence[Job], *, workers: int = 1,
               progress: Callable[[int, int], None] | None = None,
               **kwargs: Any) -> list[Judgement]:
    """Judge every (candidate, claim) of ``jobs`` against ``problem``.

    Parameters
    ----------
    problem : path
        The problem file.
    jobs : sequence of (path, str)
        Candidate files and the claim each is judged under.
    workers : int
        Judgements run at once (1: one after the other, in this process).
    progress : callable or None
        ``progress(i, n)``: ``n`` more cases of job ``i`` were run.
    **kwargs
        Passed to :func:`~.judge.judge` (``examples``, ``device``, ``case``, ...).

    Returns
    -------
    list of Judgement
        In the order of ``jobs``.
    """
    if workers < 1:
        raise InvalidArgument(f"workers={workers!r} must be at least 1; give 1 to judge one "
                              "candidate after the other")
    if workers == 1 or len(jobs) == 1:
        out = []
        for i, (cand, claim) in enumerate(jobs):
            report = None if progress is None else (lambda n, i=i: progress(i, n))
            out.append(judge(problem, cand, precision=claim, progress=report, **kwargs))
        return out
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        events = manager.Queue()
        stop = threading.Event()

        def drain() -> None:
            while not stop.is_set():
                try:
                    i, n = events.get(timeout=0.2)
                except queue.Empty:
                    continue
                if progress is not None:
                    progress(i, n)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        try:
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                futures = [pool.submit(_judge_reporting, i, str(problem), str(cand), claim,
                                       dict(kwargs), events)
                           for i, (cand, claim) in enumerate(jobs)]
                return [f.result() for f in futures]
        finally:
            stop.set()
            reader.join(2)
