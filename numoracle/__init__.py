"""numoracle: a property-based numerical test oracle for GPU kernels.

Hypothesis draws cases (shapes, layouts, storage formats, value families); a
high-precision oracle computes each exact result with an error bound under the
precision model the kernel claims; the kernel is judged by ``error / bound < 1``
per element, and a failure shrinks to a minimal repro that
``numoracle replay PATH`` re-runs.

Examples
--------
>>> import numpy as np
>>> import numoracle
>>> def mm(a, b):
...     return {"out": np.matmul(a, b)}
>>> print(numoracle.check_kernel(mm, op="matmul", precision="fp32", examples=5, store=None).verdict)
pass
"""

from __future__ import annotations

from .api import check_kernel, validate
from .cases.case import Case
from .checking.verdict import Verdict
from .errors import InvalidArgument, KernelMismatch, NumoracleError
from .oracle.precision import PrecisionModel, get_model
from .settings import RunSettings
from .targets.target import Target

__version__ = "0.1.0"

__all__ = [
    "check_kernel",
    "validate",
    "Case",
    "Target",
    "RunSettings",
    "get_model",
    "PrecisionModel",
    "Verdict",
    "InvalidArgument",
    "KernelMismatch",
    "NumoracleError",
    "__version__",
]
