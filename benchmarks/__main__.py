"""``python -m benchmarks COMMAND ...``: the benchmark harness (see :mod:`benchmarks`)."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from benchmarks import commands


def parser() -> argparse.ArgumentParser:
    """The harness's parser, with every module of :mod:`benchmarks.commands` as a subcommand."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks",
                                 description="numoracle's benchmarks: sweeps, the zoo, costs, "
                                             "speed and calibration, recorded with their "
                                             "command and machine.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"{commands.__name__}.{info.name}")
            add = getattr(module, "add_parser", None)
            if add is not None:
                add(sub)
    _describe(ap)
    return ap


def _describe(ap: argparse.ArgumentParser) -> None:
    """Give every subcommand (and sub-subcommand) without a description its one-line
    help as the description, so its own ``--help`` says what it does."""
    for action in ap._actions:  # argparse keeps no public list of its subparsers
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, child in action.choices.items():
                if not child.description and helps.get(name):
                    child.description = helps[name]
                _describe(child)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one benchmark command; returns its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    args.argv = argv  # recorded with the results (benchmarks.record.meta)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
