"""A plugin's targets: one float32 matmul, found through its entry point."""

import numpy as np

from numoracle import Target


def blocked_matmul(a, b):
    return {"out": np.matmul(a.astype(np.float32), b.astype(np.float32))}


TARGETS = (Target(name="example-plugin-fp32", op="matmul", backend="numpy", fn=blocked_matmul,
                  precision="fp32"),)
