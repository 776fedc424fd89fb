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

Finding the kernel again
------------------------
A replay re-runs the kernel, never only its recorded outputs (those are
judged again only when asked: ``rerun=False``, ``numoracle replay
--recorded``). The kernel is found as the repro recorded it
(:func:`find_target`): a function handed to ``check_kernel``, ``validate``,
``shrink --fn`` or ``run --kernel`` by its module or file and name, a target
of a ``TARGETS`` list by its source, a built-in one by name; a traced op's
reference by its module or file and name, and a note when its content hash
changed. The outcome is :class:`ReplayOutcome`: fixed, still fails, or could not
re-run, with the reason (a lambda, a kernel that cannot run here, a module
that no longer imports).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..callables import load_location
from ..errors import InvalidArgument
from ..store.repro import Repro, load_repro
from ..store.store import Entry, entries, kernel_record, record_status
from ..store.store import prune as prune_store
from ..targets.backends import get_backend
from ..targets.sources import Resolve, find_in_source
from ..targets.target import Target
from .check import check_case, judge
from .verdict import Verdict

__all__ = ["replay", "replay_repro", "Replayed", "ReplayOutcome", "find_target", "replay_entry",
           "replay_all",
           "replay_for_target", "prune", "MAX_RUNS", "REPEAT_SECONDS"]

#: most runs of a repro's case in one replay
MAX_RUNS = 64
#: seconds a replay spends repeating a passing case (the first run always counts)
REPEAT_SECONDS = 20.0


class ReplayOutcome(enum.Enum):
    """What a replay found: the kernel re-run passes (``FIXED``), fails
    (``FAILS``), or could not be re-run (``UNRUN``: the kernel or reference
    cannot be found or run here; the reason says which)."""

    FIXED = "fixed"
    FAILS = "still fails"
    UNRUN = "could not re-run"


@dataclass
class Replayed:
    """What a replay did: the outcome, the verdict (None when nothing was
    re-run), how many runs of the case it made, and a sentence for the user
    (why the kernel was not re-run; which run failed; how many passed)."""

    verdict: Verdict | None
    runs: int
    note: str = ""
    outcome: ReplayOutcome = ReplayOutcome.FAILS
    #: the recorded outputs were judged, not a new run of the kernel
    recorded: bool = False

    @property
    def passed(self) -> bool:
        """Whether the replay judged the kernel passing now."""
        return self.outcome is ReplayOutcome.FIXED

    def line(self) -> str:
        """``fixed``, ``still fails`` or ``could not re-run: why``, one line."""
        if self.outcome is ReplayOutcome.UNRUN:
            return f"could not re-run: {self.note}"
        return self.outcome.value + (" (recorded outputs judged again)" if self.recorded else "")


def _unrun(why: str) -> Replayed:
    return Replayed(None, 0, why, ReplayOutcome.UNRUN)


def _judged(v: Verdict, runs: int, note: str = "", recorded: bool = False) -> Replayed:
    outcome = ReplayOutcome.FIXED if v.passed else ReplayOutcome.FAILS
    return Replayed(v, runs, note, outcome, recorded)


def _runs_wanted(r: Repro) -> int:
    return max(2, min(MAX_RUNS, r.calls_before + 1))


def _rerun(r: Repro, target: Target, repeat: bool) -> Replayed:
    """The case on ``target``, repeated until it fails or the runs are made."""
    want = _runs_wanted(r) if repeat else 1
    t0 = time.perf_counter()
    runs = 0
    changed = f"{r.reference_changed}. " if r.reference_changed else ""
    while True:
        v = check_case(r.case, target, with_diagnosis=True,
                       inputs=r.inputs if r.stored_inputs else None)
        runs += 1
        if not v.passed:
            note = "" if runs == 1 else (
                f"failed on run {runs} of the case in this process, after {runs - 1} that "
                "passed: the kernel's result depends on earlier calls (state kept between "
                "calls: a counter, a cache, a stale buffer)")
            return _judged(v, runs, changed + note)
        if runs >= want or (time.perf_counter() - t0 > REPEAT_SECONDS):
            break
    if not repeat:
        return _judged(v, runs, changed.rstrip(". "))
    why = (f"; its run had made {r.calls_before} calls to the kernel before the failing one"
           if r.calls_before else "")
    return _judged(v, runs, f"{changed}passed {runs} runs of the case in a fresh process{why}; a "
                            "failure that needs more earlier calls than that cannot show here, "
                            "so check the kernel again (numoracle run, check_kernel) to "
                            "confirm the fix")


