"""What the subcommands share: argument types and options, the console, progress
bars, running targets, the skipped line."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from ..checking.check import DEFAULT_TIMEOUT
from ..oracle.ops import OP_GROUPS, OPS, get_op
from ..outcome import RunVerdict
from ..settings import RunSettings
from ..store.repro import DEFAULT_STORE

if TYPE_CHECKING:
    from ..targets.target import Target
    from ..checking.verdict import Verdict
    from ..running.runner import TargetResult

__all__ = ["positive_int", "positive_float", "folder_arg", "int_arg", "names", "ops_option",
           "run_options", "run_settings", "console_for", "check_ops", "print_text", "run_all", "skipped_line",
           "built_in"]





def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive int; give e.g. 50")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number; give e.g. 60")
    return value


def folder_arg(text: str) -> Path:
    """A folder to write into: absent (made later) or a folder, never a file,
    refused before the run rather than after it."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder; give a folder "
                                         "to write into (it is made if absent)")
    return path


def int_arg(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an int; give e.g. 0") from None


def names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} names nothing; give names separated by "
                                         "commas, e.g. linear,matmul")
    return names



def ops_option(p: argparse.ArgumentParser) -> None:
    """``--ops OP,...``: ops or op groups (default: all)."""
    p.add_argument("--ops", type=names, metavar="OP,...",
                   help=f"ops to check (default: all of {', '.join(sorted(OPS))})")


def run_options(p: argparse.ArgumentParser, examples: int, per: str) -> None:
    """``--examples``, ``--seed``, ``--report`` and ``--store``."""
    p.add_argument("--examples", type=positive_int, default=examples, metavar="N",
                   help=f"cases per {per} (default {examples})")
    p.add_argument("--seed", type=int_arg, default=0, metavar="S",
                   help="Hypothesis seed (default 0: the same cases every run)")
    p.add_argument("--report", type=folder_arg, metavar="DIR",
                   help="write a JSON report and report.html (with pictures) to DIR")
    p.add_argument("--store", type=folder_arg, default=DEFAULT_STORE, metavar="DIR",
                   help=f"folder for the repros of failures (default {DEFAULT_STORE})")
    p.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=None,
                   help="run each kernel in a worker process, so that a segfault, abort, exit "
                        "or CUDA error fails its target instead of ending the run (default: "
                        "isolated for kernels from outside numoracle, such as the zoo's and "
                        "plugins', in-process for the built-in targets)")
    p.add_argument("--timeout", type=positive_float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help="seconds a kernel may take on one case before it counts as hung "
                        f"(default {DEFAULT_TIMEOUT:g})")



def run_settings(args: argparse.Namespace) -> RunSettings:
    """The :class:`~numoracle.settings.RunSettings` a command's flags say:
    ``--examples``, ``--seed``, ``--store``, ``--isolate``, ``--timeout``,
    ``--diagnose``, ``--budget``, ``--min-cases`` and ``--shrink-time``,
    over the loaded profile's for the flags a command does not have."""
    names = {"examples": "examples", "seed": "seed", "store": "store", "isolate": "isolate",
             "timeout": "timeout", "diagnose": "diagnose", "budget": "budget",
             "min_cases": "min_cases", "shrink_time": "shrink_seconds"}
    given = {field: getattr(args, flag) for flag, field in names.items() if hasattr(args, flag)}
    return RunSettings.default().replace(**given)


def console_for() -> Console:
    """Standard output; 140 columns wide when it is not a terminal (logs, CI)
    and COLUMNS does not say otherwise, so that tables keep one line a row."""
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 140
    return console


def check_ops(ops: Sequence[str] | None) -> list[str]:
    """The ops asked for (all when None), each checked against the registry; a
    group name (``optim``) stands for its ops."""
    if ops is None:
        return sorted(OPS)
    ops = [name for op in ops for name in OP_GROUPS.get(op, (op,))]
    for op in ops:
        get_op(op)
    return list(dict.fromkeys(ops))


def print_text(console: Console, text: str, style: str | None = None) -> None:
    """Print text as it is: no markup, no highlighting, no wrapping."""
    console.print(text, style=style, markup=False, highlight=False, soft_wrap=True)


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=True,
                    disable=not console.is_terminal)


def _ticker(progress: Progress, task: TaskID, label: str) -> Callable[[Verdict], None]:
    """An ``on_case`` callback: advance the bar per passing case; after the first
    failure the runs are shrinking attempts, and the bar says so."""
    failed = False

    def on_case(verdict: Verdict) -> None:
        nonlocal failed
        if failed:
            return
        if verdict.passed:
            progress.advance(task)
        else:
            failed = True
            progress.update(task, description=f"{label}: shrinking a failure")

    return on_case


