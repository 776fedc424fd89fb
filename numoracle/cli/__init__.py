"""The ``numoracle`` command line.

Every module of this package that defines ``add_parser(subparsers)`` is a
subcommand (``run``, ``list``, ``replay``, ``zoo``, ...): adding a command is
adding its module. ``numoracle --help`` lists them; ``numoracle COMMAND --help``
describes each.

Exit status: 0 when everything checked passed (for ``zoo``: every mutant was
caught), 1 when something failed, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Sequence

from rich.console import Console

from .. import __version__
from ..errors import InvalidArgument
from ._common import console_for, print_text

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="numoracle",
        description="A property-based numerical test oracle for GPU kernels.",
    )
    parser.add_argument("--version", action="version", version=f"numoracle {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            add = getattr(module, "add_parser", None)
            if add is not None:
                add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 2 for a usage error, 0 for --help
        return exc.code if isinstance(exc.code, int) else 2
    console = console_for()
    try:
        status: int = args.func(args, console)
    except InvalidArgument as exc:
        print_text(Console(stderr=True), f"numoracle {args.command}: {exc}", style="red")
        return 2
    return status
