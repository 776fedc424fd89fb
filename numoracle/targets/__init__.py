"""The harness a kernel under test runs in: the :class:`Target` (a kernel, the
backend it runs on, the precision it claims, the layouts it reads and writes),
the array backends that move exact host values onto a target's device and back
(:mod:`.backends`), and finding a target again by its source (:mod:`.sources`).

This layer sits below the checks and knows no kernel: the kernels under test
and their registry are :mod:`numoracle.kernels`, above it. Importing this
package imports neither torch nor cupy.
"""

from __future__ import annotations

from .backends import Backend, CupyBackend, NumpyBackend, TorchBackend, get_backend
from .sources import Resolve, find_in_source
from .target import BACKENDS, GPU_BACKENDS, LAYOUTS, Target

__all__ = [
    "Target",
    "BACKENDS",
    "GPU_BACKENDS",
    "LAYOUTS",
    "Backend",
    "NumpyBackend",
    "TorchBackend",
    "CupyBackend",
    "get_backend",
    "Resolve",
    "find_in_source",
]
