"""Training trajectories judged step by step with teacher forcing.

:func:`check_trajectory` checks an SGD loop of a tiny CNN (conv2d → ReLU →
MSE); :func:`check_optimizer_trajectory` and :func:`check_mlp_trajectory` check
optimizer steps and MLP training steps. Every check names the first step and
tensor that break their bound and reports the free-running drift beside it.
"""

from __future__ import annotations

from .cnn import TENSORS, StepFn, TinyCNN, check_trajectory
from .core import Drift, StepFailure, StepVerdict, TrajectoryVerdict, first_failure
from .steps import (
    BoundedDrift,
    check_mlp_trajectory,
    check_optimizer_trajectory,
    check_steps,
    mlp_problem,
)

__all__ = [
    "check_trajectory",
    "check_optimizer_trajectory",
    "check_mlp_trajectory",
    "check_steps",
    "mlp_problem",
    "TinyCNN",
    "StepFn",
    "TENSORS",
    "StepFailure",
    "StepVerdict",
    "Drift",
    "BoundedDrift",
    "TrajectoryVerdict",
    "first_failure",
]
