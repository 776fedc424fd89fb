"""``numoracle replay PATH``: re-run a saved repro; exit 0 when it passes now,
1 when it still fails."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from ._common import print_text

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``replay`` to the subcommands."""
    rep = sub.add_parser("replay", help="re-run a saved repro")
    rep.add_argument("path", type=Path, metavar="PATH", help="a repro folder (or its repro.json)")
    rep.set_defaults(func=_cmd_replay)


def _cmd_replay(args: argparse.Namespace, console: Console) -> int:
    from ..store.repro import replay  # noqa: PLC0415 - replay needs the checking machinery

    verdict = replay(args.path)
    print_text(console, verdict.message())
    if verdict.passed:
        print_text(console, "passes now", style="green")
        return 0
    print_text(console, "still fails", style="red")
    return 1


