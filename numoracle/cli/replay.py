"""``numoracle replay PATH``: re-run a saved repro's kernel; exit 0 when it
passes now (fixed), 1 when it still fails, 2 when it could not be re-run
(the reason is printed; ``--recorded`` judges the recorded outputs instead)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from ..errors import InvalidArgument
from ..store.repro import DEFAULT_STORE
from ._common import print_text

__all__ = ["add_parser", "SANITIZERS", "find_sanitizer"]

#: compute-sanitizer tools ``replay --sanitize`` runs
SANITIZERS = ("memcheck", "racecheck")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``replay`` to the subcommands."""
    rep = sub.add_parser("replay", help="re-run a saved repro")
    rep.add_argument("path", type=Path, nargs="?", metavar="PATH",
                     help="a repro folder (or its repro.json)")
    rep.add_argument("--all", action="store_true",
                     help="replay every repro of the store (--store) and record which are fixed")
    rep.add_argument("--store", type=Path, default=DEFAULT_STORE, metavar="DIR",
                     help=f"the store --all replays (default {DEFAULT_STORE})")
    rep.add_argument("--recorded", action="store_true",
                     help="judge the outputs the repro recorded again instead of re-running "
                          "the kernel (which is found again by the module or file and name "
                          "the repro recorded)")
    rep.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=None,
                     help="re-run the kernel in a worker process, so that a crash is reported "
                          "instead of ending the command (default: for repros of kernels from "
                          "outside numoracle, those with a source)")
    rep.add_argument("--sanitize", choices=SANITIZERS, metavar="TOOL",
                     help="re-run the repro under NVIDIA compute-sanitizer (memcheck: "
                          "out-of-bounds and misaligned accesses; racecheck: shared-memory "
                          "races) and save its report in the repro folder")
    rep.set_defaults(func=_cmd_replay)


def _cmd_replay(args: argparse.Namespace, console: Console) -> int:
    if args.all or args.path is None:
        if args.path is not None or not args.all:
            raise InvalidArgument("replay takes a repro PATH or --all (every repro of the "
                                  "store), not both and not neither")
        if args.sanitize is not None:
            raise InvalidArgument("--sanitize replays one repro: give its PATH instead of --all")
        return _replay_all(args, console)
    if args.sanitize is not None:
        if args.recorded:
            raise InvalidArgument("--sanitize re-runs the kernel under compute-sanitizer; "
                                  "--recorded runs nothing: give one of them")
        return _replay_sanitized(args, console)
    from ..checking.check import isolation  # noqa: PLC0415 - replay needs the checking machinery
    from ..checking.replay import ReplayOutcome, replay_repro  # noqa: PLC0415 - checking machinery
    from ..kernels import resolve_target  # noqa: PLC0415 - the registry loads on first use
    from ..store.repro import load_repro  # noqa: PLC0415 - replay needs the checking machinery

    repro = load_repro(args.path)  # a damaged repro: a usage error, exit 2
    isolate = bool(repro.source) if args.isolate is None else args.isolate
    with isolation(isolate):
        done = replay_repro(repro, rerun=not args.recorded, resolve=resolve_target)
    if done.verdict is not None:
        print_text(console, done.verdict.message())
    if done.note and done.outcome is not ReplayOutcome.UNRUN:
        print_text(console, done.note, style="yellow")
    line = done.line() + (f" ({done.runs} runs)" if done.passed and done.runs > 1 else "")
    style = {ReplayOutcome.FIXED: "green", ReplayOutcome.FAILS: "red"}.get(done.outcome, "yellow")
    print_text(console, line, style=style)
    if done.outcome is ReplayOutcome.UNRUN:
        print_text(console, f"(numoracle replay --recorded {args.path} judges the outputs it "
                            "recorded)")
    return {ReplayOutcome.FIXED: 0, ReplayOutcome.FAILS: 1}.get(done.outcome, 2)


