"""``numoracle cases --op OP --out DIR``: write a reproducible case set for a
program that cannot be driven (inputs as ``.npy``, ``manifest.json`` with the
expected outputs' names, shapes and layouts); ``numoracle judge DIR`` judges
the outputs it writes beside them."""

from __future__ import annotations

import argparse

from rich.console import Console

from ..errors import InvalidArgument
from ._common import folder_arg, int_arg, positive_int, print_text

__all__ = ["add_parser", "layouts_arg"]


def layouts_arg(text: str) -> dict[str, str] | str:
    """``C``, ``F``, or ``name=LAYOUT,name=LAYOUT`` (``weight=OIHW:F,x=NCHW:F``)."""
    if text in ("C", "F"):
        return text
    out = {}
    for item in text.split(","):
        name, eq, lay = item.partition("=")
        if not eq or not name.strip() or not lay.strip():
            raise argparse.ArgumentTypeError(
                f"{text!r} must be C, F, or name=LAYOUT pairs separated by commas, e.g. "
                "weight=OIHW:F,x=NCHW:F")
        out[name.strip()] = lay.strip()
    return out


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``cases`` to the subcommands."""
    p = sub.add_parser("cases", help="write a case set for a foreign program to compute "
                                     "(judged afterwards by `numoracle judge DIR`)")
    p.add_argument("--op", required=True, metavar="OP", help="the op the program computes")
    p.add_argument("--precision", default="fp32", metavar="P",
                   help="the precision model the program claims (default fp32)")
    p.add_argument("--examples", type=positive_int, default=20, metavar="N",
                   help="cases to write (default 20)")
    p.add_argument("--seed", type=int_arg, default=0, metavar="S",
                   help="seed: the same seed writes the same cases (default 0)")
    p.add_argument("--layouts", type=layouts_arg, default=None, metavar="SPEC",
                   help="layout of the arrays: C, F, or name=LAYOUT,... (default row-major)")
    p.add_argument("--outputs", default=None, metavar="NAME,...",
                   help="the outputs the program writes (default: all of the op's)")
    p.add_argument("--max-elements", type=positive_int, default=None, metavar="N",
                   help="most input elements per case")
    p.add_argument("--out", type=folder_arg, required=True, metavar="DIR",
                   help="folder to write (made if absent)")
    p.set_defaults(func=_cmd_cases)


def _cmd_cases(args: argparse.Namespace, console: Console) -> int:
    from ..foreign.offline import write_cases  # noqa: PLC0415 - hypothesis only when used

    overrides = {} if args.max_elements is None else {"max_elements": args.max_elements}
    outputs = None if args.outputs is None else [n.strip() for n in args.outputs.split(",")]
    if outputs is not None and not all(outputs):
        raise InvalidArgument(f"--outputs {args.outputs!r} names an empty output")
    manifest = write_cases(args.out, op=args.op, precision=args.precision,
                           examples=args.examples, seed=args.seed, layouts=args.layouts,
                           outputs=outputs, **overrides)
    import json  # noqa: PLC0415

    n = len(json.loads(manifest.read_text())["cases"])
    print_text(console, f"wrote {n} cases of {args.op} to {args.out} (manifest: {manifest}); "
                        "write each output as NAME.npy into its case folder, then run "
                        f"`numoracle judge {args.out}`")
    return 0
