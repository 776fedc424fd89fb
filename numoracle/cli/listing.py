"""``numoracle list``: the ops (parameters, outputs) and the targets (backend,
precision model, available here or why not)."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..oracle.ops import all_ops

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``list`` to the subcommands."""
    lst = sub.add_parser("list", help="list the ops and the targets")
    lst.set_defaults(func=_cmd_list)


def _cmd_list(args: argparse.Namespace, console: Console) -> int:
    from ..api import op_outputs  # noqa: PLC0415 - strategies load only here
    from ..kernels import all_targets  # noqa: PLC0415 - the CLI's list loads lazily

    ops = Table(title="ops")
    for col in ("op", "parameters", "outputs", "description"):
        ops.add_column(col)
    for name, op in sorted(all_ops().items()):
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