def run_all(targets: Sequence[Target], args: argparse.Namespace,
             console: Console) -> list[TargetResult]:
    """run_target on each target in turn, with a progress bar per target; the
    first cases of the small regime are at the edges of the sizes.

    Unavailable targets come back at once as ``skipped`` results."""
    from ..running.draws import edge_cases  # noqa: PLC0415 - hypothesis only when running
    from ..running.runner import (  # noqa: PLC0415 - hypothesis only for commands that run
        default_strategy,
        run_target,
    )

    results: list[TargetResult] = []
    runnable = [t for t in targets if t.unavailable_reason() is None]
    report = getattr(args, "report", None)
    settings = run_settings(args)
    end = settings.deadline(time.perf_counter())
    with _progress(console) as progress:
        for t in targets:
            if t not in runnable:
                results.append(run_target(t))  # a skipped result, at once
                continue
            share = None
            if end is not None:  # what is left, shared among the targets still to run
                share = max(end - time.perf_counter(), 0.0) / (len(runnable) - runnable.index(t))
            label = f"{t.name} {t.op}"
            task = progress.add_task(label, total=settings.examples)
            if report is not None:  # what a run that dies here leaves behind
                _write_progress(report, results, targets[len(results):])
            isolate = not built_in(t) if settings.isolate is None else settings.isolate
            for regime, part in regime_shares(t, getattr(args, "regime", "small")):
                strategy = default_strategy(t, regime=regime)
                edges = edge_cases(t, settings.seed or 0) if regime == "small" else []
                res = run_target(t, settings, strategy=strategy, edges=edges,
                                 on_case=_ticker(progress, task, label),
                                 seconds=None if share is None else share * part,
                                 isolate=isolate)
                res.regime = regime
                results.append(res)
            progress.update(task, completed=settings.examples)
    return results


def sharpened(target: Target) -> Target:
    """``target`` judged by the probabilistic bound where its model allows it
    (round-to-nearest accumulation), else unchanged."""
    model = target.precision
    if model.probabilistic or model.accumulate_rounding != "rne":
        return target
    return replace(target, precision=model.with_(probabilistic=True))


def sharp_option(p: argparse.ArgumentParser) -> None:
    """``--sharp``: the probabilistic bound where a target's model allows it."""
    p.add_argument("--sharp", action="store_true",
                   help="judge by the probabilistic bound (Higham & Mary, failure budget "
                        "1e-6 per element) where a target claims round-to-nearest "
                        "accumulation; truncating (tensor-core) targets keep the "
                        "deterministic bound")


#: share of a GPU target's time spent on realistic layer sizes in a ``mixed`` run
REALISTIC_SHARE = 0.3


def resolve_regime(regime: str, targets: Sequence[Target]) -> str:
    """``auto``: ``mixed`` where some target runs on a GPU here, else ``small``."""
    if regime != "auto":
        return regime
    on_gpu = [t for t in targets if t.on_gpu and t.unavailable_reason() is None]
    return "mixed" if on_gpu else "small"


def regime_shares(target: Target, regime: str) -> list[tuple[str, float]]:
    """The size regimes ``target`` runs in and the share of its time each gets:
    ``small`` alone; ``realistic`` alone (where its op has realistic shapes);
    ``mixed``: GPU targets of such ops give :data:`REALISTIC_SHARE` of their
    time to realistic shapes, the rest (and CPU targets) to small ones."""
    from ..oracle.ops import get_op  # noqa: PLC0415 - the ops load with the command

    has_real = bool(get_op(target.op).realistic_plan)
    if regime == "realistic" and has_real:
        return [("realistic", 1.0)]
    if regime == "mixed" and has_real and target.on_gpu:
        return [("small", 1.0 - REALISTIC_SHARE), ("realistic", REALISTIC_SHARE)]
    return [("small", 1.0)]


def built_in(target: Target) -> bool:
    """Whether ``target`` is one of numoracle's own (its function defined in a
    numoracle module, no outside source): those run in-process unless ``--isolate``."""
    fn = getattr(target.fn, "func", target.fn)  # a functools.partial's function
    return target.source is None and str(getattr(fn, "__module__", "")).startswith("numoracle.")


def _write_progress(folder: Path, done: Sequence[TargetResult],
                    todo: Sequence[Target]) -> None:
    """``folder/progress.json``: the rows of the targets done, and one row per
    target not run yet, marked ``unjudged`` (kept if the run dies)."""
    from ..checking.report import write_json  # noqa: PLC0415 - only with --report
    from ..running.runner import TargetResult  # noqa: PLC0415 - hypothesis only when running

    rows = [r.row() for r in done]
    for t in todo:
        row = TargetResult(t.name, t.op, t.precision.name, verdict=RunVerdict.UNJUDGED).row()
        rows.append({**row, "status": "unjudged", "reason": "not run (yet)"})
    write_json(folder / "progress.json", rows)


def skipped_line(results: Sequence[TargetResult]) -> str | None:
    """One line naming the skipped targets, grouped by reason."""
    by_reason: dict[str, list[str]] = {}
    for r in results:
        if r.verdict is RunVerdict.SKIPPED:
            names = by_reason.setdefault(r.diagnosis, [])
            if r.target not in names:
                names.append(r.target)
    if not by_reason:
        return None
    return "skipped (cannot run here): " + "; ".join(
        f"{', '.join(names)} ({reason})" for reason, names in by_reason.items())


