"""Seconds per case of the traced oracle over many distinct shapes of one reference.

For each reference (softmax, layer norm, an MLP block, attention; forward, and
with gradients) ``cases`` parameter sets with distinct sizes are drawn (each
dimension uniform in its range, fixed seed); each case's oracle call (capture where the graph
is not kept, then the interpreter) is timed, as a run that draws those shapes
pays it. The number of captures is read from the reference where the code
counts them.

Run from the repository root::

    PYTHONPATH=$PWD python -m benchmarks.traced.capture_reuse --cases 100 \\
        --out benchmarks/results/cpu/capture/after.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from benchmarks.record import machine

__all__ = ["REFERENCES", "measure"]


def softmax(x):
    return torch.softmax(x, -1)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def mlp(x, w1, b1, w2, b2):
    return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


#: name -> (reference, inputs, the range of each dimension, inputs whose gradients are asked)
REFERENCES: dict[str, tuple[Any, dict[str, tuple[str, ...]], dict[str, tuple[int, int]],
                            tuple[str, ...]]] = {
    "softmax": (softmax, {"x": ("batch", "n")}, {"batch": (1, 16), "n": (1, 256)}, ("x",)),
    "layer_norm": (layer_norm, {"x": ("batch", "n"), "w": ("n",), "b": ("n",)},
                   {"batch": (1, 16), "n": (1, 256)}, ("x", "w")),
    "mlp": (mlp, {"x": ("batch", "i"), "w1": ("h", "i"), "b1": ("h",), "w2": ("o", "h"),
                  "b2": ("o",)}, {"batch": (1, 16), "i": (1, 64), "h": (1, 64), "o": (1, 64)},
            ("x", "w1")),
    "sdpa": (sdpa, {"q": ("batch", "heads", "s", "d"), "k": ("batch", "heads", "t", "d"),
                    "v": ("batch", "heads", "t", "d")},
             {"batch": (1, 4), "heads": (1, 4), "s": (1, 32), "t": (1, 32), "d": (1, 32)},
             ("q", "k", "v")),
}


def measure(name: str, grads: bool, cases: int, seed: int = 0) -> dict[str, Any]:
    """Time ``cases`` distinct shapes of reference ``name``."""
    from numoracle.cases.case import Case  # noqa: PLC0415
    from numoracle.oracle.precision import get_model  # noqa: PLC0415
    from numoracle.oracle.traced.op import TracedOp, traced_op  # noqa: PLC0415

    ref, inputs, dims, wrt = REFERENCES[name]
    op = traced_op(TracedOp(ref, inputs=inputs, grads=wrt if grads else (), dims=dims,
                            name=f"bench_capture_{name}{'_grads' if grads else ''}"))
    rng = np.random.default_rng(seed)
    seen: set[tuple[int, ...]] = set()
    times = []
    model = get_model("fp32")
    while len(seen) < cases:
        sizes = tuple(int(rng.integers(dims[d][0], dims[d][1] + 1)) for d in op.param_names)
        if sizes in seen:
            continue
        seen.add(sizes)
        params = dict(zip(op.param_names, sizes, strict=True))
        arrays = Case(op.name, params, seed=len(seen)).inputs()
        t = time.perf_counter()
        op.reference(arrays, params, model)
        times.append(time.perf_counter() - t)
    return {"reference": name, "grads": grads, "cases": cases, "dims": dims,
            "seconds_per_case": sum(times) / len(times),
            "median_case_s": statistics.median(times), "first_case_s": times[0],
            "captures": getattr(op.ref, "captures", None)}


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--only", nargs="*", default=list(REFERENCES), help="references")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = [measure(name, grads, args.cases) for name in args.only for grads in (False, True)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": "python -m benchmarks.traced.capture_reuse "
                                    + " ".join(argv), **machine(), "rows": rows}, indent=2)
                        + "\n")
    for r in rows:
        print(f"{r['reference']:>10} grads={r['grads']!s:5} {r['seconds_per_case'] * 1e3:8.1f} "
              f"ms/case (median {r['median_case_s'] * 1e3:.1f}, first {r['first_case_s']:.2f} s)"
              f" captures={r['captures']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
