"""``host_calls``: what the hand-written linear backward's reference asks of the host
per call, without a GPU: its Python calls under cProfile on NumPy and in torch's
namespace (CPU tensors: the code path of torch's CUDA tensors), and on CuPy's path
through a counting stand-in (:mod:`benchmarks.cupy_standin`: the oracle's CuPy code
runs, its kernels launch nothing) its device calls, arrays made and host waits.

    python -m benchmarks host_calls [--shape 128,1024,1024] [--small 2,4,4]
        [--standin-shape 8,16,16] [--model fp32] [--calls 20] [--no-torch] [--out FILE.json]

Per namespace: the seconds per reference (on NumPy and torch's the real work at
``--shape``, and the fixed cost at ``--small``; on the stand-in only the host's
bookkeeping, at ``--standin-shape``, whose arrays are small so that NumPy's work behind
the stand-in is negligible), Python calls per reference (all; the package's functions;
the calls into compiled code; torch's Python functions), and on the stand-in the
device calls by kind, arrays made and host waits per reference. The stand-in's own
Python functions are left out of its counts. Run where CuPy does not import.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import time
from typing import Any

import numpy as np

from benchmarks.record import meta


def _calls(stats: pstats.Stats, calls: int, skip: str) -> dict[str, float]:
    import numoracle  # noqa: PLC0415

    package = os.path.dirname(numoracle.__file__) + os.sep
    out = {"all": 0, "numoracle": 0, "compiled": 0, "torch_python": 0}
    found = stats.stats.items()  # type: ignore[attr-defined]
    for (path, _line, _name), (_cc, n, *_rest) in found:
        if skip and path == skip:
            continue
        out["all"] += n
        out["numoracle"] += n if path.startswith(package) else 0
        out["compiled"] += n if path == "~" else 0
        out["torch_python"] += n if f"{os.sep}torch{os.sep}" in path else 0
    return {k: v / calls for k, v in out.items()}


def measure(xp: Any, shape: tuple[int, int, int], model_name: str, calls: int) -> dict[str, Any]:
    """Seconds and Python calls per linear backward reference in namespace ``xp``."""
    from benchmarks.commands.speed import LINEAR, linear_case  # noqa: PLC0415
    from numoracle.oracle.precision import get_model  # noqa: PLC0415

    params, inputs, _plain = linear_case(shape, xp)
    if getattr(xp, "__name__", "") == "torch":  # (tensors, as a user hands them over)
        inputs = {k: xp.tensor(v) for k, v in inputs.items()}
    model = get_model(model_name)
    for _ in range(3):
        LINEAR.reference(inputs, params, model)
    t0 = time.perf_counter()
    for _ in range(calls):
        LINEAR.reference(inputs, params, model)
    per_call = (time.perf_counter() - t0) / calls
    counts = getattr(xp, "COUNTS", None)
    if counts is not None:
        counts.clear()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        LINEAR.reference(inputs, params, model)
    prof.disable()
    stats = pstats.Stats(prof)
    standin = getattr(xp, "__file__", None) is None and xp is not np
    row: dict[str, Any] = {"namespace": xp.__name__ + (" (stand-in)" if standin else ""),
                           "shape": list(shape), "model": model_name, "per_call_s": per_call,
                           "python_calls": _calls(stats, calls, "")}
    if counts is not None:
        from benchmarks import cupy_standin  # noqa: PLC0415

        row["python_calls"] = _calls(stats, calls, cupy_standin.__file__)
        row["python_calls"]["standin_excluded"] = True
        row["device"] = {k: v / calls for k, v in sorted(counts.items())}
        row["device_calls"] = sum(v for k, v in counts.items() if k.startswith("launch:")) / calls
        row["host_waits"] = sum(v for k, v in counts.items() if k.startswith("sync:")) / calls
    print(json.dumps(row), flush=True)
    return row


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``host_calls`` to the harness's subcommands."""
    p = sub.add_parser("host_calls", help="the linear reference's Python calls, device calls "
                                          "and host waits per call (NumPy; CuPy's path "
                                          "through a counting stand-in)")
    p.add_argument("--shape", default="128,1024,1024", metavar="B,I,O")
    p.add_argument("--small", default="2,4,4", metavar="B,I,O")
    p.add_argument("--standin-shape", default="8,16,16", metavar="B,I,O")
    p.add_argument("--no-torch", action="store_true", help="leave torch's namespace out")
    p.add_argument("--model", default="fp32")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--out", default=None)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """NumPy and torch's namespace at ``--shape`` and ``--small``, then the stand-in at
    ``--standin-shape``."""
    from benchmarks import cupy_standin  # noqa: PLC0415

    res: dict[str, Any] = meta(args.argv)
    namespaces = [np]
    if not args.no_torch:
        from numoracle.oracle.xp import namespace_named  # noqa: PLC0415

        namespaces.append(namespace_named("torch"))
    res["rows"] = [measure(xp, tuple(int(v) for v in spec.split(",")), args.model,  # type: ignore[arg-type]
                           args.calls)
                   for spec in (args.shape, args.small) for xp in namespaces]
    if cupy_standin.install():
        import cupy  # noqa: PLC0415 - the stand-in

        from numoracle.oracle import fused, tensor_sums  # noqa: PLC0415

        # its cuBLAS calls compute nothing: their device probes are taken as passed
        tensor_sums._probe = lambda *a: True  # noqa: SLF001
        tensor_sums._probe_values = lambda *a: True  # noqa: SLF001
        fused._raw_probe = lambda *a: True  # noqa: SLF001
        small = tuple(int(v) for v in args.standin_shape.split(","))
        res["rows"].append(measure(cupy, small, args.model, args.calls))  # type: ignore[arg-type]
    else:
        res["standin"] = "CuPy imports here: no stand-in"
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=2)
    return 0
