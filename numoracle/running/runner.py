"""Running many cases on a target: Hypothesis draws, the oracle judges,
a failure shrinks to a minimal case and is saved as a repro.

:func:`run_target` either draws its cases with Hypothesis, which also
shrinks a failure, or judges cases it is given (drawn by another process,
:mod:`numoracle.running.draws`), whose failure the delta-debugging shrinker
of :mod:`numoracle.checking.shrink` shrinks. Both judge a case with the same
code (:class:`_Judging`): the budget, the counts, the verdicts passed on."""

from __future__ import annotations

import contextlib
import gc
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from hypothesis import HealthCheck, Phase, Verbosity, event, given, settings
from hypothesis import settings as settings_of_hypothesis
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import FlakyFailure, HypothesisException

from ..cases.case import Case
from ..checking.check import DEFAULT_TIMEOUT, check_case
from ..checking.diagnosis import FATAL_KINDS, Diagnosis, DiagnosisKind, FaultKind
from ..checking.discriminate import discriminate
from ..checking.message import fmt_ratio
from ..checking.verdict import Verdict, ladder_for
from ..errors import InvalidArgument, KernelMismatch, UnsupportedCase
from ..oracle.memory import reuse_for_checking
from ..oracle.ops import get_op
from ..oracle.precision import PRESETS, PrecisionModel
from ..reports.observe import case_features
from ..reports.observe import enabled as observing
from ..settings import RunSettings
from ..store.repro import save_repro
from ..targets.target import Target
from .draws import default_strategy, draw_cases
from ..outcome import Outcome, RunVerdict

__all__ = ["TargetResult", "run_target", "default_strategy", "draw_cases"]


def _read_verdict(text: Any) -> RunVerdict:
    """The :class:`RunVerdict` a saved string names."""
    try:
        return RunVerdict(text)
    except ValueError:
        raise InvalidArgument(
            f"TargetResult verdict={text!r}: a verdict is one of "
            f"{[v.value for v in RunVerdict]}; give a numoracle.outcome.RunVerdict "
            "member or its string") from None


class _BudgetSpent(BaseException):
    """The time budget of a run is spent: stop drawing cases."""


class _ShrinkSpent(BaseException):
    """Shrinking a hang or a crash has used its budget: keep the smallest failure so far."""


#: a hang shrinks with this fraction of the timeout ...
HANG_SHRINK_FACTOR = 0.25
#: ... and stops after this many hung shrinking attempts
HANG_SHRINK_TRIES = 3
#: shrinking a crash (each attempt that crashes costs a fresh worker) stops after this many
CRASH_SHRINK_TRIES = 10


