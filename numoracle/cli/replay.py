"""``numoracle replay PATH``: re-run a saved repro; exit 0 when it passes now,
1 when it still fails."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from ..errors import InvalidArgument
from ..store.repro import DEFAULT_STORE
from ._common import print_text

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``replay`` to the subcommands."""
    rep = sub.add_parser("replay", help="re-run a saved repro")
    rep.add_argument("path", type=Path, nargs="?", metavar="PATH",
                     help="a repro folder (or its repro.json)")
    rep.add_argument("--all", action="store_true",
                     help="replay every repro of the store (--store) and record which are fixed")
    rep.add_argument("--store", type=Path, default=DEFAULT_STORE, metavar="DIR",
                     help=f"the store --all replays (default {DEFAULT_STORE})")
    rep.set_defaults(func=_cmd_replay)


def _cmd_replay(args: argparse.Namespace, console: Console) -> int:
    from ..store.repro import replay  # noqa: PLC0415 - replay needs the checking machinery

    if args.all or args.path is None:
        if args.path is not None or not args.all:
            raise InvalidArgument("replay takes a repro PATH or --all (every repro of the "
                                  "store), not both and not neither")
        return _replay_all(args, console)
    verdict = replay(args.path)
    print_text(console, verdict.message())
    if verdict.passed:
        print_text(console, "passes now", style="green")
        return 0
    print_text(console, "still fails", style="red")
    return 1




def _replay_all(args: argparse.Namespace, console: Console) -> int:
    from ..store.store import replay_all  # noqa: PLC0415 - replay needs the checking machinery

    fails = fixed = 0
    for entry, verdict in replay_all(args.store):
        if verdict.passed:
            fixed += 1
            print_text(console, f"fixed        {entry.path}", style="green")
        else:
            fails += 1
            print_text(console, f"still fails  {entry.path}: {verdict.diagnosis}", style="red")
    print_text(console, f"{fails + fixed} repro(s) in {args.store}: {fails} still fail, "
               f"{fixed} fixed (numoracle store prune --fixed removes those)")
    return 1 if fails else 0
