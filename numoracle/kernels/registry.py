"""The registry of targets: every kernel under test numoracle ships, by name and op.

A target is identified by ``(name, op)``: ``("torch-cpu-fp32", "linear")`` and
``("torch-cpu-fp32", "matmul")`` are two targets with one name. Every target is
listed whether or not it can run here; :func:`available_targets` filters by
:meth:`numoracle.target.Target.unavailable_reason`.

Examples
--------
>>> get_target("numpy-fp32", "matmul").precision.name
'fp32'
"""

from __future__ import annotations

from ..errors import InvalidArgument
from ..target import Target
from . import (
    cupy_conv2d,
    cupy_kan,
    cupy_linear,
    numpy_conv2d,
    numpy_targets,
    optim_targets,
    torch_conv2d,
    torch_conv2d_cuda,
    torch_kan,
    torch_targets,
)

__all__ = ["all_targets", "available_targets", "get_target", "target_names"]


def _check_unique(targets: tuple[Target, ...]) -> tuple[Target, ...]:
    seen: set[tuple[str, str]] = set()
    for t in targets:
        key = (t.name, t.op)
        if key in seen:
            raise InvalidArgument(f"target {key} is defined twice; give each (name, op) once")
        seen.add(key)
    return targets


_TARGETS: tuple[Target, ...] = _check_unique(
    numpy_targets.TARGETS + torch_targets.TARGETS + cupy_linear.TARGETS
    + numpy_conv2d.TARGETS + torch_conv2d.TARGETS + cupy_conv2d.TARGETS
    + torch_conv2d_cuda.TARGETS + optim_targets.TARGETS + torch_kan.TARGETS + cupy_kan.TARGETS
)


def _check_op(op: str | None, *, optional: bool = True) -> None:
    ops = sorted({t.op for t in _TARGETS})
    if (op is not None or not optional) and op not in ops:
        raise InvalidArgument(f"{op=} has no targets; use one of {ops}")


def all_targets(op: str | None = None) -> list[Target]:
    """Every target defined (for ``op`` only, when given), available here or not."""
    _check_op(op)
    return [t for t in _TARGETS if op is None or t.op == op]


def available_targets(op: str | None = None) -> list[Target]:
    """The targets of :func:`all_targets` that can run on this machine."""
    return [t for t in all_targets(op) if t.unavailable_reason() is None]


def target_names(op: str | None = None) -> list[str]:
    """Names of the targets (for ``op`` only, when given), sorted, without repeats."""
    return sorted({t.name for t in all_targets(op)})


def get_target(name: str, op: str) -> Target:
    """The target called ``name`` that computes ``op``.

    Raises
    ------
    InvalidArgument
        If there is none; the message lists the names defined for ``op``.
    """
    _check_op(op, optional=False)
    for t in _TARGETS:
        if t.name == name and t.op == op:
            return t
    raise InvalidArgument(
        f"target {name!r} is unknown for op {op!r}; use one of {target_names(op)}"
    )