@dataclass
class TargetResult:
    """What a run of one target on one op found."""

    target: str
    op: str
    precision: str
    cases: int = 0
    failures: int = 0
    worst_ratio: float = 0.0
    #: how the run ended (:class:`~numoracle.outcome.RunVerdict`; its saved string
    #: is read back as the member)
    verdict: RunVerdict = RunVerdict.PASS
    repro: str | None = None
    seconds: float = 0.0
    diagnosis: str = ""
    cases_to_catch: int | None = None
    repro_shape: str | None = None
    message: str = ""
    #: per case and output: (output, n, worst det, worst prob, median det, median prob, exact)
    samples: list[tuple[str, int, float, float, float, float, bool]] = field(default_factory=list, repr=False)
    #: with ``diagnose``: per output, the worst ratio under each candidate model
    per_model: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)
    #: stored repros of this target replayed before drawing, and those that pass now
    replayed: int = 0
    fixed: list[str] = field(default_factory=list)
    #: cases drawn but not judged by the oracle (unsupported, or the kernel gave no outputs)
    unjudged: int = 0
    #: why the last unjudged case was not judged (the oracle's UnsupportedCase)
    unjudged_reason: str = ""
    #: the kind of the failure when the kernel gave no outputs (hang, crash, cuda, ...)
    fault: FaultKind | None = None
    #: the size regime of the cases (``small`` or ``realistic``: see
    #: :data:`numoracle.oracle.ops.plan.REGIMES`)
    regime: str = "small"
    #: the precision model claimed (``precision`` is its name)
    model: PrecisionModel | None = field(default=None, repr=False)
    #: the recorded failure's diagnosis of each failing output
    diagnoses: dict[str, Diagnosis] = field(default_factory=dict, repr=False)
    #: the recorded failure (the shrunk case's verdict), or None
    failure: Verdict | None = field(default=None, repr=False)
    #: cases asked for (0: not said); ``cases`` of ``asked`` is what the row got
    asked: int = 0
    #: seconds each judged case took (drawing, kernel, oracle), in order
    case_seconds: list[float] = field(default_factory=list, repr=False)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "verdict" and not isinstance(value, RunVerdict):
            value = _read_verdict(value)  # a saved verdict's string, read back as its member
        elif name == "fault" and value is not None and not isinstance(value, FaultKind):
            value = FaultKind(value)  # a saved fault kind's string, likewise
        super().__setattr__(name, value)

    def __str__(self) -> str:
        """One line: the verdict, the kernel, the cases and the worst ratio (a
        failure's full message is :attr:`message`)."""
        status, reason = self.status()
        if status is Outcome.PASS:
            return self.message or _pass_message(self)
        return (f"{status.value.upper()}: {self.target} on {self.op}, claiming {self.precision}: "
                f"{reason}" + (f" (repro: {self.repro})" if self.repro else ""))

    def effective(self) -> dict[str, str]:
        """Per output, the most precise standard model every diagnosed case fits
        (the cases that told candidate causes apart included), ``"none"`` when no
        model fits or the failure is a logic bug, ``"nondeterministic"`` when the
        output's results changed between runs: the precision the target really
        delivered, in the ladder of the claimed model's storage format."""
        model = self.model or PRESETS.get(self.precision, PRESETS["fp32"])
        ladder = ladder_for(model)
        out = {}
        for name, ratios in self.per_model.items():
            kind = self.diagnoses[name].kind if name in self.diagnoses else None
            if kind is DiagnosisKind.NONDETERMINISTIC:
                out[name] = "nondeterministic"
            elif kind is DiagnosisKind.LOGIC:
                out[name] = "none"
            else:
                out[name] = next((m for m in ladder if ratios.get(m, float("inf")) < 1.0),
                                 "none")
        return out

    def status(self) -> tuple[Outcome, str]:
        """:class:`Outcome`: ``pass``, ``fail``, ``skipped`` (cannot run here) or
        ``unjudged`` (ran, but no case was judged, or the run did not complete),
        with the reason."""
        if self.verdict is RunVerdict.FAIL:
            return Outcome.FAIL, self.diagnosis
        if self.verdict is RunVerdict.SKIPPED:
            return Outcome.SKIPPED, self.diagnosis
        if self.verdict is not RunVerdict.PASS:
            return Outcome.UNJUDGED, f"the run did not complete: {self.diagnosis}"
        if self.cases == 0:
            if not self.unjudged:
                return Outcome.UNJUDGED, "no case ran within the time budget"
            return Outcome.UNJUDGED, (
                f"no case was judged: {self.unjudged} drawn cases were not judged, the last "
                f"because {self.unjudged_reason or 'unknown'}")
        return Outcome.PASS, ""

    def row(self) -> dict[str, Any]:
        """The fields of the report (``report.json``)."""
        status, reason = self.status()
        return {"target": self.target, "op": self.op, "precision": self.precision,
                "status": status.value, "reason": reason,
                "cases": self.cases, "failures": self.failures,
                "worst_ratio": self.worst_ratio, "verdict": self.verdict.value,
                "repro": self.repro, "time_s": round(self.seconds, 3),
                "diagnosis": self.diagnosis, "cases_to_catch": self.cases_to_catch,
                "repro_shape": self.repro_shape, "unjudged": self.unjudged,
                "fault": None if self.fault is None else self.fault.value,
                "regime": self.regime, "asked": self.asked,
                "effective": ", ".join(f"{k}: {v}" for k, v in self.effective().items())}


