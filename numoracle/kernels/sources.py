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

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from ..cases.target import Target
from ..errors import InvalidArgument
from .registry import get_target

__all__ = ["load_module", "resolve_target"]


def load_module(ref: str) -> Any:
    """The module ``ref`` names: a ``.py`` file (loaded under a private name,
    registered in ``sys.modules``) or an importable module name.

    Raises
    ------
    InvalidArgument
        When the file does not exist, or the module cannot be found or fails
        while it is imported (its own error is quoted).
    """
    if ref.endswith(".py"):
        path = Path(ref)
        if not path.is_file():
            raise InvalidArgument(f"target source file {ref!r} does not exist here; run "
                                  "from the folder it is relative to, or give its full path")
        spec = importlib.util.spec_from_file_location(f"numoracle_src_{path.stem}", path)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        try:
            spec.loader.exec_module(mod)
        except Exception as exc:  # noqa: BLE001 - any failure of the file, told whole
            del sys.modules[spec.name]
            raise InvalidArgument(f"{ref!r} fails while it is loaded ({type(exc).__name__}: "
                                  f"{exc}); fix the file so that `python {ref}` imports "
                                  "cleanly") from None
        return mod
    try:
        return importlib.import_module(ref)
    except ModuleNotFoundError as exc:
        if exc.name is not None and not ref.startswith(exc.name) and exc.name != ref:
            raise InvalidArgument(f"module {ref!r} imports {exc.name!r}, which is not "
                                  f"installed ({exc}); install it or give another "
                                  "module") from None
        raise InvalidArgument(f"module {ref!r} cannot be imported ({exc}); give an importable "
                              "module (is its folder on PYTHONPATH?) or the path of a .py "
                              "file") from None
    except Exception as exc:  # noqa: BLE001 - any failure of the module, told whole
        raise InvalidArgument(f"module {ref!r} fails while it is imported "
                              f"({type(exc).__name__}: {exc}); fix it so that it imports "
                              "cleanly") from None


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
