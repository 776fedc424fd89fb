"""``zoo``: the bug zoo (:mod:`numoracle.zoo`) over some ops, recorded: per mutant,
caught or missed, the cases until caught and the shrunk repro's shape.

    python -m benchmarks zoo --ops linear,conv2d [--examples 200] [--sharp] --out DIR

Runs ``numoracle zoo`` with a store of its own under ``DIR`` and writes
``DIR/zoo.json`` (its rows), ``DIR/report.html`` and ``DIR/meta.json`` (the
command, machine and commit). Exit status: ``numoracle zoo``'s (0 when every
mutant that can run here was caught).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.record import meta, write_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``zoo`` to the harness's subcommands."""
    ap = sub.add_parser("zoo", help="the bug zoo over some ops: caught, cases to catch, "
                                    "repro shapes")
    ap.add_argument("--ops", "--op", default="", help="comma-separated ops or groups "
                                                       "(default: every op)")
    ap.add_argument("--examples", type=int, default=200, help="cases per mutant")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sharp", action="store_true",
                    help="judge by the probabilistic bound where a model allows it")
    ap.add_argument("--out", type=Path, required=True, help="folder for the results")
    ap.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the zoo ``a`` describes and record it under ``a.out``."""
    from numoracle.cli import main as numoracle  # noqa: PLC0415 - the CLI loads on use

    argv = ["zoo", "--examples", str(a.examples), "--seed", str(a.seed),
            "--report", str(a.out), "--store", str(a.out / "repros")]
    if a.ops:
        argv += ["--ops", a.ops]
    if a.sharp:
        argv.append("--sharp")
    status = numoracle(argv)
    write_json(a.out / "meta.json", meta(a.argv, numoracle_command=["numoracle", *argv]))
    return status
