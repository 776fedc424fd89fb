"""How does cuBLAS round fp32 inputs to TF32: to nearest, or by truncation?

    python benchmarks/tf32_rounding.py [--out FILE.json]

Multiplies values with 13 significant bits (tf32 keeps 11) by an identity
matrix through the ``torch-cuda-tf32`` target: every output is one input as
the tensor cores saw it, exactly (one nonzero product per sum). Counting the
outputs that equal round-to-nearest-even and truncation of the inputs tells
the rounding mode; the oracle can then apply it exactly (``input_rounding``)
instead of charging ``2u + u^2`` per product.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from numoracle.kernels import get_target
from numoracle.kernels.backends import get_backend
from numoracle.oracle.formats import quantize


def probe(n: int, seed: int, side: str) -> dict:
    rng = np.random.default_rng(seed)
    vals = (2.0**12 + rng.integers(0, 2**12, (n, n))) * 2.0**-12  # 13 significant bits
    vals *= rng.choice([-1.0, 1.0], (n, n))
    eye = np.eye(n)
    target = get_target("torch-cuda-tf32", "matmul")
    be = get_backend("torch-cuda")
    a, b = (vals, eye) if side == "a" else (eye, vals)
    out = be.to_host(target.fn(a=be.to_device(a, "fp32"), b=be.to_device(b, "fp32"))["out"])
    rne, rz = quantize(vals, "tf32", "rne"), quantize(vals, "tf32", "rz")
    differ = rne != rz
    return {"side": side, "n": n, "elements": int(vals.size), "rne_differs_from_rz": int(differ.sum()),
            "match_rne": int((out == rne)[differ].sum()), "match_rz": int((out == rz)[differ].sum()),
            "match_input_unrounded": int((out == vals)[differ].sum())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows = [probe(n, seed, side) for n in (64, 256, 1024) for seed in (0, 1) for side in "ab"]
    for r in rows:
        print(r)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
