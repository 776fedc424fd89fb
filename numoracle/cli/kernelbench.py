"""``numoracle kernelbench PROBLEM.py CANDIDATE.py|DIR ...``: judge KernelBench-format
candidates against a problem with the traced oracle.

Each candidate gets a verdict (pass / pass (official inputs only) / FAIL /
abstain / not judged / refused) per claimed precision, the cases judged, the worst ratio, KernelBench's own rule
(``torch.allclose`` at 1e-2 and 1e-4) on the official case, and for a failure
the smallest failing case with the command that replays it.

Exit status: 0 when every candidate passes (either pass) under every claim,
1 when one fails, 2 for a bad file or argument, 3 when none failed but some
could not be judged (the oracle abstained: an ATen op without a rule; not
judged: no GPU, a missing package, no device memory; or refused). A progress
bar per candidate and claim runs while they are judged (``--jobs N`` at once).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ..errors import InvalidArgument
from ._common import positive_float, print_text

__all__ = ["add_parser", "judge_all"]

#: the claims a candidate may make (:data:`numoracle.kernelbench.judge.PRECISIONS`,
#: checked there: the judge imports torch, the parser does not)
_PRECISIONS = ("fp32", "tf32", "bf16", "triton", "cuda-fast")


def _precisions(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in _PRECISIONS]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"{text!r}: give claims among {', '.join(_PRECISIONS)}"
                                         ", separated by commas, e.g. fp32,bf16")
    return names


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count of cases; give e.g. 20")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``kernelbench`` to the subcommands."""
    p = sub.add_parser("kernelbench", help="judge KernelBench-format candidates (ModelNew) "
                                           "against a problem (Model, get_inputs)")
    p.add_argument("problem", type=Path, metavar="PROBLEM.py", help="the problem file")
    p.add_argument("candidates", type=Path, nargs="+", metavar="CANDIDATE",
                   help="candidate files, or folders of them")
    p.add_argument("--precision", type=_precisions, action="append", metavar="CLAIM,...",
                   help="what the candidates claim: fp32 (TF32 off), tf32, bf16, triton "
                        "or cuda-fast (fp32 under Triton's or --use_fast_math's elementwise "
                        "accuracy) (default fp32; repeat or separate by commas for several)")
    p.add_argument("--examples", type=_count, default=20, metavar="N",
                   help="drawn cases after the official one (default 20; 0: official only)")
    p.add_argument("--seed", type=int, default=0, help="seed of the drawn cases (default 0)")
    p.add_argument("--device", default="cpu", help="where candidates run: cpu or cuda "
                                                   "(default cpu)")
    p.add_argument("--timeout", type=positive_float, default=120.0, metavar="SECONDS",
                   help="seconds one case may take in the candidate's process (default 120)")
    p.add_argument("--case", default=None, metavar="JSON",
                   help="judge this case only (as a failure's replay command gives it)")
    p.add_argument("--no-isolate", action="store_true",
                   help="run candidates in this process (default: a process per candidate)")
    p.add_argument("--report", type=Path, default=None, metavar="FILE",
                   help="also write every judgement to FILE (JSON)")
    p.add_argument("--backward", action=argparse.BooleanOptionalAction, default=None,
                   help="judge gradients too, against the traced vjp of Model (default: "
                        "when the candidate defines a backward)")
    p.add_argument("--jobs", type=_count, default=1, metavar="N",
                   help="judgements run at once, each in processes of its own (default 1)")
    p.set_defaults(func=_cmd_kernelbench)


def _files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.py"))
            if not found:
                raise InvalidArgument(f"folder {str(path)!r} holds no .py candidate files")
            files.extend(found)
        else:
            files.append(path)
    return files


def _judge_one(job: tuple[Any, ...]) -> Any:
    """One candidate under one claim: ``(problem, candidate, precision, options)``."""
    from ..kernelbench.judge import judge  # noqa: PLC0415 - torch and the oracle on first use

    problem, candidate, precision, options = job
    return judge(problem, candidate, precision=precision, **options)