def run_target(
    target: Target,
    settings: RunSettings | None = None,
    *,
    strategy: st.SearchStrategy[Case] | None = None,
    on_case: Callable[[Verdict], None] | None = None,
    seconds: float | None = None,
    first_case: bool = False,
    expected_case: float = 0.0,
    cases: Iterable[Case] | None = None,
    cut_after: float | None = None,
    edges: Iterable[Case] = (),
    **changes: Any,
) -> TargetResult:
    """Check ``examples`` cases of ``target``; shrink and save the first failure.

    Parameters
    ----------
    target : Target
        The kernel under test.
    settings : RunSettings, optional
        How it is run (:class:`numoracle.settings.RunSettings`: ``examples``,
        ``seed``, ``store``, ``timeout``, ``diagnose``, ``isolate``,
        ``shrink``, ``shrink_seconds``); default :meth:`RunSettings.default`,
        the loaded profile's. ``examples`` None: Hypothesis's
        ``max_examples``. A ``timeout`` is the seconds a kernel may take on
        one case before it counts as hung: a hang costs one timeout per case;
        it is shrunk with :data:`HANG_SHRINK_FACTOR` of the timeout and at
        most :data:`HANG_SHRINK_TRIES` hung attempts, then the smallest
        hanging case so far is saved. ``diagnose`` judges every case under
        every candidate model too: :meth:`TargetResult.effective` then names
        the precision each output really delivered. ``isolate`` runs the
        kernel in a worker process (:mod:`numoracle.checking.isolate`): a
        crash, an exit or a CUDA error fails the case, and the run (and the
        shrinking, in fresh workers, at most :data:`CRASH_SHRINK_TRIES`
        crashed attempts) goes on; the kernel must be importable by the
        worker. ``shrink_seconds`` caps shrinking a failure; once spent, the
        smallest failing case so far is saved and its diagnosis says so.
    **changes
        Fields of ``settings`` changed for this run
        (``run_target(t, examples=20, store=None)``).
    strategy : SearchStrategy of Case, optional
        Defaults to :func:`default_strategy`.
    on_case : callable, optional
        Called with each verdict (progress bars).
    seconds : float or None
        Time budget of this target: no case is started that would end past it,
        judging by the cases judged so far (halfway between their mean and
        longest time; a failure found by then is still shrunk and saved).
    first_case : bool
        Start the first case whatever ``seconds`` says: a row judged by no
        case has no result.
    expected_case : float
        Seconds a case is expected to take before any has been timed here
        (from an earlier block of the same target and regime).
    cases : iterable of Case, optional
        Judge these cases, in order, instead of drawing any (``examples``,
        ``seed`` and ``strategy`` are then not used): cases drawn elsewhere,
        e.g. by the process that hands out a run's work
        (:mod:`numoracle.running.draws`). The iterable is consumed only as
        far as the time budget goes. A failure among them is shrunk by
        :func:`numoracle.checking.shrink.shrink` (the given cases have no
        choice sequence for Hypothesis to shrink) and saved with its arrays;
        a hang, a crash or a CUDA error, or a case that shrinker cannot take,
        is saved as it was found.
    edges : iterable of Case
        Cases judged before any is drawn (those at the edges of the sizes,
        :func:`~numoracle.running.draws.edge_cases`), counted among the
        ``examples``; a failure among them is shrunk as a given case's is.
    cut_after : float or None
        Hard end of the judging, in seconds from now: a case still being
        judged then is interrupted and not counted (no case starts after it), and the run ends with the cases before it, as when
        ``seconds`` is spent. A failure being shrunk is not interrupted (its
        cap is ``shrink_seconds``), nor the case ``first_case`` starts. Works in the main thread of a process
        with ``SIGALRM`` (Unix) whose handler is the default; elsewhere it is
        not armed.
    """
    run = (settings if settings is not None else RunSettings.default()).replace(**changes)
    examples = run.examples
    if examples is None:
        examples = int(settings_of_hypothesis().max_examples)
    store, shrink, shrink_seconds = run.store, run.shrink, run.shrink_cap
    timeout, diagnose, isolate = run.timeout, run.diagnose, bool(run.isolate)
    asked = examples
    if cases is not None and isinstance(cases, Sized):
        asked = len(cases)
    res = TargetResult(target.name, target.op, target.precision.name, model=target.precision,
                       asked=asked)
    reason = target.unavailable_reason()
    if reason:
        res.verdict, res.diagnosis = RunVerdict.SKIPPED, reason
        return res
    reuse_for_checking()  # the oracle's output-sized arrays: no fresh pages every case
    if isolate:
        from ..checking.isolate import prepare  # noqa: PLC0415 - multiprocessing only when isolating

        prepare(target)
    t0 = time.perf_counter()
    judge = _Judging(target, res, timeout=timeout, diagnose=diagnose, isolate=isolate,
                     on_case=on_case, shrink_seconds=shrink_seconds, first_case=first_case,
                     expected_case=expected_case,
                     deadline=None if seconds is None else t0 + seconds)
    with _cut(judge, cut_after):
        if cases is not None:
            _judge_given(judge, cases, store=store, shrink=shrink,
                         shrink_seconds=shrink_seconds)
        else:
            edges = list(edges)[:examples]
            if edges:
                _judge_given(judge, edges, store=store, shrink=shrink,
                             shrink_seconds=shrink_seconds)
            spent = judge.deadline is not None and time.perf_counter() >= judge.deadline
            left = examples - judge.state["tried"]
            if res.verdict is RunVerdict.PASS and not judge.cut and not spent and left > 0:
                _judge_drawn(judge, strategy if strategy is not None
                             else default_strategy(target), examples=left, seed=run.seed,
                             store=store, shrink=shrink, shrink_seconds=shrink_seconds)
    res.seconds = time.perf_counter() - t0
    if res.verdict is RunVerdict.PASS and not res.message:
        res.message = _pass_message(res)
    for note in get_op(target.op).notes():
        res.message += f"\n  note: {note}"
    return res


