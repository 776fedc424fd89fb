"""Shared by the target tests: host inputs and a plain float64 reference with S."""

from __future__ import annotations

import numpy as np

from numoracle.oracle.formats import quantize


def make_host(shp: dict, storage: str, seed: int, integers: bool = False) -> dict[str, np.ndarray]:
    """Inputs by name: small integers (exact everywhere) or normal values in ``storage``."""
    rng = np.random.default_rng(seed)
    if integers:
        return {k: rng.integers(-2, 3, s).astype(np.float64) for k, s in shp.items()}
    return {k: quantize(rng.standard_normal(s), storage) for k, s in shp.items()}


def reference(op: str, h: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each output's float64 value and S, the sum of the absolute values of its terms."""
    A = np.abs
    if op == "matmul":
        return {"out": (h["a"] @ h["b"], A(h["a"]) @ A(h["b"]))}
    x, w, g = h["x"], h["weight"], h["grad_output"]
    res = {
        "y": (x @ w.T, A(x) @ A(w).T),
        "grad_input": (g @ w, A(g) @ A(w)),
        "grad_weight": (g.T @ x, A(g).T @ A(x)),
    }
    if "bias" in h:
        y, s = res["y"]
        res["y"] = (y + h["bias"], s + A(h["bias"]))
        res["grad_bias"] = (g.sum(axis=0), A(g).sum(axis=0))
    return res
