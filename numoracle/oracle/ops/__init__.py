"""Op references: each op written once against the error-tracking arithmetic."""

from __future__ import annotations

from ...errors import InvalidArgument
from .base import Op, Product
from .conv2d import Conv2d
from .linear import Linear
from .matmul import Matmul

__all__ = ["Op", "Product", "OPS", "get_op"]

OPS: dict[str, Op] = {op.name: op for op in (Linear(), Matmul(), Conv2d())}


def get_op(name: str) -> Op:
    """The op called ``name``."""
    try:
        return OPS[name]
    except (KeyError, TypeError):
        raise InvalidArgument(f"op {name!r} is unknown; use one of {sorted(OPS)}") from None