#: seconds after which a cut that fell where it could not raise tries again
_CUT_RETRY = 0.01


def _may_raise_in(frame: Any) -> bool:
    """Whether an exception raised in ``frame`` reaches the code that runs
    the case: not in a garbage collector's callback or a finaliser, where
    Python ignores it."""
    if frame is None:
        return True
    code = frame.f_code
    if code.co_name in ("__del__", "__exit__", "__aexit__"):
        return False
    return all(getattr(cb, "__code__", None) is not code for cb in gc.callbacks)


@contextlib.contextmanager
def _cut(judge: _Judging, after: float | None) -> Iterator[None]:
    """``SIGALRM`` armed to cut ``judge``'s run ``after`` seconds from now:
    its handler raises :class:`_BudgetSpent` where ``judge`` may be cut
    (:attr:`_Judging.cuttable`), else marks the run cut for the next case.
    Not armed off the main thread, without ``setitimer`` or where another
    handler holds ``SIGALRM``."""
    if after is None or not hasattr(signal, "setitimer") or \
            threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, None):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        judge.cut = True
        if not judge.cuttable or judge.state["failed"]:
            return
        if not _may_raise_in(frame):  # it would be ignored there: try again shortly
            signal.setitimer(signal.ITIMER_REAL, _CUT_RETRY)
            return
        raise _BudgetSpent

    previous = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, max(after, 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _Judging:
    """The judging of one run's cases, one call per case — Hypothesis's test
    function calls it on drawn cases, :func:`_judge_given` on given ones: the
    time budget, the bookkeeping of :class:`TargetResult`, and the failure.

    A failing case raises :class:`KernelMismatch`; once a failure is found,
    the cases that follow are shrinking attempts (Hypothesis's): they keep
    the failure's class, and a spent shrinking budget or too many hung or
    crashed attempts raise :class:`_ShrinkSpent`.
    """

    def __init__(self, target: Target, res: TargetResult, *, timeout: float | None,
                 diagnose: bool, isolate: bool, on_case: Callable[[Verdict], None] | None,
                 shrink_seconds: float | None, first_case: bool, expected_case: float,
                 deadline: float | None) -> None:
        self.target, self.res = target, res
        self.diagnose, self.isolate, self.on_case = diagnose, isolate, on_case
        self.shrink_seconds, self.first_case, self.expected_case = (shrink_seconds, first_case,
                                                                    expected_case)
        self.deadline = deadline
        self.state: dict[str, Any] = {"failed": False, "last": None, "first": None, "hangs": 0,
                                      "crashes": 0, "timeout": timeout, "shrink_end": None,
                                      "tried": 0}
        self.timeout = timeout  # as asked (the state's may shrink after a hang)
        #: the hard end has come (:func:`_cut`): no further case starts
        self.cut = False
        #: whether the hard end may interrupt now: while a passing run's case is
        #: judged, never while its verdict is booked or the next case is drawn
        self.cuttable = False

    def __call__(self, case: Case) -> None:
        state, res = self.state, self.res
        started = time.perf_counter()
        if self.cut and not state["failed"]:
            raise _BudgetSpent
        if state["failed"]:
            if state["shrink_end"] is not None and started > state["shrink_end"]:
                raise _ShrinkSpent
        elif self.deadline is not None and (state["tried"] or not self.first_case):
            times = res.case_seconds  # halfway between the mean and the longest so far
            expected = (sum(times) / len(times) + max(times)) / 2 if times else \
                self.expected_case
            if started + expected > self.deadline:
                raise _BudgetSpent  # not an Exception: Hypothesis lets it through at once
        state["tried"] += 1
        # a row's forced first case (``first_case``) runs to its end: it is the row's result
        self.cuttable = not state["failed"] and not (self.first_case and state["tried"] == 1)
        try:
            v = check_case(case, self.target, timeout=state["timeout"],
                           with_diagnosis=self.diagnose, isolate=self.isolate)
        except UnsupportedCase as exc:
            if not state["failed"]:
                res.unjudged += 1
                res.unjudged_reason = str(exc)
            return
        finally:
            self.cuttable = False
        kind = getattr(v.error, "kind", None)
        if state["failed"] and not v.passed and _weaker(v, state["first"]):
            return  # shrinking keeps the first failure's class: a logic bug stays one
        if kind is not None and not state["failed"]:
            res.unjudged += 1
        if observing():  # features for Tyche: op, family, n, verdict
            for key, value in case_features(v).items():
                event(key, value)
        if not state["failed"]:
            self._count(v, time.perf_counter() - started)
        if self.on_case is not None:
            self.on_case(v)
        if not v.passed:
            if not state["failed"]:
                state["failed"] = True
                res.cases_to_catch = res.cases
                state["first"] = v
                if self.shrink_seconds is not None:
                    state["shrink_end"] = time.perf_counter() + self.shrink_seconds
                if kind is FaultKind.HANG and state["timeout"] is not None:
                    state["timeout"] = state["timeout"] * HANG_SHRINK_FACTOR
            state["last"] = v  # Hypothesis shrinks monotonically: the smallest so far
            if kind in FATAL_KINDS and v is not state["first"]:
                key = "hangs" if kind is FaultKind.HANG else "crashes"
                state[key] += 1
                limit = HANG_SHRINK_TRIES if kind is FaultKind.HANG else CRASH_SHRINK_TRIES
                if state[key] >= limit:
                    raise _ShrinkSpent
            raise KernelMismatch(v.diagnosis, v)

    def _count(self, v: Verdict, seconds: float) -> None:
        """A judged case before any failure: its numbers into the result."""
        res = self.res
        res.cases += 1
        res.case_seconds.append(seconds)
        res.worst_ratio = max(res.worst_ratio, v.worst_ratio)
        for o in v.outputs.values():
            seen = res.per_model.setdefault(o.name, {}) if o.per_model else {}
            for m, r in o.per_model.items():
                seen[m] = max(seen.get(m, 0.0), r)
        for o in (o for o in v.outputs.values() if o.passed):
            res.samples.append((o.name, o.n, o.worst_ratio_det, o.worst_ratio_prob,
                                o.median_ratio_det, o.median_ratio_prob, o.exact))

    def hang_note(self, sep: str = "") -> str:
        """What the verdict of a hang shrunk with a shorter timeout should add."""
        if self.timeout is None or self.state["timeout"] == self.timeout:
            return ""
        return (f"{sep}the first case hung past the timeout of {self.timeout:g} s; shrinking "
                f"ran with {self.state['timeout']:g} s")


def _judge_drawn(judge: _Judging, strat: st.SearchStrategy[Case], *, examples: int,
                 seed: int | None, store: Path | str | None, shrink: bool,
                 shrink_seconds: float | None) -> None:
    """Hypothesis draws ``examples`` cases and shrinks the first failure."""
    res, target, state = judge.res, judge.target, judge.state
    isolate, timeout = judge.isolate, judge.timeout

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
              phases=[Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else []),
              report_multiple_bugs=False, print_blob=False)
    @given(strat)
    def prop(case: Case) -> None:
        judge(case)

    if seed is not None:
        prop = hypothesis_seed(seed)(prop)
    try:
        prop()
    except _BudgetSpent:
        pass  # every case run so far passed
    except _ShrinkSpent:
        if state["shrink_end"] is not None and time.perf_counter() > state["shrink_end"]:
            why = f"shrinking stopped at its cap of {shrink_seconds:g} s"
        else:
            why = (f"shrinking stopped after {max(state['hangs'], state['crashes'])} "
                   "attempts that hung or crashed")
        _record_failure(res, state["last"], target, store, why + judge.hang_note("; "))
    except KernelMismatch as exc:
        _record_failure(res, cast(Verdict, exc.verdict), target, store,  # raised by prop
                        judge.hang_note(), isolate=isolate, timeout=timeout)
    except (FlakyFailure, HypothesisException, ExceptionGroup) as exc:
        last = state["last"]
        if last is not None:
            note = (f"the failure did not reproduce while shrinking ({type(exc).__name__}): "
                    "nondeterministic or racy?")
            _record_failure(res, last, target, store, note, isolate=isolate, timeout=timeout)
        else:
            res.verdict, res.diagnosis = RunVerdict.ERROR, _describe_error(exc)


