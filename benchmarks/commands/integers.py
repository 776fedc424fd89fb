"""``integers``: references with integer inputs (class labels, token ids, indices,
masks) judged by the traced oracle.

    python -m benchmarks integers [--examples 200] [--targets torch-cpu-fp32,torch-cpu-bf16]
        [--mutant-examples 100] [--seed 0] [--out DIR]

Checks torch running each reference of :mod:`benchmarks.traced.integers`
(cross-entropy and NLL over class labels, an embedding lookup, gather, ``x[idx]``,
a masked sum; forward and backward) on drawn cases per target, and kernels with
one index bug each; writes ``integers.json`` and ``integers.md``. CUDA targets
(``torch-cuda-fp32,torch-cuda-bf16``) are rows marked skipped without a GPU.
"""

from __future__ import annotations

import argparse
from pathlib import Path

_OUT = "benchmarks/results/cpu/traced/integers"


def _run(args: argparse.Namespace) -> int:
    from benchmarks.traced.integers import integers  # noqa: PLC0415 - torch-heavy

    targets = [t for t in args.targets.split(",") if t]
    return integers(args.examples, targets, args.mutant_examples, args.seed, Path(args.out),
                    args.argv)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``integers`` to the harness's subcommands."""
    ap = sub.add_parser("integers", help="references with integer inputs (labels, indices, "
                                         "masks): torch running them, and index mutants",
                        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=200, help="cases per reference and target")
    ap.add_argument("--targets", default="torch-cpu-fp32,torch-cpu-bf16",
                    help="comma-separated targets (torch-{cpu,cuda}-{fp32,tf32,bf16})")
    ap.add_argument("--mutant-examples", type=int, default=100, help="cases per mutant")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=_OUT, help=f"folder of integers.json/md ({_OUT})")
    ap.set_defaults(func=_run)
