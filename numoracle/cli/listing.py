"""``numoracle list``: what can run here first — the targets available here,
one line each with the ops they compute and the precision model they claim,
the models spelled out — then the ops, then the targets that cannot run here,
summarised by reason. At most 100 columns wide when not on a terminal."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..oracle.ops import all_ops

if TYPE_CHECKING:
    from ..targets.target import Target

__all__ = ["add_parser", "LIST_WIDTH", "first_sentence"]

#: columns of ``numoracle list`` when its output is not a terminal
LIST_WIDTH = 100


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``list`` to the subcommands."""
    lst = sub.add_parser("list", help="list the targets that can run here, the ops, and the "
                                      "targets that cannot run here (summarised)")
    lst.add_argument("--all", action="store_true",
                     help="list the targets that cannot run here one line each")
    lst.set_defaults(func=_cmd_list)


def _cmd_list(args: argparse.Namespace, console: Console) -> int:
    from ..kernels import all_targets  # noqa: PLC0415 - the CLI's list loads lazily

    if not console.is_terminal:
        console.width = min(console.width, LIST_WIDTH)
    targets = all_targets()
    reasons = {id(t): t.unavailable_reason() for t in targets}
    here = [t for t in targets if reasons[id(t)] is None]
    elsewhere = [t for t in targets if reasons[id(t)] is not None]
    names_here = list(dict.fromkeys(t.name for t in here))
    console.print(_targets_table(here, f"can run here: {len(names_here)} targets, "
                                       f"{len(here)} target-op pairs"))
    models = {t.precision.name: t.precision.describe() for t in here}
    if models:
        table = Table(title="their precision models", title_justify="left")
        table.add_column("model", no_wrap=True)
        table.add_column("what the target claims")
        for name, text in sorted(models.items()):
            table.add_row(escape(name), escape(text))
        console.print(table)
    console.print(_ops_table())
    if not elsewhere:
        return 0
    if getattr(args, "all", False):
        console.print(_targets_table(elsewhere, "cannot run here", reasons=reasons))
        return 0
    by_reason: dict[str, list[str]] = {}
    for t in elsewhere:
        names = by_reason.setdefault(str(reasons[id(t)]), [])
        if t.name not in names:
            names.append(t.name)
    count = len({t.name for t in elsewhere})
    console.print(f"cannot run here: {count} targets ({len(elsewhere)} target-op pairs); "
                  "`numoracle list --all` lists them", markup=False, highlight=False)
    for reason, names in by_reason.items():
        console.print(f"- {_short(reason)}: {', '.join(names)}", markup=False, highlight=False)
    return 0


def _short(reason: str) -> str:
    """The first clause of ``reason``, whole (a table wraps it)."""
    return reason.split("; ")[0]


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring's first paragraph, whole, without
    reST markup.

    Examples
    --------
    >>> first_sentence("Linear: ``y = x W^T + b``, and its\\n    gradients. More here.")
    'y = x W^T + b, and its gradients.'
    """
    para = " ".join(doc.strip().split("\n\n")[0].split())
    para = para.replace("``", "").split(": ", 1)[-1]
    end = re.search(r"(?<!\bal)(?<!e\.g)(?<!i\.e)\.(?=\s+[A-Z(]|$)", para)
    return para[:end.start() + 1] if end else para


def _targets_table(targets: Sequence[Target], title: str,
                   reasons: dict[int, str | None] | None = None) -> Table:
    """One row per target name: its ops, backend and precision model (and,
    with ``reasons``, why it cannot run here)."""
    rows: dict[tuple[str, str, str], list[str]] = {}
    why: dict[tuple[str, str, str], str] = {}
    for t in targets:
        key = (t.name, t.backend, t.precision.name)
        rows.setdefault(key, []).append(t.op)
        if reasons is not None:
            why[key] = _short(str(reasons[id(t)]))
    table = Table(title=title, title_justify="left")
    table.add_column("target", no_wrap=True)
    table.add_column("backend", no_wrap=True)
    table.add_column("model", no_wrap=True)
    table.add_column("ops")
    if reasons is not None:
        table.add_column("why not")
    for key, ops in rows.items():
        cells = [escape(key[0]), key[1], escape(key[2]), ", ".join(ops)]
        if reasons is not None:
            cells.append(escape(why[key]))
        table.add_row(*cells)
    return table


def _ops_table() -> Table:
    """The ops: inputs (the names a kernel takes), outputs, parameters and the
    first sentence of their description."""
    from ..api import op_inputs, op_outputs  # noqa: PLC0415 - strategies load only here

    table = Table(title="ops (a kernel takes the inputs by name and returns the outputs)",
                  title_justify="left")
    rows = []
    for name, op in sorted(all_ops().items()):
        doc = first_sentence(sys.modules[type(op).__module__].__doc__ or "")
        rows.append((name, ", ".join(op_inputs(name)), ", ".join(op_outputs(name)),
                     ", ".join(op.param_names), doc))
    longest_op = max((len(row[0]) for row in rows), default=2)
    table.add_column("op", overflow="fold", min_width=min(longest_op, 24), max_width=24)
    for k, column in enumerate(("inputs", "outputs", "parameters"), 1):
        # as wide as the longest name, so that a name is cut only past 24 characters
        longest = max((len(word) for row in rows for word in row[k].split()), default=1)
        table.add_column(column, overflow="fold", min_width=min(longest, 24))
    table.add_column("what it computes")
    for row in rows:
        table.add_row(*map(escape, row))
    return table
