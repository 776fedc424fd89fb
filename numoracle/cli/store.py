"""``numoracle store list`` and ``numoracle store prune``: the regression store
(``.numoracle/repros``), one repro per failure signature."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..store.repro import DEFAULT_STORE
from ._common import names, print_text

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``store`` (``list``, ``prune``) to the subcommands."""
    store = sub.add_parser("store", help="list or prune the regression store")
    actions = store.add_subparsers(dest="action", required=True, metavar="ACTION")
    lst = actions.add_parser("list", help="the stored repros: target, op, failing outputs, "
                             "diagnosis class, shapes, last replay")
    prune = actions.add_parser("prune", help="remove repros that pass now (--fixed) or of "
                               "some targets (--targets)")
    for p in (lst, prune):
        p.add_argument("--store", type=Path, default=DEFAULT_STORE, metavar="DIR",
                       help=f"the store folder (default {DEFAULT_STORE})")
    lst.add_argument("--target", metavar="NAME", help="only the repros of this target")
    lst.set_defaults(func=_cmd_list)
    prune.add_argument("--fixed", action="store_true",
                       help="remove the repros that pass now (each kernel is re-run first; "
                            "one that cannot be re-run here goes by its last recorded replay)")
    prune.add_argument("--recorded", action="store_true",
                       help="with --fixed: trust the last recorded replay instead of "
                            "replaying now")
    prune.add_argument("--targets", type=names, default=(), metavar="NAME,...",
                       help="remove every repro of these targets")
    prune.set_defaults(func=_cmd_prune)


def _cmd_list(args: argparse.Namespace, console: Console) -> int:
    from ..store.store import FORMAT_VERSION, check_store, entries  # noqa: PLC0415 - loads ops

    check_store(args.store, must_exist=args.store != DEFAULT_STORE)
    found = entries(args.store, target=args.target)
    if not found:
        print_text(console, f"no repros in {args.store}")
        return 0
    table = Table(title=f"{args.store} (store format {FORMAT_VERSION})")
    cols = ("target", "op", "outputs", "class", "shapes", "status")
    for c in cols:
        table.add_column(c, overflow="fold")
    for e in found:
        row = e.row()
        table.add_row(*(escape(str(row[c])) for c in cols))
    console.print(table)
    for e in found:  # paths below the table: long, and what a user copies
        old = "" if e.format else " (written before the store had a format)"
        print_text(console, f"{e.target} {e.op}: {e.path}{old}")
    return 0


def _cmd_prune(args: argparse.Namespace, console: Console) -> int:
    from ..checking.replay import (  # noqa: PLC0415 - checking machinery
        ReplayOutcome,
        Replayed,
        prune,
    )
    from ..errors import InvalidArgument  # noqa: PLC0415
    from ..kernels import resolve_target  # noqa: PLC0415 - the registry loads on first use
    from ..store.store import Entry, check_store  # noqa: PLC0415 - loads ops

    if not args.fixed and not args.targets:
        raise InvalidArgument("store prune needs --fixed (remove repros that pass now) or "
                              "--targets NAME,... (remove those of some targets)")
    if args.recorded and not args.fixed:
        raise InvalidArgument("--recorded says how --fixed decides (by the last recorded "
                              "replay); give --fixed with it")
    check_store(args.store, must_exist=args.store != DEFAULT_STORE)

    def heard(e: Entry, done: Replayed) -> None:
        if done.outcome is ReplayOutcome.UNRUN:
            last = {"fixed": f"; its last replay ({e.checked}) passed: removed",
                    "fails": "; its last replay failed: kept"}.get(e.status, ": kept")
            print_text(console, f"could not re-run  {e.path}: {done.note}{last}",
                       style="yellow")
        else:
            print_text(console, f"{done.line():<17} {e.path}",
                       style="green" if done.passed else "red")

    removed = prune(args.store, fixed=args.fixed, targets=args.targets,
                    replay_now=not args.recorded, on_replay=heard, resolve=resolve_target)
    for e in removed:
        print_text(console, f"removed {e.path} ({e.target} {e.op}, {e.signature['diagnosis']})")
    print_text(console, f"removed {len(removed)} repro(s) from {args.store}")
    return 0