def _kernel_target(r: Repro) -> Target:
    """The target of a kernel handed in as a function, from its repro's record."""
    k = r.kernel or {}
    if "unlocated" in k:
        raise InvalidArgument(f"the kernel {r.target_name!r} cannot be found again: "
                              f"{k['unlocated']}")
    fn = load_location(k)
    layouts = k.get("layouts") or ["C"]
    backend = str(k.get("backend", "numpy"))
    return Target(name=r.target_name, op=r.op, backend=backend, precision=r.model, fn=fn,
                  outputs=tuple(k.get("outputs") or ()),
                  layouts={n: tuple(v) for n, v in layouts.items()}
                  if isinstance(layouts, dict) else tuple(layouts),
                  output_layouts=dict(k.get("output_layouts") or {}),
                  available=get_backend(backend).available)


def find_target(r: Repro, resolve: Resolve = find_in_source) -> Target:
    """The kernel a repro names, found again: by its module or file and name
    (a function handed in), else by ``resolve`` (its source's ``TARGETS``;
    the registry for a built-in target, where the caller hands a resolver
    that knows it: ``numoracle.kernels.resolve_target``).

    Raises
    ------
    InvalidArgument
        Saying why it cannot be found.
    """
    if r.kernel is not None:
        return _kernel_target(r)
    return resolve(r.target_name, r.op, r.source)


def _recorded(r: Repro) -> Replayed:
    """The repro's recorded outputs judged again (the kernel is not run)."""
    recorded_error = r.summary.get("error")
    if not r.got and recorded_error:  # the kernel gave no outputs: its fault is the record
        v = Verdict(case=r.case, target=r.target_name + " (recorded failure)", op=r.op,
                    precision=r.model.name, passed=False, error=str(recorded_error))
        v.repro = str(r.path)
        return _judged(v, 0, "this is the failure its run recorded, not a new run", True)
    if not r.got:
        raise InvalidArgument(
            f"the repro {str(r.path)!r} has no recorded outputs (arrays.npz is gone or holds "
            "none); replay it without --recorded where the kernel can run")
    outs = judge(r.case, r.model, r.inputs, r.got, with_diagnosis=True)
    v = Verdict(case=r.case, target=r.target_name + " (recorded outputs)", op=r.op,
                precision=r.model.name, passed=all(o.passed for o in outs.values()),
                outputs=outs)
    v.repro = str(r.path)
    return _judged(v, 0, "the outputs it recorded were judged again (the kernel was not "
                         "re-run)", True)


def replay_repro(r: Repro | Path | str, *, rerun: bool = True,
                 target: Target | None = None, repeat: bool = True,
                 resolve: Resolve = find_in_source) -> Replayed:
    """Replay a repro: the kernel again (``target``, else the one the repro
    names, found by :func:`find_target` with ``resolve``), judged on the
    stored case. Where it cannot be found or run here the outcome is
    :attr:`ReplayOutcome.UNRUN` with the reason. ``rerun`` False: judge the outputs the
    repro recorded instead.
    ``repeat``: run a passing case again as often as the repro's run had
    called the kernel before it failed (see the module docstring); False: once.

    Raises
    ------
    InvalidArgument
        For a damaged repro (:func:`~numoracle.store.repro.load_repro`), and
        with ``rerun`` False when it recorded no outputs.
    """
    if not isinstance(r, Repro):
        r = load_repro(r)
    if not rerun:
        return _recorded(r)
    if target is None:
        try:
            target = find_target(r, resolve)
        except InvalidArgument as exc:
            return _unrun(str(exc))
        reason = target.unavailable_reason()
        if reason is not None:
            return _unrun(f"the kernel {target.name!r} cannot run here ({reason})")
    done = _rerun(r, target, repeat)
    assert done.verdict is not None
    done.verdict.repro = str(r.path)
    return done


