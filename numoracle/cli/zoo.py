"""``numoracle zoo``: run the bug zoo (deliberately broken kernels, :mod:`numoracle.zoo`,
or the ``*.py`` files of a folder given with ``--zoo PATH``) and report which
mutants were caught, after how many cases, with the shrunk repro's shape;
``--report DIR`` writes ``DIR/zoo.json``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ..checking.report import results_table, write_json
from ..errors import InvalidArgument
from ..outcome import RunVerdict
from ..reports import observing, write_html
from ..targets.target import Target
from ._common import (
    check_ops,
    ops_option,
    print_text,
    run_all,
    run_options,
    sharp_option,
    sharpened,
    skipped_line,
)

if TYPE_CHECKING:
    from ..running.runner import TargetResult

__all__ = ["ZOO_EXAMPLES", "DEFAULT_ZOO", "ZOO_COLUMNS", "add_parser"]

#: cases per mutant of ``numoracle zoo``
ZOO_EXAMPLES = 200
#: where ``numoracle zoo`` looks for mutants by default: None, the package's own
#: zoo (:mod:`numoracle.zoo`, imported only for the ops asked for)
DEFAULT_ZOO: Path | None = None
ZOO_COLUMNS = ("mutant", "op", "status", "at case", "repro_shape")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``zoo`` to the subcommands."""
    zoo = sub.add_parser("zoo", help="run the bug zoo: mutants the oracle must catch")
    ops_option(zoo)
    zoo.add_argument("--zoo", type=Path, default=DEFAULT_ZOO, metavar="PATH",
                     help="a folder of *.py files whose TARGETS are mutants "
                          "(default: numoracle's own zoo, numoracle.zoo)")
    run_options(zoo, ZOO_EXAMPLES, "mutant")
    zoo.add_argument("--observability", action="store_true",
                     help="write Hypothesis observability records (.hypothesis/observed/) "
                          "for Tyche to show the case distribution")
    sharp_option(zoo)
    zoo.set_defaults(func=_cmd_zoo)


def _load_zoo(folder: Path | None, ops: Sequence[str],
              skipped: dict[str, str] | None = None) -> list[Target]:
    """The mutants computing ``ops``: from :mod:`numoracle.zoo` when ``folder`` is
    None (modules needing a missing optional package go to ``skipped``), else
    from the ``TARGETS`` of every ``*.py`` file in ``folder``."""
    if folder is None:
        from ..zoo import mutants as zoo_mutants  # noqa: PLC0415 - the zoo imports kernels

        chosen = zoo_mutants(ops, skipped=skipped)
        if not chosen:
            why = "".join(f"; {m}: {reason}" for m, reason in (skipped or {}).items())
            raise InvalidArgument(f"numoracle's zoo has no mutant computing {list(ops)} that "
                                  f"can load here{why}; pass --zoo PATH for a folder of your "
                                  "own mutants")
        return chosen
    from ..callables import load_module  # noqa: PLC0415 - loads the zoo's files as repros do

    if not folder.is_dir():
        raise InvalidArgument(
            f"no bug zoo at {str(folder)!r}: pass --zoo PATH with a folder of *.py files "
            "whose TARGETS list mutants, or leave --zoo out for numoracle's own zoo"
        )
    mutants: list[Target] = []
    for path in sorted(folder.glob("*.py")):
        if not path.name.startswith("_"):
            mutants.extend(getattr(load_module(str(path)), "TARGETS", ()))
    chosen = [t for t in mutants if t.op in ops]
    if not chosen:
        raise InvalidArgument(f"the zoo at {str(folder)!r} has no mutant computing {list(ops)} "
                              "(no *.py file there defines TARGETS for them)")
    return chosen


def _zoo_status(r: TargetResult) -> tuple[str, str]:
    """``caught``, ``missed`` or ``skipped`` (cannot run here: not a miss), and why."""
    if r.verdict is RunVerdict.FAIL:
        return "caught", r.diagnosis
    if r.verdict is RunVerdict.SKIPPED:
        return "skipped", r.diagnosis
    if r.verdict is RunVerdict.PASS and r.cases:
        return "missed", f"{r.cases} cases passed"
    return "missed", r.status()[1]


def _zoo_row(r: TargetResult) -> dict[str, Any]:
    status, reason = _zoo_status(r)
    return {"mutant": r.target, "op": r.op, "status": status, "reason": reason,
            "caught": r.verdict is RunVerdict.FAIL,
            "cases_to_catch": r.cases_to_catch, "repro_shape": r.repro_shape,
            "diagnosis": r.diagnosis, "repro": r.repro}


def _cmd_zoo(args: argparse.Namespace, console: Console) -> int:
    unloaded: dict[str, str] = {}
    mutants = _load_zoo(args.zoo, check_ops(args.ops), unloaded)
    for module, reason in unloaded.items():
        print_text(console, f"skipped the zoo's {module} mutants: {reason}", style="yellow")
    if args.sharp:
        mutants = [sharpened(t) for t in mutants]
    with observing(args.observability) as observed:
        results = run_all(mutants, args, console)
    ran = [r for r in results if r.verdict is not RunVerdict.SKIPPED]
    rows = [_zoo_row(r) for r in results]
    if args.report is not None:
        path = write_json(args.report / "zoo.json", rows)
        console.print(f"report: {path}", markup=False)
        page = write_html(args.report / "report.html", results, title="numoracle zoo",
                          zoo=True, examples=args.examples,
                          observed=None if observed is None else str(observed))
        console.print(f"report: {page}", markup=False)
    skipped = skipped_line(results)
    if skipped:
        print_text(console, skipped, style="yellow")
    shown = [{**_zoo_row(r), "at case": r.cases_to_catch} for r in ran]
    console.print(results_table(shown, "numoracle zoo", ZOO_COLUMNS))
    for row in shown:  # below the table: a diagnosis is a sentence, not a cell
        print_text(console, f"{row['mutant']} ({row['op']}, {row['status']}): {row['reason']}")
    caught = sum(row["caught"] for row in shown)
    print_text(console, f"caught {caught} of {len(shown)} mutants",
                style="green" if caught == len(shown) else "red")
    return 0 if ran and caught == len(shown) else 1