def _describe_error(exc: BaseException) -> str:
    """What a run that ended in ``exc`` (no failing case recorded) says: the
    exception, and for a group (Hypothesis's ``FlakyFailure``: a first call raised
    and its replay did not) each exception inside, with the line that raised it."""
    text = f"{type(exc).__name__}: {exc}"
    for inner in getattr(exc, "exceptions", ()):
        tb = traceback.extract_tb(inner.__traceback__)
        where = f" (at {tb[-1].filename}:{tb[-1].lineno} in {tb[-1].name})" if tb else ""
        text += f"; raised inside: {type(inner).__name__}: {inner}{where}"
    return text


def _judge_given(judge: _Judging, cases: Iterable[Case], *, store: Path | str | None,
                 shrink: bool, shrink_seconds: float | None) -> None:
    """Judge ``cases`` in order until the budget is spent or one fails; shrink
    that one with the delta-debugging shrinker."""
    try:
        for case in cases:
            judge(case)
    except _BudgetSpent:
        return  # every case run so far passed
    except KernelMismatch as exc:
        found = cast(Verdict, exc.verdict)
    else:
        return
    inputs: dict[str, Any] | None = None
    note = ""
    kind = getattr(found.error, "kind", None)
    if not shrink:
        pass
    elif kind in FATAL_KINDS:
        note = f"not shrunk: a case given that ends in a {kind} is kept as it was found"
    else:
        found, inputs, note = _shrink_given(found, judge, shrink_seconds)
    _record_failure(judge.res, found, judge.target, store, note, isolate=judge.isolate,
                    timeout=judge.timeout, inputs=inputs)