def _replay_all(args: argparse.Namespace, console: Console) -> int:
    from ..checking.replay import ReplayOutcome, replay_all  # noqa: PLC0415 - checking machinery
    from ..kernels import resolve_target  # noqa: PLC0415 - the registry loads on first use
    from ..store.store import check_store  # noqa: PLC0415 - replay needs the checking machinery

    if args.recorded:
        raise InvalidArgument("--recorded judges one repro's recorded outputs: give its PATH "
                              "instead of --all")
    check_store(args.store, must_exist=args.store != DEFAULT_STORE)
    counts = dict.fromkeys(ReplayOutcome, 0)
    for entry, done in replay_all(args.store, resolve_target):
        counts[done.outcome] += 1
        if done.outcome is ReplayOutcome.FIXED:
            print_text(console, f"fixed             {entry.path}", style="green")
        elif done.outcome is ReplayOutcome.FAILS:
            diagnosis = done.verdict.diagnosis if done.verdict is not None else ""
            print_text(console, f"still fails       {entry.path}: {diagnosis}", style="red")
        else:
            print_text(console, f"could not re-run  {entry.path}: {done.note}", style="yellow")
    fails, fixed, unrun = (counts[o] for o in (ReplayOutcome.FAILS, ReplayOutcome.FIXED,
                                               ReplayOutcome.UNRUN))
    print_text(console, f"{fails + fixed + unrun} repro(s) in {args.store}: {fails} still "
               f"fail, {fixed} fixed (numoracle store prune --fixed removes those)"
               + (f", {unrun} could not be re-run" if unrun else ""))
    return 1 if fails or unrun else 0


def find_sanitizer() -> str:
    """The path of NVIDIA's ``compute-sanitizer``: on PATH, under ``$CUDA_HOME/bin``
    or ``/usr/local/cuda/bin``; InvalidArgument when there is none."""
    import os  # noqa: PLC0415 - only for --sanitize
    import shutil  # noqa: PLC0415 - only for --sanitize

    found = shutil.which("compute-sanitizer")
    homes = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    for home in [h for h in homes if h and not found]:
        exe = Path(home) / "bin" / "compute-sanitizer"
        found = str(exe) if exe.is_file() else None
    if found is None:
        raise InvalidArgument("--sanitize needs NVIDIA's compute-sanitizer (CUDA toolkit), and "
                              "none is on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin; "
                              "install the CUDA toolkit or put compute-sanitizer on PATH")
    return found


def _replay_sanitized(args: argparse.Namespace, console: Console) -> int:
    """Replay the repro in a child process under compute-sanitizer; save the
    sanitizer's report as ``sanitizer-TOOL.txt`` in the repro folder, print it."""
    import subprocess  # noqa: PLC0415 - only for --sanitize
    import sys  # noqa: PLC0415 - only for --sanitize

    from ..store.repro import load_repro  # noqa: PLC0415 - replay needs the checking machinery

    repro = load_repro(args.path)
    exe = find_sanitizer()
    log = repro.path / f"sanitizer-{args.sanitize}.txt"
    tmp = log.with_name(log.name + ".tmp")
    cmd = [exe, "--tool", args.sanitize, "--log-file", str(tmp), "--error-exitcode", "86",
           sys.executable, "-m", "numoracle", "replay", "--no-isolate", str(repro.path)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    text = tmp.read_text() if tmp.is_file() else ""
    if tmp.is_file():
        tmp.replace(log)  # the report appears whole or not at all
    else:
        log.write_text(text)
    print_text(console, done.stdout.rstrip())
    print_text(console, f"compute-sanitizer --tool {args.sanitize}: report in {log}")
    print_text(console, text.rstrip() or "(the sanitizer wrote no report)")
    if done.returncode == 86:
        print_text(console, f"{args.sanitize} found errors", style="red")
        return 1
    return 0 if done.returncode == 0 else 1
