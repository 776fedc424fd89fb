"""What a check is made of, as plain data: a :class:`Case` (op, parameters,
storage format, value family, seed, layouts, overlays) that materialises its
inputs on the host (:mod:`.values`) in the layouts it names (:mod:`.layouts`),
and a :class:`Target` (a kernel, its backend, the precision it claims and the
layouts it reads and writes)."""

from __future__ import annotations

from .case import Case
from .target import Target

__all__ = ["Case", "Target"]
