"""NumPy float32 targets: ``linear`` and ``matmul`` on the host.

NumPy hands float32 products to the BLAS it was built with (``sgemm``) when the
operands' strides allow, and otherwise to its own float32 loop; either way the
multiplies and partial sums are float32 in an order NumPy does not promise.
The targets therefore claim the ``fp32`` preset: fp32 storage, compute and
accumulation, order ``any`` (height n - 1), which bounds ``y``, each gradient
and the bias gradient's ``np.add.reduce`` alike.

Examples
--------
>>> import numpy as np
>>> a = np.ones((2, 3), np.float32)
>>> matmul(a=a, b=a.T)["out"].tolist()
[[3.0, 3.0], [3.0, 3.0]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..oracle.precision import get_model
from ..targets.backends import get_backend
from ..targets.target import Target

__all__ = ["linear", "matmul", "TARGETS"]


def linear(
    x: np.ndarray,
    weight: np.ndarray,
    grad_output: np.ndarray,
    bias: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """``y = x W^T + b`` and its gradients for the upstream ``grad_output``.

    Returns ``y``, ``grad_input = g W``, ``grad_weight = g^T x`` and, with a
    bias, ``grad_bias`` = the column sums of ``g``, all in the inputs' dtype.
    """
    y = np.matmul(x, weight.T)
    out: dict[str, np.ndarray] = {
        "grad_input": np.matmul(grad_output, weight),
        "grad_weight": np.matmul(grad_output.T, x),
    }
    if bias is not None:
        y += bias  # rounded once more: the bias is one more term of y's reduction
        out["grad_bias"] = np.add.reduce(grad_output, axis=0)
    out["y"] = y
    return out


def matmul(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """``out = a @ b`` over matching batch dimensions."""
    return {"out": np.matmul(a, b)}


def _targets() -> tuple[Target, ...]:
    be = get_backend("numpy")
    common: dict[str, Any] = {
        "backend": "numpy",
        "precision": get_model("fp32"),
        "available": be.available,
    }
    return (
        Target(
            name="numpy-fp32",
            op="linear",
            fn=linear,
            description="NumPy float32 matmul (sgemm) and np.add.reduce; all outputs",
            **common,
        ),
        Target(
            name="numpy-fp32",
            op="matmul",
            fn=matmul,
            description="NumPy float32 np.matmul with batch dimensions",
            **common,
        ),
    )


#: every NumPy target, one per op
TARGETS: tuple[Target, ...] = _targets()
