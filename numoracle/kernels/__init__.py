"""Targets: the kernels under test and the array backends they run on.

Importing this package imports neither torch nor cupy; each target says
through ``available()`` whether it can run here.
"""

from __future__ import annotations

from .backends import Backend, CupyBackend, NumpyBackend, TorchBackend, get_backend
from .registry import all_targets, available_targets, get_target, target_names

__all__ = [
    "Backend",
    "NumpyBackend",
    "TorchBackend",
    "CupyBackend",
    "get_backend",
    "all_targets",
    "available_targets",
    "get_target",
    "target_names",
]
