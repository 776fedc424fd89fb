"""``numoracle run``: check every target available here (or those named) on
every op, print a table and the message of each failure; ``--report DIR``
writes ``DIR/report.json``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rich.console import Console

from ..cases.target import Target
from ..checking.report import results_table, write_json
from ..errors import InvalidArgument
from ..reports import observing, write_html
from ._common import (
    check_ops,
    names,
    ops_option,
    positive_float,
    positive_int,
    print_text,
    resolve_regime,
    run_all,
    run_options,
    sharp_option,
    sharpened,
    skipped_line,
)

__all__ = ["RUN_EXAMPLES", "RUN_BUDGET", "RUN_COLUMNS", "add_parser"]

#: most cases per target and op of ``numoracle run``
RUN_EXAMPLES = 2000
#: seconds ``numoracle run`` takes in all by default, shared among the targets
RUN_BUDGET = 60.0
RUN_COLUMNS = ("target", "op", "precision", "cases", "failures", "worst_ratio", "status",
               "time_s")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``run`` to the subcommands."""
    run = sub.add_parser("run", help="check the targets available here")
    ops_option(run)
    run.add_argument("--targets", type=names, metavar="NAME,...",
                     help="targets to check (default: every one available here)")
    run_options(run, RUN_EXAMPLES, "target and op")
    run.add_argument("--budget", type=positive_float, default=RUN_BUDGET, metavar="SECONDS",
                     help=f"time for the whole run, shared among the targets (default "
                          f"{RUN_BUDGET:g} s); each target stops drawing new cases when its "
                          "share is spent")
    sharp_option(run)
    run.add_argument("--regime", choices=("auto", "small", "realistic", "mixed"),
                     default="auto",
                     help="case sizes: small (cheap cases), realistic (the layer shapes "
                          "practitioners train at: conv2d from real CNNs, linear up to 8,192 "
                          "features, reductions up to 2**20), mixed (GPU targets spend 30%% "
                          "of their time on realistic shapes); auto (default): mixed where a "
                          "GPU target can run here, else small")
    run.add_argument("--diagnose", action="store_true",
                     help="also judge every case under every standard precision model and "
                          "show the precision each output really delivered (slower)")
    run.add_argument("--observability", action="store_true",
                     help="write Hypothesis observability records (.hypothesis/observed/) "
                          "for Tyche to show the case distribution")
    run.add_argument("--cluster", metavar="ADDRESS",
                     help="run blocks of cases as Ray tasks on the cluster at ADDRESS ('local' "
                          "starts Ray here; 'auto' or ray://HOST:PORT joins one) and merge them "
                          "into one report; needs `pip install 'numoracle[ray]'`")
    run.add_argument("--block-size", type=positive_int, metavar="N",
                     help="with --cluster: cases per Ray task (default 200)")
    run.add_argument("--task-timeout", type=positive_float, metavar="SECONDS",
                     help="with --cluster: seconds a block may take before it is cancelled "
                          "and reported unjudged (default 900)")
    run.set_defaults(func=_cmd_run)


def _select_targets(names: Sequence[str] | None, ops: Sequence[str]) -> list[Target]:
    """The targets named (all when None) that compute one of ``ops``."""
    from ..kernels import all_targets  # noqa: PLC0415 - the CLI's list loads lazily

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
    ops = check_ops(args.ops)
    targets = _select_targets(args.targets, ops)
    args.regime = resolve_regime(getattr(args, "regime", "auto"), targets)
    if getattr(args, "sharp", False):
        targets = [sharpened(t) for t in targets]
    with observing(args.observability) as observed:
        if args.cluster is not None:  # Ray tasks, merged into the same results
            from ..running.cluster import cluster_results  # noqa: PLC0415 - Ray is optional

            results = cluster_results(targets, args, console)
        else:
            results = run_all(targets, args, console)
    ran = [r for r in results if r.verdict != "skipped"]
    if args.report is not None:
        path = write_json(args.report / "report.json", [r.row() for r in results])
        console.print(f"report: {path}", markup=False)
        page = write_html(args.report / "report.html", results, examples=args.examples,
                          observed=None if observed is None else str(observed))
        console.print(f"report: {page}", markup=False)
    if observed is not None:
        console.print(f"observability records (Tyche): {observed}", markup=False)
    skipped = skipped_line(results)
    if skipped:
        print_text(console, skipped, style="yellow")
    if not ran:
        print_text(console, "no target could run here: nothing was checked", style="red")
        return 1
    columns = RUN_COLUMNS + (("effective",) if getattr(args, "diagnose", False) else ())
    rows = [r.row() for r in ran]
    for row in rows:  # realistic-size runs are rows of their own: say so beside the op
        if row.get("regime", "small") != "small":
            row["op"] = f"{row['op']} ({row['regime']})"
    console.print(results_table(rows, "numoracle run", columns))
    for r in ran:
        if r.verdict == "FAIL":
            print_text(console, r.message or r.diagnosis)
        elif r.status()[0] != "pass":
            print_text(console, f"{r.target} on {r.op}: {r.status()[0]}: {r.status()[1]}",
                        style="red")
    return 0 if all(r.verdict == "pass" for r in ran) else 1


