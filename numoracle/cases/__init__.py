"""What a check draws, as plain data: a :class:`Case` (op, parameters, storage
format, value family, seed, layouts, overlays) that materialises its inputs on
the host (:mod:`.values`) in the layouts it names (:mod:`.layouts`). The
kernel it runs on is a :class:`~numoracle.targets.target.Target`
(:mod:`numoracle.targets`)."""

from __future__ import annotations

from .case import Case

__all__ = ["Case"]
