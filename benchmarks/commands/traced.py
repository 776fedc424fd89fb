"""``traced``: the traced oracle's benchmarks.

    python -m benchmarks traced sweep [--families a,b] [--cases 1000] [--jobs N]
        [--targets torch-cpu-fp32,torch-cpu-bf16] [--forward-only] [--seed 0] [--out DIR]
    python -m benchmarks traced cost [--repeats 5] [--device cpu|cuda] [--out DIR]
    python -m benchmarks traced census KERNELBENCH_DIR [--levels level1,level2] [--grads]
        [--out DIR]
    python -m benchmarks traced stress [--seeds 0,1,2,3] [--out DIR]
    python -m benchmarks traced references
    python -m benchmarks traced zoo [--examples 100] [--correct-examples 200] [--out DIR]
    python -m benchmarks traced specials [--examples 1000] [--only NAME,...] [--out DIR]

``sweep`` (:mod:`benchmarks.traced.sweep`) checks torch running the reference of
each op family (:mod:`benchmarks.traced.references`) on ``--cases`` drawn cases
per family and target: every alarm is a false alarm of the oracle or a kernel of
torch's outside its claim (``soundness.json/md``). The CUDA targets
(``torch-cuda-fp32,torch-cuda-tf32,torch-cuda-bf16``) are rows marked skipped
without a GPU. ``cost`` (:mod:`benchmarks.traced.cost`) times a traced reference
against torch float64 eager and the hand-written ops (``cost.json/md``).
``census`` (:mod:`benchmarks.traced.census`) lists the ATen ops of every
KernelBench problem and of composite references and which have a rule
(``coverage.json/md``). ``stress`` (:mod:`benchmarks.traced.stress`) judges the
rule tests' cases again on fresh inputs in four value regimes
(``rules_stress.json``). ``zoo`` (:mod:`benchmarks.traced.zoo`) runs the traced
zoo: each mutant caught, each correct kernel passing (``zoo.json/md``).
``specials`` (:mod:`benchmarks.traced.specials`) checks causal-mask bugs (cases
to catch), correct masked softmax and attention kernels, torch's max pooling with
special values, and two formulations of each composite rule
(``specials.json/md``). ``references`` prints the op families' references: function, inputs with their
dims, the size ranges drawn, and the inputs differentiated.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable
from pathlib import Path

_OUT = "benchmarks/results/cpu/traced"

#: the op families of :mod:`benchmarks.traced.references`, in table order (kept here so
#: the harness's --help does not import torch; a test holds them equal)
FAMILIES = ("contraction", "convolution", "softmax_loss", "normalisation", "activation",
            "reduction", "pooling", "attention", "optimizer")


def _sweep(args: argparse.Namespace) -> int:
    from benchmarks.traced.sweep import sweep  # noqa: PLC0415 - torch-heavy

    families = [f for f in args.families.split(",") if f] or list(FAMILIES)
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        print(f"traced sweep: --families {args.families!r} names {unknown}, not op families; "
              f"choose from {','.join(FAMILIES)}")
        return 2
    targets = [t for t in args.targets.split(",") if t]
    sweep(families, targets, args.cases, args.seed, not args.forward_only, args.jobs,
          Path(args.out), args.argv)
    return 0


def _cost(args: argparse.Namespace) -> int:
    from benchmarks.traced.cost import cost  # noqa: PLC0415 - torch-heavy

    return cost(args.repeats, args.device, Path(args.out), args.argv)


def _census(args: argparse.Namespace) -> int:
    from benchmarks.traced.census import census  # noqa: PLC0415 - torch-heavy

    return census(args.kernelbench, Path(args.out), args.levels, args.grads, args.argv)


def _stress(args: argparse.Namespace) -> int:
    from benchmarks.traced.stress import stress  # noqa: PLC0415 - torch-heavy

    return stress([int(s) for s in args.seeds.split(",") if s], Path(args.out), args.argv)


def _zoo(args: argparse.Namespace) -> int:
    from benchmarks.traced.zoo import zoo  # noqa: PLC0415 - torch-heavy

    return zoo(args.examples, args.correct_examples, args.seed, Path(args.out), args.argv)


def _specials(args: argparse.Namespace) -> int:
    from benchmarks.traced.specials import specials  # noqa: PLC0415 - torch-heavy

    only = [w for w in args.only.split(",") if w]
    return specials(args.examples, args.seed, Path(args.out), args.argv, only)


def _references(args: argparse.Namespace) -> int:
    from benchmarks.traced.references import FAMILIES as REFERENCES  # noqa: PLC0415

    print("| family | reference | inputs | sizes drawn | gradients of |")
    print("|---|---|---|---|---|")
    for family, (ref, inputs, dims, grads) in REFERENCES.items():
        shapes = ", ".join(f"{k}{tuple(v)}" for k, v in inputs.items())
        sizes = ", ".join(f"{k} in {lo}..{hi}" for k, (lo, hi) in dims.items())
        print(f"| {family} | `{ref.__module__}:{ref.__name__}` | {shapes} | {sizes} | "
              f"{', '.join(grads) or '-'} |")
    return 0


def _quiet(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``run`` with warnings silenced: torch's notes on degenerate draws (a variance of
    one element) and on the problems' own modules are not results."""
    def wrapped(args: argparse.Namespace) -> int:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return run(args)
    return wrapped


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``traced`` (sweep, cost, census, stress, zoo) to the harness's subcommands."""
    ap = sub.add_parser("traced", help="traced oracle: soundness sweep of torch running each "
                                       "reference, cost, rule coverage census, rule stress, "
                                       "traced zoo",
                        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = ap.add_subparsers(dest="what", required=True, metavar="BENCHMARK")
    sw = what.add_parser("sweep", help="soundness: torch running each family's reference on "
                                       "drawn cases, every alarm a false alarm")
    sw.add_argument("--families", default="",
                    help=f"comma-separated (default: all of {','.join(FAMILIES)})")
    sw.add_argument("--targets", default="torch-cpu-fp32,torch-cpu-bf16",
                    help="comma-separated targets (torch-{cpu,cuda}-{fp32,tf32,bf16}); default "
                         "torch-cpu-fp32,torch-cpu-bf16")
    sw.add_argument("--cases", "--examples", dest="cases", type=int, default=1000,
                    help="drawn cases per family and target (1000)")
    sw.add_argument("--jobs", type=int, default=1,
                    help="(family, target) pairs checked side by side, in spawned processes "
                         "(default 1: in this process)")
    sw.add_argument("--seed", type=int, default=0)
    sw.add_argument("--forward-only", action="store_true",
                    help="the references without their gradients (cheaper cases)")
    sw.add_argument("--out", default=_OUT, help=f"folder of soundness.json/md ({_OUT})")
    sw.set_defaults(func=_quiet(_sweep))
    co = what.add_parser("cost", help="per family: capture, interpreter, torch float64 eager, "
                                      "hand-written op (cost.json/md)")
    co.add_argument("--repeats", type=int, default=5, help="timed runs per median (5)")
    co.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="where torch's float64 eager run of the reference runs (the oracle "
                         "runs on the host)")
    co.add_argument("--out", default=_OUT, help=f"folder of cost.json/md ({_OUT})")
    co.set_defaults(func=_quiet(_cost))
    ce = what.add_parser("census", help="ATen ops of every KernelBench problem and composite "
                                        "reference, and which have a rule (coverage.json/md)")
    ce.add_argument("kernelbench", type=Path, help="folder holding level1/ and level2/")
    ce.add_argument("--levels", default="level1,level2")
    ce.add_argument("--grads", action="store_true",
                    help="also trace each problem's backward graph (slow: minutes)")
    ce.add_argument("--out", "--out-dir", dest="out", default=_OUT,
                    help=f"folder of coverage.json/md ({_OUT})")
    ce.set_defaults(func=_quiet(_census))
    st = what.add_parser("stress", help="the rule tests' cases judged on fresh inputs in four "
                                        "value regimes (rules_stress.json)")
    st.add_argument("--seeds", default="0,1,2,3", help="comma-separated (0,1,2,3)")
    st.add_argument("--out", default=_OUT, help=f"folder of rules_stress.json ({_OUT})")
    st.set_defaults(func=_quiet(_stress))
    re_ = what.add_parser("references", help="the op families' references: function, inputs, "
                                             "sizes drawn, gradients (printed)")
    re_.set_defaults(func=_quiet(_references))
    zo = what.add_parser("zoo", help="the traced zoo: every mutant caught, every correct "
                                     "kernel passing (zoo.json/md)")
    zo.add_argument("--examples", type=int, default=100, help="cases per mutant (100)")
    zo.add_argument("--correct-examples", type=int, default=200,
                    help="cases for each correct kernel (200)")
    zo.add_argument("--seed", type=int, default=0)
    zo.add_argument("--out", default=_OUT, help=f"folder of zoo.json/md ({_OUT})")
    zo.set_defaults(func=_quiet(_zoo))
    sp = what.add_parser("specials", help="special values and formulations: causal-mask bugs "
                                          "caught, masked kernels, max pooling and two "
                                          "formulations per composite rule passing "
                                          "(specials.json/md)")
    sp.add_argument("--examples", type=int, default=1000, help="cases per kernel (1000)")
    sp.add_argument("--only", default="", help="comma-separated words: only the kernels whose "
                                               "name holds one")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--out", default="benchmarks/results/cpu/special",
                    help="folder of specials.json/md (benchmarks/results/cpu/special)")
    sp.set_defaults(func=_quiet(_specials))
