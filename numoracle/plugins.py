"""Ops and targets from other packages, through the entry point group
``numoracle.targets``.

A package adds ops and targets by naming a module in that group; the module
defines ``TARGETS`` (a sequence of :class:`~numoracle.Target`) and, for new
ops, ``OPS`` (a sequence of :class:`~numoracle.oracle.ops.Op` instances). In
its ``pyproject.toml``::

    [project.entry-points."numoracle.targets"]
    mykernels = "mykernels.numoracle_targets"

Then ``numoracle list`` shows the targets, ``numoracle run`` checks them, and
``get_target(name, op)`` finds them. ``tests/plugin_example/`` is such a
package. A module that fails to import is an error that names it: a broken
plugin never passes silently.
"""

from __future__ import annotations

import importlib.metadata
from types import ModuleType
from typing import Any

from .errors import InvalidArgument

__all__ = ["ENTRY_POINT_GROUP", "load_plugins", "plugin_targets"]

#: the entry point group numoracle reads
ENTRY_POINT_GROUP = "numoracle.targets"

_loaded: list[ModuleType] | None = None


def _load(ep: importlib.metadata.EntryPoint) -> Any:
    try:
        return ep.load()
    except Exception as exc:
        raise InvalidArgument(
            f"the numoracle plugin {ep.name!r} ({ep.value}) failed to load: "
            f"{type(exc).__name__}: {exc}; fix or uninstall the package that declares it in "
            f"the entry point group {ENTRY_POINT_GROUP!r}"
        ) from exc


def load_plugins(*, refresh: bool = False) -> list[ModuleType]:
    """Import every module of the entry point group (once, or again with
    ``refresh`` after installing a plugin); return the modules. Their ``OPS``
    are registered by :func:`numoracle.oracle.ops.all_ops` and ``get_op``, their
    ``TARGETS`` by the kernels' registry."""
    global _loaded
    if _loaded is None or refresh:
        _loaded = [_load(ep) for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]
    return _loaded


def plugin_targets() -> list[Any]:
    """The ``TARGETS`` of every plugin module."""
    return [t for module in load_plugins() for t in getattr(module, "TARGETS", ())]
