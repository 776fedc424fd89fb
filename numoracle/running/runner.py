"""Running many cases on a target: Hypothesis draws, the oracle judges,
a failure shrinks to a minimal case and is saved as a repro."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from hypothesis import HealthCheck, Phase, Verbosity, event, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import FlakyFailure, HypothesisException

from ..cases.case import Case
from ..cases.target import Target
from ..checking.check import DEFAULT_TIMEOUT, check_case
from ..checking.diagnosis import Diagnosis
from ..checking.discriminate import discriminate
from ..checking.message import fmt_ratio
from ..checking.verdict import Verdict, ladder_for
from ..errors import KernelMismatch, UnsupportedCase
from ..oracle.memory import reuse_for_checking
from ..oracle.precision import PRESETS, PrecisionModel
from ..reports.observe import case_features
from ..reports.observe import enabled as observing
from ..store.repro import DEFAULT_STORE, save_repro

__all__ = ["TargetResult", "run_target", "default_strategy", "draw_cases",
           "same_draws_everywhere"]


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
    verdict: str = "pass"
    repro: str | None = None
    seconds: float = 0.0
    diagnosis: str = ""
    cases_to_catch: int | None = None
    repro_shape: str | None = None
    message: str = ""
    #: per case and output: (output, n, worst det, worst prob, median det, median prob, exact)
    samples: list[tuple[str, int, float, float, float, float, bool]] = field(default_factory=list)
    #: with ``diagnose``: per output, the worst ratio under each candidate model
    per_model: dict[str, dict[str, float]] = field(default_factory=dict)
    #: stored repros of this target replayed before drawing, and those that pass now
    replayed: int = 0
    fixed: list[str] = field(default_factory=list)
    #: cases drawn but not judged by the oracle (unsupported, or the kernel gave no outputs)
    unjudged: int = 0
    #: why the last unjudged case was not judged (the oracle's UnsupportedCase)
    unjudged_reason: str = ""
    #: the kind of the failure when the kernel gave no outputs ("hang", "crash", "cuda", ...)
    fault: str | None = None
    #: the size regime of the cases (``small`` or ``realistic``: see
    #: :data:`numoracle.oracle.ops.plan.REGIMES`)
    regime: str = "small"
    #: the precision model claimed (``precision`` is its name)
    model: PrecisionModel | None = None
    #: the recorded failure's diagnosis of each failing output
    diagnoses: dict[str, Diagnosis] = field(default_factory=dict)
    #: the recorded failure (the shrunk case's verdict), or None
    failure: Verdict | None = field(default=None, repr=False)
    #: cases asked for (0: not said); ``cases`` of ``asked`` is what the row got
    asked: int = 0
    #: seconds each judged case took (drawing, kernel, oracle), in order
    case_seconds: list[float] = field(default_factory=list)

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
            if kind == "nondeterministic":
                out[name] = "nondeterministic"
            elif kind == "logic":
                out[name] = "none"
            else:
                out[name] = next((m for m in ladder if ratios.get(m, float("inf")) < 1.0),
                                 "none")
        return out

    def status(self) -> tuple[str, str]:
        """``pass``, ``fail``, ``skipped`` (cannot run here) or ``unjudged`` (ran,
        but no case was judged, or the run did not complete), with the reason."""
        if self.verdict == "FAIL":
            return "fail", self.diagnosis
        if self.verdict == "skipped":
            return "skipped", self.diagnosis
        if self.verdict != "pass":
            return "unjudged", f"the run did not complete: {self.diagnosis}"
        if self.cases == 0:
            if not self.unjudged:
                return "unjudged", "no case ran within the time budget"
            return "unjudged", (f"no case was judged: {self.unjudged} drawn cases were not "
                                f"judged, the last because {self.unjudged_reason or 'unknown'}")
        return "pass", ""

    def row(self) -> dict[str, Any]:
        """The fields of the report (``report.json``)."""
        status, reason = self.status()
        return {"target": self.target, "op": self.op, "precision": self.precision,
                "status": status, "reason": reason,
                "cases": self.cases, "failures": self.failures,
                "worst_ratio": self.worst_ratio, "verdict": self.verdict,
                "repro": self.repro, "time_s": round(self.seconds, 3),
                "diagnosis": self.diagnosis, "cases_to_catch": self.cases_to_catch,
                "repro_shape": self.repro_shape, "unjudged": self.unjudged,
                "fault": self.fault, "regime": self.regime, "asked": self.asked,
                "effective": ", ".join(f"{k}: {v}" for k, v in self.effective().items())}


@contextlib.contextmanager
def same_draws_everywhere() -> Iterator[None]:
    """Hypothesis draws with a seed, and nothing else, deciding the cases.

    Hypothesis (6.13x on) mixes literals of the *local* modules loaded in the
    process (those outside site-packages: an editable numoracle, the user's
    kernels) into its draws, so the same seed drew other cases in a Ray worker
    than in the driver, whose ``sys.modules`` differ. Inside this context those
    literals are pinned to none (what a process without local modules sees),
    so a seed draws the same cases in every process and on every node
    (:func:`run_target` draws inside it). A no-op where Hypothesis has no such
    constants.
    """
    try:
        from hypothesis.internal.conjecture import providers  # noqa: PLC0415 - internal
        get, cache = providers._get_local_constants, providers.CONSTANTS_CACHE
        none = providers.Constants()
    except (ImportError, AttributeError):
        yield
        return
    providers._get_local_constants = lambda: none
    cache.cache.clear()  # allowed values cached with the constants of the process
    try:
        yield
    finally:
        providers._get_local_constants = get
        cache.cache.clear()


def default_strategy(target: Target, **overrides: Any) -> st.SearchStrategy[Case]:
    """Cases for ``target``: its op, its storage format, its layouts, its
    reduction limit; every value family, special values overlaid at times."""
    from ..strategies import FAMILY_ORDER, cases  # noqa: PLC0415 - strategies need hypothesis

    kw: dict[str, Any] = {"op": target.op, "storage": target.precision.storage.name,
                          "max_reduction": target.max_reduction, "layouts": target.layouts,
                          "families": FAMILY_ORDER, "max_overlays": 2}
    kw.update(overrides)
    return cases(**kw)


def draw_cases(target: Target, n: int, seed: int = 0, **overrides: Any) -> list[Case]:
    """The first ``n`` cases :func:`default_strategy` (with ``overrides``) draws
    for ``target`` under Hypothesis seed ``seed``, without running anything."""
    drawn: list[Case] = []

    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet)
    @given(default_strategy(target, **overrides))
    def collect(case: Case) -> None:
        drawn.append(case)

    hypothesis_seed(seed)(collect)()
    return drawn[:n]


def run_target(
    target: Target,
    *,
    examples: int = 100,
    seed: int | None = 0,
    strategy: st.SearchStrategy[Case] | None = None,
    store: Path | str | None = DEFAULT_STORE,
    on_case: Callable[[Verdict], None] | None = None,
    shrink: bool = True,
    seconds: float | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    diagnose: bool = False,
    isolate: bool = False,
    shrink_seconds: float | None = None,
    first_case: bool = False,
    expected_case: float = 0.0,
) -> TargetResult:
    """Check ``examples`` cases of ``target``; shrink and save the first failure.

    Parameters
    ----------
    target : Target
        The kernel under test.
    examples : int
        Cases to generate (shrinking adds more runs after a failure).
    seed : int or None
        Hypothesis seed; None for a random run.
    strategy : SearchStrategy of Case, optional
        Defaults to :func:`default_strategy`.
    store : path or None
        Folder for repros; None saves none.
    on_case : callable, optional
        Called with each verdict (progress bars).
    shrink : bool
        Shrink a failure to a minimal case.
    seconds : float or None
        Time budget: no case is started that would end past it, judging by
        the cases judged so far (halfway between their mean and longest time;
        a failure found by then is still shrunk and saved).
    timeout : float or None
        Seconds a kernel may take on one case before it counts as hung (None:
        no limit). A hang costs one timeout per case; it is shrunk with
        :data:`HANG_SHRINK_FACTOR` of the timeout and at most
        :data:`HANG_SHRINK_TRIES` hung attempts, then the smallest hanging
        case so far is saved.
    diagnose : bool
        Judge every case under every candidate model too (several times the
        oracle's work): :meth:`TargetResult.effective` then names the precision
        each output really delivered.
    isolate : bool
        Run the kernel in a worker process (:mod:`numoracle.checking.isolate`):
        a crash, an exit or a CUDA error fails the case, and the run (and the
        shrinking, in fresh workers, at most :data:`CRASH_SHRINK_TRIES` crashed
        attempts) goes on. The kernel must be importable by the worker
        (InvalidArgument at once if not).
    shrink_seconds : float or None
        Cap on the time shrinking a failure may take (None: no cap); once
        spent, the smallest failing case so far is saved and its diagnosis
        says that shrinking stopped at the cap.
    first_case : bool
        Start the first case whatever ``seconds`` says: a row judged by no
        case has no result.
    expected_case : float
        Seconds a case is expected to take before any has been timed here
        (from an earlier block of the same target and regime).
    """
    res = TargetResult(target.name, target.op, target.precision.name, model=target.precision,
                       asked=examples)
    reason = target.unavailable_reason()
    if reason:
        res.verdict, res.diagnosis = "skipped", reason
        return res
    strat = strategy if strategy is not None else default_strategy(target)
    reuse_for_checking()  # the oracle's output-sized arrays: no fresh pages every case
    if isolate:
        from ..checking.isolate import prepare  # noqa: PLC0415 - multiprocessing only when isolating

        prepare(target)
    state: dict[str, Any] = {"failed": False, "last": None, "first": None, "hangs": 0,
                             "crashes": 0, "timeout": timeout, "shrink_end": None,
                             "tried": 0}
    t0 = time.perf_counter()
    deadline = None if seconds is None else t0 + seconds

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
              phases=[Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else []),
              report_multiple_bugs=False, print_blob=False)
    @given(strat)
    def prop(case: Case) -> None:
        started = time.perf_counter()
        if state["failed"]:
            if state["shrink_end"] is not None and started > state["shrink_end"]:
                raise _ShrinkSpent
        elif deadline is not None and (state["tried"] or not first_case):
            times = res.case_seconds  # halfway between the mean and the longest so far
            expected = (sum(times) / len(times) + max(times)) / 2 if times else expected_case
            if started + expected > deadline:
                raise _BudgetSpent  # not an Exception: Hypothesis lets it through at once
        state["tried"] += 1
        try:
            v = check_case(case, target, timeout=state["timeout"], with_diagnosis=diagnose,
                           isolate=isolate)
        except UnsupportedCase as exc:
            if not state["failed"]:
                res.unjudged += 1
                res.unjudged_reason = str(exc)
            return
        kind = getattr(v.error, "kind", None)
        if state["failed"] and not v.passed and _weaker(v, state["first"]):
            return  # shrinking keeps the first failure's class: a logic bug stays one
        if kind is not None and not state["failed"]:
            res.unjudged += 1
        if observing():  # features for Tyche: op, family, n, verdict
            for key, value in case_features(v).items():
                event(key, value)
        if not state["failed"]:
            res.cases += 1
            res.case_seconds.append(time.perf_counter() - started)
            res.worst_ratio = max(res.worst_ratio, v.worst_ratio)
            for o in v.outputs.values():
                seen = res.per_model.setdefault(o.name, {}) if o.per_model else {}
                for m, r in o.per_model.items():
                    seen[m] = max(seen.get(m, 0.0), r)
            for o in (o for o in v.outputs.values() if o.passed):
                res.samples.append((o.name, o.n, o.worst_ratio_det, o.worst_ratio_prob,
                                    o.median_ratio_det, o.median_ratio_prob, o.exact))
        if on_case is not None:
            on_case(v)
        if not v.passed:
            if not state["failed"]:
                state["failed"] = True
                res.cases_to_catch = res.cases
                state["first"] = v
                if shrink_seconds is not None:
                    state["shrink_end"] = time.perf_counter() + shrink_seconds
                if kind == "hang" and state["timeout"] is not None:
                    state["timeout"] = state["timeout"] * HANG_SHRINK_FACTOR
            state["last"] = v  # Hypothesis shrinks monotonically: the smallest so far
            if kind in ("hang", "crash", "cuda") and v is not state["first"]:
                key = "hangs" if kind == "hang" else "crashes"
                state[key] += 1
                limit = HANG_SHRINK_TRIES if kind == "hang" else CRASH_SHRINK_TRIES
                if state[key] >= limit:
                    raise _ShrinkSpent
            raise KernelMismatch(v.diagnosis, v)

    if seed is not None:
        prop = hypothesis_seed(seed)(prop)
    try:
        with same_draws_everywhere():
            prop()
    except _BudgetSpent:
        pass  # every case run so far passed
    except _ShrinkSpent:
        if state["shrink_end"] is not None and time.perf_counter() > state["shrink_end"]:
            why = f"shrinking stopped at its cap of {shrink_seconds:g} s"
        else:
            why = (f"shrinking stopped after {max(state['hangs'], state['crashes'])} "
                   "attempts that hung or crashed")
        _record_failure(res, state["last"], target, store, why + _hang_note(state, timeout, "; "))
    except KernelMismatch as exc:
        _record_failure(res, cast(Verdict, exc.verdict), target, store,  # raised by prop
                        _hang_note(state, timeout), isolate=isolate, timeout=timeout)
    except (FlakyFailure, HypothesisException, ExceptionGroup) as exc:
        last = state["last"]
        if last is not None:
            note = (f"the failure did not reproduce while shrinking ({type(exc).__name__}): "
                    "nondeterministic or racy?")
            _record_failure(res, last, target, store, note, isolate=isolate, timeout=timeout)
        else:
            res.verdict, res.diagnosis = "error", f"{type(exc).__name__}: {exc}"
    res.seconds = time.perf_counter() - t0
    if res.verdict == "pass" and not res.message:
        res.message = _pass_message(res)
    return res


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
        return x.error is None and any(not o.passed and o.diagnosis.kind == "logic"
                                       for o in x.outputs.values())
    return first is not None and logic(first) and not logic(v)


def _hang_note(state: dict[str, Any], timeout: float | None, sep: str = "") -> str:
    """What the verdict of a hang shrunk with a shorter timeout should add."""
    if timeout is None or state["timeout"] == timeout:
        return ""
    return (f"{sep}the first case hung past the timeout of {timeout:g} s; shrinking ran with "
            f"{state['timeout']:g} s")


def _record_failure(res: TargetResult, verdict: Verdict, target: Target,
                    store: Path | str | None, note: str = "", *, isolate: bool = False,
                    timeout: float | None = DEFAULT_TIMEOUT) -> None:
    res.failures = max(res.failures, 1)
    res.verdict = "FAIL"
    res.fault = getattr(verdict.error, "kind", None)
    res.worst_ratio = max(res.worst_ratio, verdict.worst_ratio)
    if verdict.error is None and verdict.got is not None:
        # the causes one case cannot tell apart: reruns and discriminating cases
        found = discriminate(verdict, target, timeout=timeout, isolate=isolate)
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
        save_repro(verdict, target, store=store)
        res.repro = verdict.repro
    res.message = verdict.message()
    if note:
        res.diagnosis += f" ({note})"
        res.message += f"\n  note: {note}"