def _shrink_given(found: Verdict, judge: _Judging, shrink_seconds: float | None
                  ) -> tuple[Verdict, dict[str, Any] | None, str]:
    """``found`` shrunk by :func:`numoracle.checking.shrink.shrink` within
    ``shrink_seconds``: the shrunk verdict, its inputs and a note; the failure
    as found (no inputs) and why, where the shrinker cannot take it."""
    from ..checking.shrink import shrink  # noqa: PLC0415 - loaded when a given case fails

    case = found.case
    seconds = float("inf") if shrink_seconds is None else shrink_seconds
    try:
        got = shrink(judge.target, case.op, case.params, case.inputs(), seconds=seconds,
                     layouts=case.layouts, timeout=judge.timeout, isolate=judge.isolate)
    except (InvalidArgument, UnsupportedCase, ValueError, TypeError, KeyError) as exc:
        return found, None, f"not shrunk ({type(exc).__name__}: {exc}); the case as found"
    note = ""
    if "budget spent" in got.steps:
        note = (f"shrinking stopped at its cap of {shrink_seconds:g} s"
                if shrink_seconds is not None and got.seconds >= shrink_seconds
                else f"shrinking stopped after {got.runs} kernel runs")
    return got.verdict, got.inputs_after, note


def _pass_message(res: TargetResult) -> str:
    """The message of a run that found no failure: what was judged, and how close
    the worst case came to its bound."""
    unjudged = f"; {res.unjudged} drawn cases not judged" if res.unjudged else ""
    if res.cases == 0:
        return (f"UNJUDGED: {res.target} on {res.op}, claiming {res.precision}: no case was "
                f"judged{unjudged}")
    return (f"PASS: {res.target} on {res.op}, claiming {res.precision}: {res.cases} cases "
            f"within the bound, worst ratio {fmt_ratio(res.worst_ratio)}{unjudged}")


