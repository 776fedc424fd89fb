"""``numoracle shrink ARRAYS --op OP --target NAME``: shrink a failing case that
was not drawn here (arrays dumped from a training step) to the smallest case
that still fails for the same reason, and save it as a repro in the store."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ..errors import InvalidArgument
from ..store.repro import DEFAULT_STORE
from ._common import positive_float, positive_int, print_text

if TYPE_CHECKING:
    from ..targets.target import Target

__all__ = ["add_parser", "parse_param"]


def parse_param(text: str) -> tuple[str, Any]:
    """``NAME=VALUE``: an int, a pair ``3,3``, ``true``/``false``, a float or a word."""
    name, eq, raw = text.partition("=")
    if not eq or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE; give e.g. padding=1,1")
    def one(v: str) -> Any:
        low = v.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        for kind in (int, float):
            try:
                return kind(v)
            except ValueError:
                pass
        return v.strip()
    parts = [one(v) for v in raw.split(",")]
    return name.strip(), tuple(parts) if len(parts) > 1 else parts[0]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``shrink`` to the subcommands."""
    p = sub.add_parser("shrink", help="shrink a failing case supplied from outside "
                       "(arrays dumped from a run) and save it as a repro")
    p.add_argument("arrays", type=Path, metavar="ARRAYS",
                   help="the case's inputs: an .npz file or a folder of NAME.npy files, named "
                        "as the op names its inputs (x, weight, grad_output, bias, ...)")
    p.add_argument("--op", required=True, metavar="OP", help="the op the kernel computes")
    p.add_argument("--param", type=parse_param, action="append", default=[],
                   metavar="NAME=VALUE", help="a parameter the shapes cannot show (stride=2,2, "
                   "padding=1,1, groups=4); the others are read off the arrays")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--target", metavar="NAME",
                     help="a target by name (numoracle list), or in --source")
    who.add_argument("--fn", metavar="MODULE:FUNCTION",
                     help="a kernel function fn(**inputs) -> dict of outputs")
    who.add_argument("--spec", type=Path, metavar="FILE.json",
                     help="a foreign target's spec (numoracle.foreign.from_spec)")
    p.add_argument("--source", metavar="MODULE_OR_FILE",
                   help="with --target: a module or .py file whose TARGETS holds it (a zoo file)")
    p.add_argument("--precision", metavar="MODEL",
                   help="with --fn: the precision the kernel claims (default fp32)")
    p.add_argument("--backend", metavar="BACKEND",
                   help="with --fn: where its arrays live (default numpy)")
    p.add_argument("--store", type=Path, default=DEFAULT_STORE, metavar="DIR",
                   help=f"the store the shrunk repro goes to (default {DEFAULT_STORE})")
    p.add_argument("--max-runs", type=positive_int, default=2000, metavar="N",
                   help="most kernel runs (default 2000)")
    p.add_argument("--seconds", type=positive_float, default=600.0, metavar="S",
                   help="time budget (default 600)")
    p.add_argument("--no-values", action="store_true",
                   help="shrink shapes only, keep the values")
    p.add_argument("--json", type=Path, metavar="FILE",
                   help="write the sizes before and after, runs and time as JSON")
    p.set_defaults(func=_cmd_shrink)


def _check_options(args: argparse.Namespace) -> None:
    """Refuse an option that would be ignored beside the kernel's naming."""
    for option, needs, given in (("--source", "--target", args.target),
                                 ("--precision", "--fn", args.fn),
                                 ("--backend", "--fn", args.fn)):
        if getattr(args, option[2:]) is not None and not given:
            raise InvalidArgument(f"{option} acts only with {needs}, which is not given; "
                                  f"drop {option} (a target or spec names its own)")


def _target(args: argparse.Namespace) -> Target:
    if args.target:
        from ..kernels import resolve_target  # noqa: PLC0415

        return resolve_target(args.target, args.op, args.source)
    if args.spec:
        from ..foreign import from_spec  # noqa: PLC0415 - foreign targets only here

        try:
            spec = json.loads(args.spec.read_text())
        except (OSError, ValueError) as exc:
            raise InvalidArgument(f"--spec {str(args.spec)!r} is not a readable JSON spec: "
                                  f"{exc}") from None
        return from_spec(spec)
    from ..api import _make_target  # noqa: PLC0415 - the check's own target maker
    from ..callables import load_ref  # noqa: PLC0415

    fn = load_ref(str(args.fn))
    if not callable(fn):
        raise InvalidArgument(f"--fn {args.fn!r} names {type(fn).__name__}, not a function")
    return _make_target(fn, op=args.op, precision=args.precision or "fp32",
                        backend=args.backend or "numpy")


def _cmd_shrink(args: argparse.Namespace, console: Console) -> int:
    from ..checking.shrink import infer_params, load_arrays, shrink  # noqa: PLC0415

    _check_options(args)
    arrays = load_arrays(args.arrays)
    target = _target(args)
    if target.op != args.op:
        raise InvalidArgument(f"target {target.name!r} computes {target.op!r}, not "
                              f"--op {args.op!r}")
    reason = target.unavailable_reason()
    if reason:
        raise InvalidArgument(f"target {target.name!r} cannot run here ({reason}): the "
                              "kernel must be re-run to shrink; run where it can")
    params = infer_params(args.op, arrays, dict(args.param))
    print_text(console, f"shrinking {args.op}({', '.join(f'{k}={v}' for k, v in params.items())})"
               f" on {target.name} claiming {target.precision.name}")
    res = shrink(target, args.op, params, arrays, max_runs=args.max_runs,
                 seconds=args.seconds, values=not args.no_values, store=args.store,
                 on_step=lambda line: print_text(console, f"  {line}"))
    s = res.summary()
    print_text(console, res.verdict.message())
    print_text(console, f"shrunk {s['elements_before']} input elements to "
               f"{s['elements_after']} ({s['distinct_values_after']} distinct values) in "
               f"{s['kernel_runs']} kernel runs, {s['seconds']:.1f} s; fails for the same "
               f"reason: {s['reason'][0]} {s['reason'][1]}"
               + (f" (now {s['reason_after'][1]})" if s["reason_after"] != s["reason"] else ""))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(s, indent=2) + "\n")
    return 1