def judge_all(jobs: Sequence[tuple[Any, ...]], devices: Sequence[str] = ()) -> list[Any]:
    """The judgements of ``jobs`` (``(problem, candidate, precision, options)``),
    in order: one process per GPU of ``devices`` where there are two or more
    (:func:`~numoracle.running.devices.map_on_devices`), else here."""
    from ..running.devices import map_on_devices  # noqa: PLC0415 - loaded when judging

    return map_on_devices(_judge_one, jobs, devices)


def _cmd_kernelbench(args: argparse.Namespace, console: Console) -> int:
    from ..kernelbench.cases import KBCase  # noqa: PLC0415 - torch and the oracle on first use
    from ..kernelbench.batch import judge_many  # noqa: PLC0415 - torch and the oracle

    precisions = [p for group in (args.precision or [["fp32"]]) for p in group]
    case = KBCase.from_json(args.case) if args.case is not None else None
    if args.device not in ("cpu", "cuda") and not args.device.startswith("cuda:"):
        raise InvalidArgument(f"--device {args.device!r} is unknown; use cpu or cuda")
    files = _files(args.candidates)
    options = {"examples": args.examples, "seed": args.seed, "device": args.device,
               "timeout": args.timeout, "case": case, "isolated": not args.no_isolate,
               "backward": args.backward}
    # "cuda" (no index) on two GPUs or more: side by side, one process per GPU
    from ..running.devices import gpu_devices  # noqa: PLC0415 - loaded when judging

    gpus = gpu_devices() if args.device == "cuda" else ()
    if len(gpus) > 1:
        results = judge_all([(args.problem, path, precision, options) for path in files
                             for precision in precisions], gpus)
    else:
        jobs = [(path, precision) for path in files for precision in precisions]
        total = 1 if case is not None else args.examples + 1
        with Progress(*Progress.get_default_columns(), console=console, transient=True,
                      disable=not console.is_terminal) as bars:
            tasks = [bars.add_task(f"{path.name} ({claim})", total=total)
                     for path, claim in jobs]
            results = judge_many(args.problem, jobs, workers=max(args.jobs, 1),
                                 progress=lambda i, n: bars.advance(tasks[i], n), **options)
    bad_file = [j for j in results if j.status == "refused" and "file" in j.reason]
    if bad_file and len(bad_file) == len(results):
        raise InvalidArgument(bad_file[0].reason)
    table = Table(title=f"{args.problem.name}: {len(files)} candidate"
                        f"{'s' if len(files) != 1 else ''}")
    for col in ("candidate", "claim", "verdict", "cases", "worst ratio", "KB 1e-2", "KB 1e-4",
                "why"):
        table.add_column(col, overflow="fold")
    for j in results:
        kb = [("pass" if j.kernelbench.get(t) else "fail") if j.kernelbench else "-"
              for t in ("0.01", "0.0001")]
        verdict = {"pass": "pass", "fail": "FAIL"}.get(j.status, j.status)
        table.add_row(Path(j.candidate).name, j.precision, verdict, str(j.cases),
                      f"{j.worst_ratio:.3g}" if j.cases else "-", kb[0], kb[1], j.reason,
                      style="red" if j.status == "fail" else None)
    console.print(table)
    for j in results:
        for note in j.notes:
            print_text(console, f"{Path(j.candidate).name} ({j.precision}): {note}")
        if j.failing is not None:
            print_text(console, f"{Path(j.candidate).name} ({j.precision}): smallest failing "
                                f"case {j.failing.case.describe()}\n  replay: {j.replay()}")
    if args.report is not None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps([j.as_dict() for j in results], indent=1) + "\n")
    if any(j.status == "fail" for j in results):
        return 1
    if bad_file:
        return 2
    return 0 if all(j.passed for j in results) else 3