def _weaker(v: Verdict, first: Verdict | None) -> bool:
    """Whether a failure found while shrinking is of a weaker class than the
    first: the first had a logic bug in some output and this one has none (so
    that a logic bug shrinks to a case that still shows it, not to one where
    only rounding fails)."""
    def logic(x: Verdict) -> bool:
        return x.error is None and any(not o.passed and o.diagnosis.kind is DiagnosisKind.LOGIC
                                       for o in x.outputs.values())
    return first is not None and logic(first) and not logic(v)


def _record_failure(res: TargetResult, verdict: Verdict, target: Target,
                    store: Path | str | None, note: str = "", *, isolate: bool = False,
                    timeout: float | None = DEFAULT_TIMEOUT,
                    inputs: dict[str, Any] | None = None) -> None:
    """A failure into ``res``: its causes told apart, its diagnosis and message,
    its repro saved in ``store`` (with ``inputs``, the arrays of a case whose
    values its seed does not make)."""
    res.failures = max(res.failures, 1)
    res.verdict = RunVerdict.FAIL
    res.fault = getattr(verdict.error, "kind", None)
    res.worst_ratio = max(res.worst_ratio, verdict.worst_ratio)
    if verdict.error is None and verdict.got is not None:
        # the causes one case cannot tell apart: reruns and discriminating cases
        found = discriminate(verdict, target, inputs=inputs, timeout=timeout, isolate=isolate)
        if res.per_model:  # a diagnosed run: the probes are diagnosed cases too
            for name, ratios in found.per_model.items():
                seen = res.per_model.setdefault(name, {})
                for m, r in ratios.items():
                    seen[m] = max(seen.get(m, 0.0), r)
    res.diagnoses = {o.name: o.diagnosis for o in verdict.outputs.values() if not o.passed}
    res.failure = verdict
    res.diagnosis = verdict.diagnosis
    shapes = verdict.case.shapes()
    res.repro_shape = ", ".join(f"{k}{tuple(s)}" for k, s in shapes.items())
    if store is not None:
        save_repro(verdict, target, store=store, inputs=inputs)
        res.repro = verdict.repro
    res.message = verdict.message()
    if note:
        res.diagnosis += f" ({note})"
        res.message += f"\n  note: {note}"
