"""Running many cases: Hypothesis draws cases for a target, each is checked,
failures shrink and are saved as repros (:mod:`.runner`)."""

from __future__ import annotations

from .runner import TargetResult, default_strategy, run_target

__all__ = ["TargetResult", "run_target", "default_strategy"]
