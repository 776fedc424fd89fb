"""The bug zoo: deliberately broken kernels the oracle must catch.

Each module of this package holds the mutants of one op, or of one op group,
and is named after it (``linear``, ``conv2d``, ``kan``, ``kan_chain``, ``logic``
for ``logic_layer`` and ``logic_ca``, ``optim`` for ``optim`` and ``mlp_train``):
its module-level ``TARGETS`` lists them, as a module of :mod:`numoracle.kernels`
lists its targets. Every mutant is one plausible bug in an otherwise correct
kernel, claims the precision the correct kernel meets, and names its module as
its ``source``, so a worker process or a repro finds it again by import.

Modules are imported only for the ops asked for: ``numoracle zoo --ops linear``
imports :mod:`numoracle.zoo.linear` alone (NumPy mutants), so it runs where torch
is not installed. A new op's mutants are a new module named after the op; modules
named otherwise (:mod:`numoracle.zoo.training`: trajectory mutants, no single-op
targets) are never loaded here.

Examples
--------
>>> sorted({t.op for t in mutants(["linear"])})
['linear']
>>> "linear" in zoo_modules()
True
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence

from ..errors import InvalidArgument
from ..oracle.ops import get_op
from ..targets.target import Target

__all__ = ["zoo_modules", "modules_for", "mutants", "OPTIONAL"]


def zoo_modules() -> list[str]:
    """The names of the zoo's modules, sorted, without importing any of them."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__)
                  if not info.name.startswith("_"))


def modules_for(ops: Sequence[str]) -> list[str]:
    """The zoo modules that hold mutants of ``ops``: those named after an op or
    after its group, in the order of :func:`zoo_modules`."""
    names: set[str] = set()
    for op in ops:
        names.add(op)
        group = get_op(op).group
        if group:
            names.add(group)
    return [m for m in zoo_modules() if m in names]


#: optional packages a zoo module may need; without them its mutants are skipped
OPTIONAL = ("torch", "cupy")


def mutants(ops: Sequence[str], *, skipped: dict[str, str] | None = None) -> list[Target]:
    """The mutants computing ``ops``, from the modules :func:`modules_for` names.

    Parameters
    ----------
    ops : sequence of str
        Op names (a group name is not expanded here: pass its ops).
    skipped : dict or None
        When given, a module that cannot be imported because an optional
        package (:data:`OPTIONAL`) is missing is left out and recorded here
        (module name -> reason) instead of raising.

    Raises
    ------
    InvalidArgument
        For an op that is not registered (``get_op`` names the known ones).
    ModuleNotFoundError
        For a module whose optional package is missing, when ``skipped`` is None.
    """
    if isinstance(ops, str):
        raise InvalidArgument(f"ops={ops!r} must be a sequence of op names, e.g. [{ops!r}]")
    found: list[Target] = []
    for name in modules_for(ops):
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if skipped is None or exc.name not in OPTIONAL:
                raise
            skipped[name] = f"{exc.name} is not installed"
            continue
        found.extend(t for t in getattr(module, "TARGETS", ()) if t.op in ops)
    return found
