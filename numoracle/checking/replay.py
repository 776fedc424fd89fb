"""Replaying repros: the kernel run again on a stored case, and judged.

The store (:mod:`numoracle.store`) holds repros as data; this module is the
checker that uses them: :func:`replay` re-runs one repro, :func:`replay_entry`
one repro of the store (recording whether it still fails),
:func:`replay_all` every one, :func:`replay_for_target` those of one kernel
before a check draws new cases (as Hypothesis replays its example database),
and :func:`prune` removes the repros that pass now.

A failure that needs earlier calls
----------------------------------
Some kernels fail only after other calls: a counter, a cache, a stale buffer
kept between calls. A replay is a fresh process, where the stored case is the
first call, so such a repro would pass and be taken for fixed. A repro
therefore records how many calls its run had made to the kernel before the
failing one (``calls_before``), and a replay repeats the case that many times
more in the same process (at most :data:`MAX_RUNS` runs, within
:data:`REPEAT_SECONDS`; always at least twice). It stops at the first failing
run and says which run failed; a replay that passes says how many runs passed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..cases.target import Target
from ..errors import InvalidArgument
from ..kernels.sources import resolve_target
from ..store.repro import Repro, load_repro
from ..store.store import Entry, entries, record_status
from ..store.store import prune as prune_store
from .check import check_case, judge
from .verdict import Verdict

__all__ = ["replay", "replay_repro", "Replayed", "replay_entry", "replay_all",
           "replay_for_target", "prune", "MAX_RUNS", "REPEAT_SECONDS"]

#: most runs of a repro's case in one replay
MAX_RUNS = 64
#: seconds a replay spends repeating a passing case (the first run always counts)
REPEAT_SECONDS = 20.0


@dataclass
class Replayed:
    """What a replay did: the verdict, how many runs of the case it made, and
    a sentence for the user (why the kernel was not re-run; which run failed;
    how many passed)."""

    verdict: Verdict
    runs: int
    note: str = ""


def _runs_wanted(r: Repro) -> int:
    return max(2, min(MAX_RUNS, r.calls_before + 1))


def _rerun(r: Repro, target: Target, repeat: bool) -> Replayed:
    """The case on ``target``, repeated until it fails or the runs are made."""
    want = _runs_wanted(r) if repeat else 1
    t0 = time.perf_counter()
    runs = 0
    while True:
        v = check_case(r.case, target, with_diagnosis=True,
                       inputs=r.inputs if r.stored_inputs else None)
        runs += 1
        if not v.passed:
            note = "" if runs == 1 else (
                f"failed on run {runs} of the case in this process, after {runs - 1} that "
                "passed: the kernel's result depends on earlier calls (state kept between "
                "calls: a counter, a cache, a stale buffer)")
            return Replayed(v, runs, note)
        if runs >= want or (time.perf_counter() - t0 > REPEAT_SECONDS):
            break
    if not repeat:
        return Replayed(v, runs)
    why = (f"; its run had made {r.calls_before} calls to the kernel before the failing one"
           if r.calls_before else "")
    return Replayed(v, runs, f"passed {runs} runs of the case in a fresh process{why}; a "
                             "failure that needs more earlier calls than that cannot show here, "
                             "so check the kernel again (numoracle run, check_kernel) to "
                             "confirm the fix")


def replay_repro(r: Repro | Path | str, *, rerun: bool = True,
                 target: Target | None = None, repeat: bool = True) -> Replayed:
    """Replay a repro: the kernel again (``target``, else the one the repro
    names, when it can be found and run here, ``rerun``), else its recorded
    outputs judged again. ``repeat``: run a passing case again as often as the
    repro's run had called the kernel before it failed (see the module
    docstring); False: once.

    Raises
    ------
    InvalidArgument
        For a damaged repro (:func:`~numoracle.store.repro.load_repro`), and
        when there is nothing to judge: the kernel cannot be run and the
        recorded outputs are gone.
    """
    if not isinstance(r, Repro):
        r = load_repro(r)
    why = ""
    if target is None and rerun:
        try:
            target = resolve_target(r.target_name, r.op, r.source)
        except InvalidArgument as exc:
            why = f"the kernel could not be found ({exc})"
        else:
            reason = target.unavailable_reason()
            if reason is not None:
                why, target = f"the kernel cannot run here ({reason})", None
    if target is not None:
        done = _rerun(r, target, repeat)
        done.verdict.repro = str(r.path)
        return done
    recorded_error = r.summary.get("error")
    if not r.got and recorded_error:  # the kernel gave no outputs: its fault is the record
        v = Verdict(case=r.case, target=r.target_name + " (recorded failure)", op=r.op,
                    precision=r.model.name, passed=False, error=str(recorded_error))
        v.repro = str(r.path)
        return Replayed(v, 0, (f"{why}; " if why else "") + "this is the failure its run "
                        "recorded, not a new run: replay it where the kernel can run")
    if not r.got:
        raise InvalidArgument(
            f"the repro {str(r.path)!r} cannot be judged: {why or 'it was not re-run'}, and "
            "the outputs the kernel returned (arrays.npz) are gone; replay it where the "
            "kernel can run, or save it again by running the check that found it")
    outs = judge(r.case, r.model, r.inputs, r.got, with_diagnosis=True)
    v = Verdict(case=r.case, target=r.target_name + " (recorded outputs)", op=r.op,
                precision=r.model.name, passed=all(o.passed for o in outs.values()),
                outputs=outs)
    v.repro = str(r.path)
    return Replayed(v, 0, (f"{why}; " if why else "") + "the outputs it recorded were judged "
                    "again (the kernel was not re-run)")


def replay(path: Path | str, *, rerun: bool = True) -> Verdict:
    """Re-run a repro: the target again when it can be found (``rerun``), else
    the recorded outputs are judged again (see :func:`replay_repro`)."""
    return replay_repro(path, rerun=rerun).verdict


def replay_entry(entry: Entry, target: Target | None = None, *,
                 repeat: bool = True) -> Verdict:
    """Replay one stored repro (on ``target`` when given: a kernel in hand) and
    record the outcome (``repeat``: as :func:`replay_repro`)."""
    v = replay_repro(entry.path, target=target, repeat=repeat).verdict
    record_status(entry.path, v.passed)
    return v


def replay_all(store: Path | str) -> list[tuple[Entry, Verdict | InvalidArgument]]:
    """Replay every repro of the store, each recorded as fixed or failing; a
    repro that cannot be replayed comes back with the reason instead."""
    out: list[tuple[Entry, Verdict | InvalidArgument]] = []
    for e in entries(store):
        try:
            out.append((e, replay_entry(e)))
        except InvalidArgument as exc:
            out.append((e, exc))
    return out


def replay_for_target(target: Target, store: Path | str | None
                      ) -> tuple[list[Verdict], list[Entry]]:
    """Replay the stored repros of ``target`` (its name and op, its storage
    format): returns the verdicts that still fail and the entries now fixed.

    This is what a check does before drawing new cases, as Hypothesis replays
    its example database; each case runs once (the check's own cases, drawn
    next in the same process, exercise the kernel's state)."""
    if store is None:
        return [], []
    failing, fixed = [], []
    for e in entries(store, target=target.name, op=target.op):
        if e.precision != target.precision.name:
            continue  # the same kernel under another claim: not this check's failure
        try:
            v = replay_entry(e, target, repeat=False)
        except InvalidArgument:  # e.g. a repro of another storage format: not this claim's
            continue
        if v.passed:
            fixed.append(e)
        else:
            failing.append(v)
    return failing, fixed


def prune(store: Path | str, *, fixed: bool = False, targets: Sequence[str] = (),
          replay_now: bool = True) -> list[Entry]:
    """Remove repros: those that pass now (``fixed``; replayed first unless
    ``replay_now`` is False, then the last recorded status decides) and/or those
    of the named ``targets`` (:func:`numoracle.store.store.prune`)."""
    def passes(e: Entry) -> bool:
        try:
            return replay_entry(e).passed
        except InvalidArgument:
            return False  # cannot be judged: kept

    return prune_store(store, fixed=fixed, targets=targets,
                       passes=passes if replay_now else None)
