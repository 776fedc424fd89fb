"""Op references: each op written once against the error-tracking arithmetic."""

from __future__ import annotations

from ...errors import InvalidArgument
from .base import Op, Product
from .conv2d import Conv2d
from .kan import Kan
from .kan_chain import KanChain
from .linear import Linear
from .matmul import Matmul
from .mlp_train import MlpTrain
from .optim import Optim

__all__ = ["Op", "Product", "OPS", "OP_GROUPS", "get_op"]

OPS: dict[str, Op] = {op.name: op for op in (Linear(), Matmul(), Conv2d(), Optim(), MlpTrain(),
                                              Kan(), KanChain())}

#: names that stand for several ops on the command line (``--ops optim``: the
#: optimizers and the training steps that apply them; ``--ops kan``: the KAN layer
#: and chains of KAN layers)
OP_GROUPS: dict[str, tuple[str, ...]] = {"optim": ("optim", "mlp_train"),
                                         "kan": ("kan", "kan_chain")}


def get_op(name: str) -> Op:
    """The op called ``name``."""
    try:
        return OPS[name]
    except (KeyError, TypeError):
        raise InvalidArgument(f"op {name!r} is unknown; use one of {sorted(OPS)}") from None
