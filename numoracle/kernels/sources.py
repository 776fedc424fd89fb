"""Finding a target again by where it came from.

A :class:`~numoracle.cases.target.Target` made outside numoracle's registry
names its ``source``: a module or a ``.py`` file whose ``TARGETS`` holds it
(a bug zoo file, a foreign target's spec file, a user's kernels). A repro
records that source, the isolation worker loads the target from it, and
``numoracle shrink --fn``/``--source`` read kernels from it. Targets without
a source are the registry's (:func:`numoracle.kernels.get_target`).

Every way of failing to load a source is an
:class:`~numoracle.errors.InvalidArgument` that names the source and what to
do (a missing file or module, a syntax error, an import that fails inside
it), never a raw ``ModuleNotFoundError``.

Examples
--------
>>> load_module("no_such_module_here")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
numoracle.errors.InvalidArgument: module 'no_such_module_here' cannot be imported ...
"""

from __future__ import annotations

from ..callables import load_module
from ..cases.target import Target
from ..errors import InvalidArgument
from .registry import get_target

__all__ = ["load_module", "resolve_target"]


def resolve_target(name: str, op: str, source: str | None = None) -> Target:
    """Find a target again: in ``source`` (a module or ``.py`` file with a
    ``TARGETS`` list) when given, else among the registry's targets."""
    if source:
        mod = load_module(source)
        for t in getattr(mod, "TARGETS", ()):
            if t.name == name and t.op == op:
                return t
        raise InvalidArgument(f"{source!r} has no target {name!r} for op {op!r} in its TARGETS")
    return get_target(name, op)
