"""The ``numoracle`` command line.

``numoracle run``
    Check every target available here (or those named) on every op, print a
    table and the message of each failure; ``--report DIR`` writes
    ``DIR/report.json``.
``numoracle list``
    The ops (parameters, outputs) and the targets (backend, precision model,
    available here or why not).
``numoracle replay PATH``
    Re-run a saved repro; exit 0 when it passes now, 1 when it still fails.
``numoracle zoo``
    Run the bug zoo (deliberately broken kernels under ``benchmarks/zoo``) and
    report which mutants were caught, after how many cases, with the shrunk
    repro's shape; ``--report DIR`` writes ``DIR/zoo.json``.

Exit status: 0 when everything checked passed (for ``zoo``: every mutant was
caught), 1 when something failed, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from . import __version__
from .checking.report import results_table, write_json
from .errors import InvalidArgument
from .oracle.ops import OP_GROUPS, OPS, get_op
from .store.repro import DEFAULT_STORE

if TYPE_CHECKING:
    from .cases.target import Target
    from .checking.verdict import Verdict
    from .running.runner import TargetResult

__all__ = ["main", "RUN_EXAMPLES", "RUN_BUDGET", "ZOO_EXAMPLES", "DEFAULT_ZOO"]

#: most cases per target and op of ``numoracle run``
RUN_EXAMPLES = 2000
#: seconds ``numoracle run`` takes in all by default, shared among the targets
RUN_BUDGET = 60.0
#: cases per mutant of ``numoracle zoo``
ZOO_EXAMPLES = 200
#: where ``numoracle zoo`` looks for the zoo, relative to the current directory
DEFAULT_ZOO = Path("benchmarks") / "zoo"

RUN_COLUMNS = ("target", "op", "precision", "cases", "failures", "worst_ratio", "verdict",
               "time_s")
ZOO_COLUMNS = ("mutant", "op", "verdict", "cases_to_catch", "repro_shape", "diagnosis")


# -- argument parsing -------------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive int; give e.g. 50")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number; give e.g. 60")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an int; give e.g. 0") from None


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} names nothing; give names separated by "
                                         "commas, e.g. linear,matmul")
    return names


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="numoracle",
        description="A property-based numerical test oracle for GPU kernels.",
    )
    parser.add_argument("--version", action="version", version=f"numoracle {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def ops_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--ops", type=_names, metavar="OP,...",
                       help=f"ops to check (default: all of {', '.join(sorted(OPS))})")

    def run_options(p: argparse.ArgumentParser, examples: int, per: str) -> None:
        p.add_argument("--examples", type=_positive_int, default=examples, metavar="N",
                       help=f"cases per {per} (default {examples})")
        p.add_argument("--seed", type=_int, default=0, metavar="S",
                       help="Hypothesis seed (default 0: the same cases every run)")
        p.add_argument("--report", type=Path, metavar="DIR", help="write a JSON report to DIR")
        p.add_argument("--store", type=Path, default=DEFAULT_STORE, metavar="DIR",
                       help=f"folder for the repros of failures (default {DEFAULT_STORE})")

    run = sub.add_parser("run", help="check the targets available here")
    ops_option(run)
    run.add_argument("--targets", type=_names, metavar="NAME,...",
                     help="targets to check (default: every one available here)")
    run_options(run, RUN_EXAMPLES, "target and op")
    run.add_argument("--budget", type=_positive_float, default=RUN_BUDGET, metavar="SECONDS",
                     help=f"time for the whole run, shared among the targets (default "
                          f"{RUN_BUDGET:g} s); each target stops drawing new cases when its "
                          "share is spent")
    run.add_argument("--diagnose", action="store_true",
                     help="also judge every case under every standard precision model and "
                          "show the precision each output really delivered (slower)")
    run.set_defaults(func=_cmd_run)

    lst = sub.add_parser("list", help="list the ops and the targets")
    lst.set_defaults(func=_cmd_list)

    rep = sub.add_parser("replay", help="re-run a saved repro")
    rep.add_argument("path", type=Path, metavar="PATH", help="a repro folder (or its repro.json)")
    rep.set_defaults(func=_cmd_replay)

    zoo = sub.add_parser("zoo", help="run the bug zoo: mutants the oracle must catch")
    ops_option(zoo)
    zoo.add_argument("--zoo", type=Path, default=DEFAULT_ZOO, metavar="PATH",
                     help=f"the zoo folder (default {DEFAULT_ZOO})")
    run_options(zoo, ZOO_EXAMPLES, "mutant")
    zoo.set_defaults(func=_cmd_zoo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 2 for a usage error, 0 for --help
        return exc.code if isinstance(exc.code, int) else 2
    console = _console()
    try:
        status: int = args.func(args, console)
    except InvalidArgument as exc:
        _print_text(Console(stderr=True), f"numoracle {args.command}: {exc}", style="red")
        return 2
    return status


# -- shared pieces ------------------------------------------------------------------------


def _console() -> Console:
    """Standard output; 140 columns wide when it is not a terminal (logs, CI)
    and COLUMNS does not say otherwise, so that tables keep one line a row."""
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 140
    return console


def _check_ops(ops: Sequence[str] | None) -> list[str]:
    """The ops asked for (all when None), each checked against the registry; a
    group name (``optim``) stands for its ops."""
    if ops is None:
        return sorted(OPS)
    ops = [name for op in ops for name in OP_GROUPS.get(op, (op,))]
    for op in ops:
        get_op(op)
    return list(dict.fromkeys(ops))


def _print_text(console: Console, text: str, style: str | None = None) -> None:
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


def _run_all(targets: Sequence[Target], args: argparse.Namespace,
             console: Console) -> list[TargetResult]:
    """run_target on each target in turn, with a progress bar per target.

    Unavailable targets come back at once as ``skipped`` results."""
    from .running.runner import run_target  # noqa: PLC0415 - hypothesis only for commands that run

    results = []
    runnable = [t for t in targets if t.unavailable_reason() is None]
    budget = getattr(args, "budget", None)
    end = None if budget is None else time.perf_counter() + budget
    with _progress(console) as progress:
        for t in targets:
            if t not in runnable:
                results.append(run_target(t))  # a skipped result, at once
                continue
            share = None
            if end is not None:  # what is left, shared among the targets still to run
                share = max(end - time.perf_counter(), 0.0) / (len(runnable) - runnable.index(t))
            label = f"{t.name} {t.op}"
            task = progress.add_task(label, total=args.examples)
            results.append(run_target(t, examples=args.examples, seed=args.seed,
                                      store=args.store, on_case=_ticker(progress, task, label),
                                      seconds=share,
                                      diagnose=getattr(args, "diagnose", False)))
            progress.update(task, completed=args.examples)
    return results


def _skipped_line(results: Sequence[TargetResult]) -> str | None:
    """One line naming the skipped targets, grouped by reason."""
    by_reason: dict[str, list[str]] = {}
    for r in results:
        if r.verdict == "skipped":
            names = by_reason.setdefault(r.diagnosis, [])
            if r.target not in names:
                names.append(r.target)
    if not by_reason:
        return None
    return "skipped (cannot run here): " + "; ".join(
        f"{', '.join(names)} ({reason})" for reason, names in by_reason.items())


# -- run -----------------------------------------------------------------------------------


def _select_targets(names: Sequence[str] | None, ops: Sequence[str]) -> list[Target]:
    """The targets named (all when None) that compute one of ``ops``."""
    from .kernels import all_targets  # noqa: PLC0415 - the CLI's list loads lazily

    everything = all_targets()
    known = sorted({t.name for t in everything})
    unknown = [n for n in names or () if n not in known]
    if unknown:
        raise InvalidArgument(f"--targets names unknown targets {unknown}; use names from "
                              f"{known} (see `numoracle list`)")
    chosen = [t for t in everything if (names is None or t.name in names) and t.op in ops]
    if not chosen:
        raise InvalidArgument(f"none of the targets {list(names or known)} computes {list(ops)}; "
                              "see `numoracle list` for which target computes which op")
    return chosen


def _cmd_run(args: argparse.Namespace, console: Console) -> int:
    ops = _check_ops(args.ops)
    targets = _select_targets(args.targets, ops)
    results = _run_all(targets, args, console)
    ran = [r for r in results if r.verdict != "skipped"]
    if args.report is not None:
        path = write_json(args.report / "report.json", [r.row() for r in results])
        console.print(f"report: {path}", markup=False)
    skipped = _skipped_line(results)
    if skipped:
        _print_text(console, skipped, style="yellow")
    if not ran:
        _print_text(console, "no target could run here: nothing was checked", style="red")
        return 1
    columns = RUN_COLUMNS + (("effective",) if getattr(args, "diagnose", False) else ())
    console.print(results_table([r.row() for r in ran], "numoracle run", columns))
    for r in ran:
        if r.verdict == "FAIL":
            _print_text(console, r.message or r.diagnosis)
        elif r.verdict != "pass":
            _print_text(console, f"{r.target} on {r.op}: {r.verdict}: {r.diagnosis}",
                        style="red")
    return 0 if all(r.verdict == "pass" for r in ran) else 1


# -- list -------------------------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace, console: Console) -> int:
    from .api import op_outputs  # noqa: PLC0415 - strategies load only here
    from .kernels import all_targets  # noqa: PLC0415 - the CLI's list loads lazily

    ops = Table(title="ops")
    for col in ("op", "parameters", "outputs", "description"):
        ops.add_column(col)
    for name, op in sorted(OPS.items()):
        doc = (sys.modules[type(op).__module__].__doc__ or "").strip().split("\n")[0]
        doc = doc.replace("``", "")
        ops.add_row(*map(escape, (name, ", ".join(op.param_names),
                                  ", ".join(op_outputs(name)), doc)))
    console.print(ops)
    targets = Table(title="targets")
    for col in ("target", "op", "backend", "precision model", "here"):
        targets.add_column(col)
    for t in all_targets():
        reason = t.unavailable_reason()
        here = "[green]available[/green]" if reason is None else f"[yellow]{escape(reason)}"
        targets.add_row(escape(t.name), t.op, t.backend,
                        escape(f"{t.precision.name}: {t.precision.describe()}"), here)
    console.print(targets)
    return 0


# -- replay -------------------------------------------------------------------------------------


def _cmd_replay(args: argparse.Namespace, console: Console) -> int:
    from .store.repro import replay  # noqa: PLC0415 - replay needs the checking machinery

    verdict = replay(args.path)
    _print_text(console, verdict.message())
    if verdict.passed:
        _print_text(console, "passes now", style="green")
        return 0
    _print_text(console, "still fails", style="red")
    return 1


# -- zoo -------------------------------------------------------------------------------------------


def _load_zoo(folder: Path, ops: Sequence[str]) -> list[Target]:
    """The mutants of every ``*.py`` file in ``folder`` (its ``TARGETS``) computing ``ops``."""
    from .store.repro import _load_module  # noqa: PLC0415 - loads the zoo's files as repros do

    if not folder.is_dir():
        raise InvalidArgument(
            f"no bug zoo at {str(folder)!r}: the bug zoo lives in the numoracle source tree "
            "under benchmarks/zoo; run from a checkout or pass --zoo PATH"
        )
    mutants: list[Target] = []
    for path in sorted(folder.glob("*.py")):
        if not path.name.startswith("_"):
            mutants.extend(getattr(_load_module(str(path)), "TARGETS", ()))
    chosen = [t for t in mutants if t.op in ops]
    if not chosen:
        raise InvalidArgument(f"the zoo at {str(folder)!r} has no mutant computing {list(ops)} "
                              "(no *.py file there defines TARGETS for them)")
    return chosen


def _zoo_row(r: TargetResult) -> dict[str, Any]:
    return {"mutant": r.target, "op": r.op, "caught": r.verdict == "FAIL",
            "cases_to_catch": r.cases_to_catch, "repro_shape": r.repro_shape,
            "diagnosis": r.diagnosis, "repro": r.repro}


def _cmd_zoo(args: argparse.Namespace, console: Console) -> int:
    mutants = _load_zoo(args.zoo, _check_ops(args.ops))
    results = _run_all(mutants, args, console)
    ran = [r for r in results if r.verdict != "skipped"]
    rows = [_zoo_row(r) for r in results]
    if args.report is not None:
        path = write_json(args.report / "zoo.json", rows)
        console.print(f"report: {path}", markup=False)
    skipped = _skipped_line(results)
    if skipped:
        _print_text(console, skipped, style="yellow")
    shown = [{**_zoo_row(r), "verdict": "caught" if r.verdict == "FAIL" else
              ("MISSED" if r.verdict == "pass" else r.verdict)} for r in ran]
    console.print(results_table(shown, "numoracle zoo", ZOO_COLUMNS))
    caught = sum(row["caught"] for row in shown)
    _print_text(console, f"caught {caught} of {len(shown)} mutants",
                style="green" if caught == len(shown) else "red")
    return 0 if ran and caught == len(shown) else 1

