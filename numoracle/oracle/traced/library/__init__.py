"""The rule library of the traced oracle: one module per family of ATen ops.

Importing the package imports every module in it, and each registers its rules
in :data:`numoracle.oracle.traced.rules.RULES` with
:func:`~numoracle.oracle.traced.rules.rule`.
"""

from __future__ import annotations

import importlib
import pkgutil

__all__: list[str] = []

for _info in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_info.name}")
