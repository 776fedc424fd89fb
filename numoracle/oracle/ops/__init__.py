"""Op references: each op written once against the error-tracking arithmetic.

Every module of this package that defines a subclass of :class:`Op` with a
``name`` contributes that op: adding an op is adding its module (the reference
and its shape plan, :mod:`.plan`), nothing else. Ops of other packages come
through the entry point group ``numoracle.targets`` (see :mod:`numoracle.plugins`).

Examples
--------
>>> get_op("conv2d").group is None, get_op("mlp_train").group
(True, 'optim')
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from ...errors import InvalidArgument
from .base import Op, Product

__all__ = ["Op", "Product", "OPS", "OP_GROUPS", "get_op", "register_op", "all_ops"]

#: the ops by name: those of this package's modules, then registered ones
OPS: dict[str, Op] = {}
#: names that stand for several ops on the command line (``--ops optim``: the
#: optimizers and the training steps that apply them), from each op's ``group``
OP_GROUPS: dict[str, tuple[str, ...]] = {}


def register_op(op: Op) -> Op:
    """Add ``op`` to the registry (:data:`OPS`, :data:`OP_GROUPS`) and return it.

    Raises
    ------
    InvalidArgument
        If another op already has its name.
    """
    if not isinstance(op, Op) or not op.name:
        raise InvalidArgument(f"{op=} is not an Op with a name; subclass numoracle.oracle.ops.Op")
    if op.name in OPS and type(OPS[op.name]) is not type(op):
        raise InvalidArgument(f"op {op.name!r} is defined twice ({type(OPS[op.name]).__module__} "
                              f"and {type(op).__module__}); rename one")
    OPS[op.name] = op
    if op.group is not None:
        OP_GROUPS[op.group] = tuple(sorted({*OP_GROUPS.get(op.group, ()), op.name}))
    return op


def _discover() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.name in ("base", "plan"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Op) and cls.__module__ == module.__name__ and cls.name \
                    and not inspect.isabstract(cls):
                register_op(cls())


_discover()


def _with_plugins() -> None:
    """Register the ``OPS`` of installed plugins (:mod:`numoracle.plugins`)."""
    from ...plugins import load_plugins  # noqa: PLC0415 - a plugin's module imports the ops

    for module in load_plugins():
        for op in getattr(module, "OPS", ()):
            if OPS.get(op.name) is not op:
                register_op(op)


def all_ops() -> dict[str, Op]:
    """Every op, those of installed plugins included, by name."""
    _with_plugins()
    return dict(OPS)


def get_op(name: str) -> Op:
    """The op called ``name`` (an installed plugin's ops included)."""
    try:
        if name not in OPS:
            _with_plugins()
        return OPS[name]
    except (KeyError, TypeError):
        raise InvalidArgument(f"op {name!r} is unknown; use one of {sorted(OPS)}") from None