def replay(path: Path | str, *, rerun: bool = True,
           resolve: Resolve = find_in_source) -> Verdict:
    """Re-run a repro and return the verdict (``rerun`` False: the recorded
    outputs judged again; ``resolve``: see :func:`replay_repro`).

    Raises
    ------
    InvalidArgument
        When the kernel cannot be re-run here (the message says why).
    """
    done = replay_repro(path, rerun=rerun, resolve=resolve)
    if done.verdict is None:
        raise InvalidArgument(f"{str(path)!r} could not be re-run: {done.note}; "
                              "replay(path, rerun=False) judges the outputs it recorded")
    return done.verdict


def replay_entry(entry: Entry, target: Target | None = None, *,
                 repeat: bool = True, resolve: Resolve = find_in_source) -> Replayed:
    """Replay one stored repro (on ``target`` when given: a kernel in hand) and
    record the outcome when the kernel ran (``repeat``: as
    :func:`replay_repro`); a repro that cannot be loaded or re-run comes back
    :attr:`ReplayOutcome.UNRUN`, its status untouched."""
    try:
        done = replay_repro(entry.path, target=target, repeat=repeat, resolve=resolve)
    except InvalidArgument as exc:
        return _unrun(str(exc))
    if done.outcome is not ReplayOutcome.UNRUN:
        record_status(entry.path, done.passed)
    return done


def replay_all(store: Path | str, resolve: Resolve = find_in_source
               ) -> list[tuple[Entry, Replayed]]:
    """Replay every repro of the store (its kernels found by ``resolve``), each
    recorded as fixed or failing, or coming back :attr:`ReplayOutcome.UNRUN` with
    the reason."""
    return [(e, replay_entry(e, resolve=resolve)) for e in entries(store)]


def replay_for_target(target: Target, store: Path | str | None
                      ) -> tuple[list[Verdict], list[Entry]]:
    """Replay the stored repros of ``target`` (its name and op, its storage
    format, the kernel's identity): returns the verdicts that still fail and
    the entries now fixed.

    This is what a check does before drawing new cases, as Hypothesis replays
    its example database; each case runs once (the check's own cases, drawn
    next in the same process, exercise the kernel's state)."""
    if store is None:
        return [], []
    failing, fixed = [], []
    record = kernel_record(target)
    mine = None if record is None else record["identity"]
    for e in entries(store, target=target.name, op=target.op):
        if e.precision != target.precision.name:
            continue  # the same kernel under another claim: not this check's failure
        if e.kernel is not None and e.kernel != mine:
            continue  # another kernel of the same name
        done = replay_entry(e, target, repeat=False)
        if done.verdict is None:  # e.g. a repro of another storage format: not this claim's
            continue
        if done.passed:
            fixed.append(e)
        else:
            failing.append(done.verdict)
    return failing, fixed


def prune(store: Path | str, *, fixed: bool = False, targets: Sequence[str] = (),
          replay_now: bool = True,
          on_replay: Callable[[Entry, Replayed], None] | None = None,
          resolve: Resolve = find_in_source) -> list[Entry]:
    """Remove repros: those that pass now (``fixed``; each re-run first unless
    ``replay_now`` is False, then the last recorded status decides; one that
    cannot be re-run here is judged by its last recorded status too) and/or
    those of the named ``targets`` (:func:`numoracle.store.store.prune`).
    ``on_replay(entry, replayed)`` hears every replay; ``resolve`` finds the
    kernels (:func:`replay_repro`)."""
    def passes(e: Entry) -> bool:
        done = replay_entry(e, resolve=resolve)
        if on_replay is not None:
            on_replay(e, done)
        if done.outcome is ReplayOutcome.UNRUN:
            return e.status == "fixed"  # its last replay, e.g. by the check that fixed it
        return done.passed

    return prune_store(store, fixed=fixed, targets=targets,
                       passes=passes if replay_now else None)
