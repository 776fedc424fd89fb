"""``numoracle judge DIR``: judge the outputs a foreign program wrote into a
case set from ``numoracle cases``; every verdict with its diagnosis, and the
smallest failing case in full (exit 1 when a case fails)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from ..errors import InvalidArgument
from ..store.repro import DEFAULT_STORE
from ._common import print_text

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``judge`` to the subcommands."""
    p = sub.add_parser("judge", help="judge the outputs a foreign program wrote into a case "
                                     "set from `numoracle cases`")
    p.add_argument("path", type=Path, metavar="DIR", help="the case set folder")
    p.add_argument("--store", type=Path, default=DEFAULT_STORE, metavar="DIR",
                   help=f"where the smallest failure's repro goes (default {DEFAULT_STORE})")
    p.add_argument("--report", type=Path, default=None, metavar="DIR|FILE.json",
                   help="also write every verdict as JSON: to DIR/judge.json (a folder, as "
                        "run --report takes), or to FILE.json")
    p.set_defaults(func=_cmd_judge)


def _cmd_judge(args: argparse.Namespace, console: Console) -> int:
    from ..foreign.offline import judge_folder  # noqa: PLC0415 - checking machinery

    report = args.report
    if report is not None and (report.is_dir() or report.suffix.lower() != ".json"):
        if report.exists() and not report.is_dir():
            raise InvalidArgument(f"--report {str(report)!r} is a file that is not .json; give "
                                  "a folder (judge.json is written there) or a FILE.json")
        report = report / "judge.json"
    result = judge_folder(args.path, store=args.store)
    rows = []
    for folder, v in result.verdicts:
        status = "pass" if v.passed else "FAIL"
        print_text(console, f"{folder}  {status}  {v.case.describe()}  "
                            f"worst ratio {v.worst_ratio:.3g}  {v.diagnosis}",
                   style=None if v.passed else "red")
        rows.append({"folder": folder, "passed": v.passed, "case": v.case.describe(),
                     "size": v.case.size(), "worst_ratio": repr(v.worst_ratio),
                     "diagnosis": v.diagnosis})
    summary = {"cases": len(result.verdicts), "failures": result.failures,
               "smallest_failing": result.smallest[0] if result.smallest else None,
               "layout": result.layout_note, "verdicts": rows}
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(summary, indent=2) + "\n")
        print_text(console, f"report: {report}")
    if result.smallest is None:
        print_text(console, f"all {len(result.verdicts)} cases pass", style="green")
        return 0
    folder, v = result.smallest
    print_text(console, f"\n{result.failures} of {len(result.verdicts)} cases fail; the "
                        f"smallest failing case is {folder}:")
    print_text(console, v.message())
    if result.layout_note:
        print_text(console, f"  {result.layout_note}")
    return 1
