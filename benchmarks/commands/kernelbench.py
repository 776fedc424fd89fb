"""``kernelbench``: the KernelBench judge surveyed over KernelBench's problems.

    python -m benchmarks kernelbench census PROBLEMS [--out DIR]
    python -m benchmarks kernelbench soundness PROBLEMS [--claims fp32,tf32,bf16]
        [--examples 3] [--device cuda] [--every 1] [--shards N --seconds S] [--timing]
        [--out DIR]
    python -m benchmarks kernelbench mutants PROBLEMS [--limit 40] [--every 1]
        [--examples 8] [--device cpu] [--precision fp32] [--mutants a,b] [--no-shrink]
        [--isolate] [--shards N --seconds S] [--out DIR]
    python -m benchmarks kernelbench soundness|mutants --merge FILE.json ... [--out DIR]

``PROBLEMS`` holds KernelBench's ``level1/`` and ``level2/`` (or problem files
directly). ``census`` (:mod:`benchmarks.kernelbench.census`) says which problems
the traced oracle judges. ``soundness``
(:mod:`benchmarks.kernelbench.soundness`) judges each problem's own ``Model``
under each claim: any failure is a false alarm. ``mutants``
(:mod:`benchmarks.kernelbench.mutants`) judges broken candidates
beside KernelBench's own tolerance rule. With ``--shards N`` the survey runs as N
processes side by side (:mod:`benchmarks.shards`; several share one GPU), each
stopped after ``--seconds`` with the rows it finished, then merged; their shard
files stay under ``DIR/shards/``. A survey on ``--device cuda`` without a CUDA
device says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from benchmarks.shards import run_shards

_DEFAULT_OUT = "benchmarks/results/cpu/kernelbench"


def _cuda_missing(device: str) -> bool:
    if not device.startswith("cuda"):
        return False
    import torch  # noqa: PLC0415 - only a survey needs it

    if torch.cuda.is_available():
        return False
    print(f"--device {device}: no CUDA device here (torch {torch.__version__}); the survey "
          "is skipped. Run it on a machine with a GPU, or give --device cpu.", file=sys.stderr)
    return True


def _survey(args: argparse.Namespace) -> int:
    from benchmarks.kernelbench import mutants, soundness  # noqa: PLC0415 - torch-heavy

    module = soundness if args.what == "soundness" else mutants
    out = Path(args.out)
    if args.merge:
        print(module.merge(args.merge, out))
        return 0
    if args.problems is None:
        print(f"kernelbench {args.what}: give PROBLEMS (the folder of KernelBench's "
              "level1/ and level2/), or --merge FILES", file=sys.stderr)
        return 2
    if not args.problems.is_dir():
        print(f"kernelbench {args.what}: PROBLEMS={args.problems} is not a folder; give the "
              "folder holding KernelBench's level1/ and level2/", file=sys.stderr)
        return 2
    if _cuda_missing(args.device):
        return 2
    shards = out / "shards"
    if args.shard is not None:  # one shard of a run the driver below started
        module.run_shard(args, shards / f"{args.what}_shard{args.shard}.json")
        return 0
    if args.shards == 1:
        args.shard = 0
        module.run_shard(args, shards / f"{args.what}_shard0.json")
        files = [shards / f"{args.what}_shard0.json"]
    else:
        files = run_shards(args.argv, args.shards, args.seconds, shards, args.what)
    if not files:
        print(f"kernelbench {args.what}: no shard wrote a row (see {shards}/{args.what}.log)",
              file=sys.stderr)
        return 1
    print(module.merge(files, out))
    return 0


def _run(args: argparse.Namespace) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's notes on the problems' own modules
        if args.what == "census":
            from benchmarks.kernelbench.census import census  # noqa: PLC0415

            return census(args.problems, Path(args.out), args.argv)
        return _survey(args)


def _common(ap: argparse.ArgumentParser, examples: int, device: str) -> None:
    ap.add_argument("problems", type=Path, nargs="?",
                    help="folder holding KernelBench's level1/ and level2/")
    ap.add_argument("--examples", type=int, default=examples,
                    help=f"drawn cases per candidate after the official one ({examples})")
    ap.add_argument("--device", default=device, help=f"where candidates run ({device})")
    ap.add_argument("--every", type=int, default=1,
                    help="take every N-th problem file (a spread over both levels)")
    ap.add_argument("--shards", type=int, default=1,
                    help="processes side by side, each with its share of the problems")
    ap.add_argument("--shard", type=int, default=None,
                    help="run only this shard (what --shards starts by itself)")
    ap.add_argument("--seconds", type=float, default=400.0,
                    help="with --shards: stop every shard after this many seconds, keeping "
                         "its finished rows (400)")
    ap.add_argument("--merge", type=Path, nargs="+", default=None,
                    help="only pool these shard files into the tables under --out")
    ap.add_argument("--out", default=_DEFAULT_OUT,
                    help=f"folder of the tables and shard files ({_DEFAULT_OUT})")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``kernelbench`` (census, soundness, mutants) to the harness's subcommands."""
    ap = sub.add_parser("kernelbench", help="KernelBench judge: census of the judged problems, "
                                            "soundness on each problem's own Model, mutants",
                        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = ap.add_subparsers(dest="what", required=True, metavar="SURVEY")
    census = what.add_parser("census", help="which problems the traced oracle judges, abstains "
                                            "on or refuses, and the missing rules "
                                            "(census.md/json)")
    census.add_argument("problems", type=Path,
                        help="folder holding KernelBench's level1/ and level2/")
    census.add_argument("--out", default=_DEFAULT_OUT, help=f"folder ({_DEFAULT_OUT})")
    sound = what.add_parser("soundness", help="each problem's own Model as the candidate under "
                                              "each claim: false alarms (soundness.md/json)")
    _common(sound, examples=3, device="cuda")
    sound.add_argument("--claims", default="fp32,tf32,bf16",
                       help="fp32 (TF32 off), tf32, bf16 (default: all three)")
    sound.add_argument("--limit-seconds", type=int, default=90,
                       help="a judgement taking longer is recorded as a timeout (90)")
    sound.add_argument("--timing", action="store_true",
                       help="also time one forward pass at the official shape, fp32 and fp64")
    mut = what.add_parser("mutants", help="broken candidates judged by numoracle beside "
                                          "KernelBench's 1e-2 and 1e-4 rule (mutants.md/json)")
    _common(mut, examples=8, device="cpu")
    from benchmarks.kernelbench.candidates import BODIES  # noqa: PLC0415

    mut.add_argument("--limit", type=int, default=40, help="judged problems at most (40)")
    mut.add_argument("--precision", default="fp32", help="the claim (fp32)")
    mut.add_argument("--mutants", default=",".join(BODIES),
                     help=f"candidates, comma-separated ({','.join(BODIES)})")
    mut.add_argument("--isolate", action="store_true",
                     help="a process per candidate (default: in-process, faster)")
    mut.add_argument("--no-shrink", action="store_true",
                     help="report the first failing drawn case, unshrunk (faster)")
    mut.add_argument("--limit-seconds", type=int, default=120,
                     help="a judgement taking longer is recorded as a timeout (120)")
    mut.add_argument("--backward", action="store_true",
                     help="judge every candidate's gradients too (the backward mutants "
                          "always are)")
    for p in (census, sound, mut):
        p.set_defaults(func=_run)
