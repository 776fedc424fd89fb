"""The kernels under test numoracle ships, and their registry.

Each module of this package is a set of kernels under test (CuPy kernels,
torch adapters, NumPy/CPU kernels); every one that defines a module-level
``TARGETS`` contributes its targets (adding a targets module is enough), and
installed packages add theirs through the entry point group
``numoracle.targets`` (:mod:`numoracle.plugins`). What they run in (the
:class:`~numoracle.targets.target.Target`, the array backends) is
:mod:`numoracle.targets`, below.

A target is identified by ``(name, op)``: ``("torch-cpu-fp32", "linear")`` and
``("torch-cpu-fp32", "matmul")`` are two targets with one name. Every target is
listed whether or not it can run here; :func:`available_targets` filters by
:meth:`numoracle.targets.target.Target.unavailable_reason`.
:func:`resolve_target` finds a target again by its source or its name: the
resolver the shell and the API hand to the checks that replay a repro.

Importing this package imports neither torch nor cupy; each target says
through ``available()`` whether it can run here.

Examples
--------
>>> get_target("numpy-fp32", "matmul").precision.name
'fp32'
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from ..errors import InvalidArgument
from ..plugins import plugin_targets
from ..targets.backends import Backend, CupyBackend, NumpyBackend, TorchBackend, get_backend
from ..targets.sources import find_in_source
from ..targets.target import Target

__all__ = [
    "all_targets",
    "available_targets",
    "get_target",
    "target_names",
    "resolve_target",
    # re-exported from numoracle.targets.backends
    "Backend",
    "NumpyBackend",
    "TorchBackend",
    "CupyBackend",
    "get_backend",
]


def _check_unique(targets: list[Target]) -> tuple[Target, ...]:
    seen: set[tuple[str, str]] = set()
    for t in targets:
        key = (t.name, t.op)
        if key in seen:
            raise InvalidArgument(f"target {key} is defined twice; give each (name, op) once")
        seen.add(key)
    return tuple(targets)


@cache
def _builtin() -> tuple[Target, ...]:
    """The ``TARGETS`` of every module of this package, in module order."""
    found: list[Target] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        found.extend(getattr(importlib.import_module(f"{__name__}.{info.name}"), "TARGETS", ()))
    return tuple(found)


def _targets() -> tuple[Target, ...]:
    """The package's targets, then those of installed plugins (:mod:`numoracle.plugins`)."""
    return _check_unique([*_builtin(), *plugin_targets()])


def _check_op(op: str | None, *, optional: bool = True) -> None:
    ops = sorted({t.op for t in _targets()})
    if (op is not None or not optional) and op not in ops:
        raise InvalidArgument(f"{op=} has no targets; use one of {ops}")


def all_targets(op: str | None = None) -> list[Target]:
    """Every target defined (for ``op`` only, when given), available here or not."""
    _check_op(op)
    return [t for t in _targets() if op is None or t.op == op]


def available_targets(op: str | None = None) -> list[Target]:
    """The targets of :func:`all_targets` that can run on this machine."""
    return [t for t in all_targets(op) if t.unavailable_reason() is None]


def target_names(op: str | None = None) -> list[str]:
    """Names of the targets (for ``op`` only, when given), sorted, without repeats."""
    return sorted({t.name for t in all_targets(op)})


def _reference_targets(op: str) -> list[Target]:
    """torch's targets of an op made from a PyTorch reference (none for other ops)."""
    from ..oracle.ops import OPS

    if not callable(getattr(OPS.get(op), "spec", None)):
        return []
    from .torch_traced import reference_targets

    return reference_targets(op)


def get_target(name: str, op: str) -> Target:
    """The target called ``name`` that computes ``op``.

    Raises
    ------
    InvalidArgument
        If there is none; the message lists the names defined for ``op``.
    """
    made = _reference_targets(op)
    if not made:
        _check_op(op, optional=False)
    for t in (*_targets(), *made):
        if t.name == name and t.op == op:
            return t
    raise InvalidArgument(
        f"target {name!r} is unknown for op {op!r}; use one of "
        f"{[t.name for t in made] if made else target_names(op)}"
    )


def resolve_target(name: str, op: str, source: str | None = None) -> Target:
    """Find a target again: in ``source`` (a module or ``.py`` file with a
    ``TARGETS`` list) when given, else among the registry's targets; the
    :data:`~numoracle.targets.sources.Resolve` the shell and the API hand
    to replays."""
    if source:
        return find_in_source(name, op, source)
    return get_target(name, op)
