"""``cost``: what the oracle costs for one case of an op: the time of the reference
and its bounds (every output, or some), its peak host memory against the float64
size of the case's inputs and outputs, and beside it ``torch.autograd.gradcheck``
on growing layers where torch has the op.

    python -m benchmarks cost --op linear --params batch=128,in_features=1024,out_features=1024
    python -m benchmarks cost --op conv2d --params batch=2,in_channels=1,out_channels=16,\\
        height=128,width=128,kernel_size=3,padding=1 --outputs grad_weight --gradcheck-limit 60
    python -m benchmarks cost --op matmul --params m=128,k=1024,n=1024 --model fp64 --device gpu

The case's inputs are drawn as a check draws them (:class:`numoracle.cases.case.Case`,
value family ``normal``, seed 0); the reference runs on NumPy (``--device cpu``) or
CuPy (``--device gpu``, float64). ``--gradcheck-limit S`` runs gradcheck on the
op's torch function (``linear``: ``F.linear``; ``conv2d``: ``F.conv2d``) at square
sizes doubling from 4 until one takes more than ``S`` seconds, then times the
oracle on the largest size gradcheck finished. Writes ``--out FILE.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.record import meta, write_json
from numoracle.cases.case import Case
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model


def parse_params(text: str) -> dict[str, Any]:
    """``"batch=2,kernel_size=3,bias=true"`` -> ``{"batch": 2, "kernel_size": 3, "bias": True}``."""
    out: dict[str, Any] = {}
    for part in filter(None, text.split(",")):
        key, sep, value = part.partition("=")
        if not sep:
            raise SystemExit(f"--params: {part!r} is not NAME=VALUE; give e.g. batch=2,m=64")
        v = value.strip().lower()
        out[key.strip()] = True if v == "true" else False if v == "false" else int(v)
    return out


def _sync(xp: Any) -> None:
    if xp is not np:
        xp.cuda.Device().synchronize()


def time_reference(op_name: str, params: dict[str, Any], model: str = "fp32",
                   outputs: tuple[str, ...] = (), device: str = "cpu",
                   repeats: int = 5) -> dict[str, Any]:
    """Median and least seconds of the reference (after a warm-up), and on the
    CPU its peak traced memory against the float64 size of inputs and outputs."""
    op = get_op(op_name)
    params = op.validate(params)
    host = Case(op=op_name, params=params).inputs()
    xp: Any = np
    if device == "gpu":
        import cupy  # noqa: PLC0415 - only with a GPU

        xp = cupy
    inputs = {k: xp.asarray(v) for k, v in host.items()}
    precision = get_model(model)

    def once() -> None:
        op.reference(inputs, params, precision, outputs)
        _sync(xp)

    once()  # warm-up: BLAS threads, CuPy's compiled kernels
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        once()
        times.append(time.perf_counter() - t0)
    row: dict[str, Any] = {"op": op_name, "params": params, "model": model,
                           "outputs": list(outputs) or list(op.outputs(params)),
                           "device": device, "median_s": statistics.median(times),
                           "min_s": min(times), "repeats": repeats}
    if xp is np:
        tracemalloc.start()
        once()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        io = sum(a.size for a in host.values()) + sum(
            int(np.prod(s)) for s in op.output_shapes(params).values())
        row.update(peak_bytes=peak, io_float64_bytes=io * 8, peak_over_io=peak / (io * 8))
    return row


def _gradcheck_case(op_name: str, n: int) -> tuple[Callable[..., Any], tuple[Any, ...],
                                                    dict[str, Any]]:
    """torch's function, float64 inputs needing grad, and the op's parameters at size ``n``."""
    import torch  # noqa: PLC0415 - only for the comparison

    def leaf(*shape: int) -> Any:
        return torch.randn(*shape, dtype=torch.float64, requires_grad=True)

    if op_name == "linear":
        return (torch.nn.functional.linear, (leaf(8, n), leaf(n, n), leaf(n)),
                {"batch": 8, "in_features": n, "out_features": n, "bias": True})
    if op_name == "conv2d":
        return (lambda x, w, b: torch.nn.functional.conv2d(x, w, b, padding=1),
                (leaf(1, 8, n, n), leaf(8, 8, 3, 3), leaf(8)),
                {"batch": 1, "in_channels": 8, "out_channels": 8, "height": n, "width": n,
                 "kernel_size": 3, "padding": 1, "bias": True})
    raise SystemExit(f"--gradcheck-limit: op {op_name!r} has no torch function here; "
                     "use linear or conv2d, or leave the option out")


def gradcheck_ladder(op_name: str, limit: float) -> dict[str, Any]:
    """gradcheck at sizes 4, 8, 16, ... until one passes ``limit`` seconds."""
    import torch  # noqa: PLC0415 - only for the comparison

    rows, largest = [], None
    n = 4
    while True:
        fn, args, _ = _gradcheck_case(op_name, n)
        t0 = time.perf_counter()
        assert torch.autograd.gradcheck(fn, args)
        t = time.perf_counter() - t0
        rows.append({"n": n, "seconds": t})
        print(f"gradcheck {op_name} n={n}: {t:.2f} s", flush=True)
        if t > limit:
            break
        largest = n
        n *= 2
        if t * 4 > limit * 1.5:  # the next size costs 4-8x: stop before it runs far past
            break
    out: dict[str, Any] = {"ladder": rows, "largest_within_limit": largest}
    if largest:
        _, _, params = _gradcheck_case(op_name, largest)
        ours = time_reference(op_name, params)
        gc = next(r["seconds"] for r in rows if r["n"] == largest)
        out["on_largest"] = {"params": params, "gradcheck_s": gc,
                             "numoracle_s": ours["median_s"], "speedup": gc / ours["median_s"]}
    return out


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``cost`` to the harness's subcommands."""
    ap = sub.add_parser("cost", help="the oracle's time and memory for one case of an op, "
                                     "beside torch.autograd.gradcheck")
    ap.add_argument("--op", required=True, help="the op (numoracle list shows them)")
    ap.add_argument("--params", default="", metavar="NAME=VALUE,...",
                    help="the op's parameters; those left out take the op's defaults")
    ap.add_argument("--model", default="fp32", help="the claimed precision model")
    ap.add_argument("--outputs", default="", help="comma-separated outputs (default: all)")
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--gradcheck-limit", type=float, default=None, metavar="S",
                    help="also run torch.autograd.gradcheck on growing sizes up to S seconds")
    ap.add_argument("--out", type=Path, default=None, help="write the result here (JSON)")
    ap.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Measure what ``a`` names; prints the result and writes it to ``--out``."""
    outputs = tuple(filter(None, a.outputs.split(",")))
    res: dict[str, Any] = {**meta(a.argv),
                           "reference": time_reference(a.op, parse_params(a.params), a.model,
                                                       outputs, a.device, a.repeats)}
    print(json.dumps(res["reference"]), flush=True)
    if a.gradcheck_limit is not None:
        res["gradcheck"] = gradcheck_ladder(a.op, a.gradcheck_limit)
    if a.out is not None:
        write_json(a.out, res)
    return 0
