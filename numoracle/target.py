"""Targets: a kernel under test, the backend it runs on and the precision it claims."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidArgument
from .oracle.precision import PrecisionModel, get_model

__all__ = ["Target", "LAYOUTS", "BACKENDS"]

#: Memory layouts a case can hand an input in:
#: ``C`` row-major contiguous, ``F`` column-major (Fortran order),
#: ``T`` a transposed view of a contiguous array (last two axes),
#: ``S`` non-contiguous strides (every other element of a larger buffer).
LAYOUTS = ("C", "F", "T", "S")
BACKENDS = ("numpy", "torch-cpu", "torch-cuda", "cupy")


@dataclass(frozen=True)
class Target:
    """A kernel under test.

    Parameters
    ----------
    name : str
        Unique name, e.g. ``"torch-cuda-tf32"``.
    op : str
        The op it computes (``"linear"``, ``"matmul"``).
    backend : str
        One of :data:`BACKENDS`: where its inputs live.
    precision : PrecisionModel or str
        The precision model it claims; a preset name is accepted.
    fn : callable
        ``fn(**inputs) -> Mapping[str, array]``: takes the op's inputs as
        backend arrays (keyword arguments named as the op names them) and
        returns the outputs it computes, by name.
    outputs : tuple of str
        Which of the op's outputs ``fn`` returns; empty means all of them.
    layouts : tuple of str
        The input layouts it accepts (see :data:`LAYOUTS`); others are made
        contiguous before the call.
    max_reduction : int or None
        Longest reduction it should be tested on (None: no limit).
    source : str or None
        Where a repro finds this target again: a module or ``.py`` path whose
        ``TARGETS`` holds it; None for the built-in targets.
    available : callable
        ``available() -> str | None``: None when usable here, else the reason.
    """

    name: str
    op: str
    backend: str
    precision: PrecisionModel
    fn: Callable[..., Mapping[str, Any]]
    outputs: tuple[str, ...] = ()
    layouts: tuple[str, ...] = LAYOUTS
    max_reduction: int | None = None
    available: Callable[[], str | None] = field(default=lambda: None, compare=False)
    description: str = ""
    source: str | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise InvalidArgument(
                f"backend={self.backend!r} is unknown; use one of {BACKENDS}"
            )
        if not callable(self.fn):
            raise InvalidArgument(f"fn={self.fn!r} must be callable: fn(**inputs) -> dict")
        bad = [lay for lay in self.layouts if lay not in LAYOUTS]
        if bad or not self.layouts:
            raise InvalidArgument(
                f"layouts={self.layouts!r} must be a non-empty subset of {LAYOUTS}"
            )
        if not isinstance(self.precision, PrecisionModel):
            object.__setattr__(self, "precision", get_model(self.precision))

    def unavailable_reason(self) -> str | None:
        """Why this target cannot run here, or None."""
        try:
            return self.available()
        except Exception as exc:  # noqa: BLE001 - an availability probe must never crash a run
            return f"availability check raised {type(exc).__name__}: {exc}"
