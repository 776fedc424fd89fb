"""Finding a target again by where it came from, and the resolver a caller hands down.

A :class:`~numoracle.targets.target.Target` made outside numoracle's registry
names its ``source``: a module or a ``.py`` file whose ``TARGETS`` holds it
(a bug zoo file, a foreign target's spec file, a user's kernels). A repro
records that source, the isolation worker loads the target from it, and
``numoracle shrink --fn``/``--source`` read kernels from it:
:func:`find_in_source` does it.

Targets without a source are the registry's, which lists the kernels under
test (:mod:`numoracle.kernels`), a layer above the checks. A check that must
find such a target again (a replay) is handed a :data:`Resolve` by its
caller, the shell or the user-facing API (``numoracle.kernels.resolve_target``,
source first, then the registry); :func:`find_in_source` alone is the
resolver of a caller that knows no registry.

Every way of failing to load a source is an
:class:`~numoracle.errors.InvalidArgument` that names the source and what to
do (a missing file or module, a syntax error, an import that fails inside
it), never a raw ``ModuleNotFoundError``.

Examples
--------
>>> find_in_source("x", "matmul", "no_such_module_here")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
numoracle.errors.InvalidArgument: module 'no_such_module_here' cannot be imported ...
"""

from __future__ import annotations

from collections.abc import Callable

from ..callables import load_module
from ..errors import InvalidArgument
from .target import Target

__all__ = ["Resolve", "find_in_source"]

#: ``resolve(name, op, source) -> Target``: the target called ``name`` for
#: ``op``, found in ``source`` when given, else wherever the resolver knows
#: targets by name; InvalidArgument saying why when it cannot be found
Resolve = Callable[[str, str, "str | None"], Target]


def find_in_source(name: str, op: str, source: str | None = None) -> Target:
    """The target ``name`` of ``op`` in ``source``'s ``TARGETS`` (a module or
    ``.py`` file); a :data:`Resolve` that knows no registry.

    Raises
    ------
    InvalidArgument
        Where ``source`` cannot be loaded or holds no such target, or is None
        (a built-in target: only a resolver with the registry finds it).
    """
    if not source:
        raise InvalidArgument(
            f"target {name!r} of op {op!r} names no source (a module or .py file whose "
            "TARGETS holds it): it is a registry target, found by a resolver that knows the "
            "registry; pass resolve=numoracle.kernels.resolve_target")
    mod = load_module(source)
    for t in getattr(mod, "TARGETS", ()):
        if t.name == name and t.op == op:
            return t
    raise InvalidArgument(f"{source!r} has no target {name!r} for op {op!r} in its TARGETS")
