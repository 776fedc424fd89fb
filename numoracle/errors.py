"""The exception hierarchy: one root, bad arguments, failing kernels."""

from __future__ import annotations

__all__ = ["NumoracleError", "InvalidArgument", "KernelMismatch", "UnsupportedCase"]


class NumoracleError(Exception):
    """Root of every exception numoracle raises on purpose."""


class InvalidArgument(NumoracleError, ValueError):
    """A parameter, shape, dtype or option is invalid.

    The message echoes the argument, states the rule and suggests the fix.
    """


class UnsupportedCase(NumoracleError):
    """The oracle cannot give a sound bound for this case (for example too large
    for the exact reference). The case is skipped, never judged."""


class KernelMismatch(NumoracleError, AssertionError):
    """A kernel under test produced a result outside the oracle's bound, raised,
    or returned something malformed. Carries the verdict that explains why."""

    def __init__(self, message: str, verdict: object | None = None) -> None:
        super().__init__(message)
        self.verdict = verdict
