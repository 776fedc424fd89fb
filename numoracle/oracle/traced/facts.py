"""Shapes without arithmetic: what one run of a reference on tensors without
data tells the case strategies (DESIGN §7).

:func:`shape_facts` runs the reference once on ``meta`` tensors (or fake ones,
where it makes tensors of its own) and tells the output shapes, the longest
reduction in the graph and which inputs are multiplied together in a
contraction: what case strategies budget sizes and value families by. A
reference whose Python reads input values runs on tensors of random values
instead, and its :attr:`~.capture.Reference.reads_values` names the line; one
that cannot run on the shapes is refused in one sentence, its own error quoted.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ...errors import InvalidArgument
from .capture import Reference
from .symbolic import first_line, leaves_torch, leaving_torch, quiet, reads_values, user_line

__all__ = ["ShapeFacts", "shape_facts"]


@dataclass(frozen=True)
class ShapeFacts:
    """What one fake run of a reference tells: the shape of each output (the
    reference's, then ``grad_<input>``), the longest reduction of any ATen op
    in it, and the pairs of inputs multiplied together in a contraction with
    its length ``(a, b, n)``."""

    outputs: dict[str, tuple[int, ...]]
    longest: int
    products: tuple[tuple[str, str, int], ...]


#: ops that move or copy elements without arithmetic: a contraction operand
#: reached from an input through them is that input
_MOVES = frozenset({
    "view", "_unsafe_view", "reshape", "permute", "t", "transpose", "expand", "clone",
    "contiguous", "alias", "detach", "unsqueeze", "squeeze", "slice", "select", "_to_copy",
    "lift_fresh", "view_copy", "permute_copy", "expand_copy", "t_copy", "transpose_copy",
    "unsqueeze_copy", "squeeze_copy", "_reshape_alias", "as_strided",
})
_CONTRACTIONS = frozenset({"mm", "bmm", "addmm", "baddbmm", "convolution"})


def _reduction_length(name: str, args: Sequence[Any], kwargs: Mapping[str, Any],
                      ins: Sequence[torch.Tensor], outs: Sequence[torch.Tensor]) -> int:
    """The longest reduction one ATen call makes (its terms per output element)."""
    if name in ("mm", "bmm"):
        return int(args[0].shape[-1])
    if name in ("addmm", "baddbmm"):
        return int(args[1].shape[-1]) + 1
    if name == "convolution":
        w, transposed, groups = args[1], bool(args[6]), int(args[8])
        k = math.prod(w.shape[2:])
        return int((w.shape[0] // groups if transposed else w.shape[1]) * k) + 1
    biggest = max((t.numel() for t in ins), default=0)
    smallest = min((t.numel() for t in outs if t.numel() > 0), default=0)
    n = biggest // smallest if smallest else 1
    dims = kwargs.get("dim", args[1] if len(args) > 1 else None)
    if ins and isinstance(dims, (int, list, tuple)) and not isinstance(dims, bool):
        shape = ins[0].shape
        axes = [dims] if isinstance(dims, int) else list(dims)
        if all(isinstance(a, int) and -len(shape) <= a < max(len(shape), 1) for a in axes) \
                and shape:
            n = max(n, math.prod(int(shape[a]) for a in axes))
    return max(int(n), 1)


class _Recorder(TorchDispatchMode):
    """Records the reductions and the input products of every ATen call of a
    forward pass; with ``backward``, also those its backward pass makes: a
    contraction's operand gradients sum over the other two of its dimensions,
    a broadcast operand's gradient over the elements it was broadcast to."""

    def __init__(self, sources: dict[int, tuple[torch.Tensor, str]], backward: bool) -> None:
        super().__init__()
        self.sources = sources
        self.backward = backward
        self.longest = 1
        self.products: dict[tuple[str, str], int] = {}
        #: contraction results (and views of them): (a, b, length of grad_a, of grad_b)
        self.made: dict[int, tuple[torch.Tensor, str | None, str | None, int, int]] = {}

    def _source(self, t: Any) -> str | None:
        found = self.sources.get(id(t)) if isinstance(t, torch.Tensor) else None
        return found[1] if found is not None and found[0] is t else None

    def product(self, a: str | None, b: str | None, n: int) -> None:
        if a is not None and b is not None:
            self.products[(a, b)] = max(self.products.get((a, b), 0), n)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        ins = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        outs = [o for o in tree_leaves(out) if isinstance(o, torch.Tensor)]
        if name in _MOVES and ins:
            src = self._source(ins[0])
            made = self.made.get(id(ins[0]))
            for o in outs:
                if src is not None:
                    self.sources[id(o)] = (o, src)
                if made is not None and made[0] is ins[0]:
                    self.made[id(o)] = (o, *made[1:])
            return out
        n = _reduction_length(name, args, kwargs, ins, outs)
        self.longest = max(self.longest, n)
        if self.backward and outs:
            size = max(o.numel() for o in outs)
            for t in ins:  # a broadcast operand's gradient sums what it was broadcast to
                if t.numel():
                    self.longest = max(self.longest, size // t.numel())
        if name in _CONTRACTIONS:
            a, b = (args[1], args[2]) if name in ("addmm", "baddbmm") else (args[0], args[1])
            sa, sb = self._source(a), self._source(b)
            self.product(sa, sb, n)
            if self.backward and name != "convolution":
                m, k2 = int(a.shape[-2]), int(b.shape[-1])  # grad_a sums k2 terms, grad_b m
                self.longest = max(self.longest, m * (a.numel() // max(a.shape[-2] *
                                                                      a.shape[-1], 1)), k2)
                for o in outs:
                    self.made[id(o)] = (o, sa, sb, k2, m)
            elif self.backward:
                w = args[1]
                per_weight = max(outs[0].numel() // max(int(w.shape[0]), 1), 1)
                self.longest = max(self.longest, per_weight)
                for o in outs:
                    self.made[id(o)] = (o, sa, sb, int(w.shape[0]), per_weight)
        return out

    def output_products(self, outs: Sequence[torch.Tensor], names: Sequence[str]) -> None:
        """The products of the backward pass where an output is a contraction's
        result: ``grad_<output>`` meets the other operand."""
        for o, name in zip(outs, names, strict=True):
            made = self.made.get(id(o))
            if made is None or made[0] is not o:
                continue
            _, sa, sb, n_a, n_b = made
            self.product(f"grad_{name}", sb, n_a)
            self.product(sa, f"grad_{name}", n_b)


def shape_facts(reference: Reference, shapes: Mapping[str, tuple[int, ...]],
                dtypes: Mapping[str, torch.dtype] | None = None, *,
                declared: str = "") -> ShapeFacts:
    """Run ``reference`` forward on tensors of ``shapes`` without data (float64
    unless ``dtypes`` says otherwise); with ``reference.grads``, the lengths
    and products of the backward pass follow from the forward calls
    (:class:`_Recorder`) and the gradients have their inputs' shapes.

    The run is on the ``meta`` device (a module on a meta copy of itself); a
    reference that makes tensors of its own on the CPU runs under a fake
    tensor mode instead, and one whose Python reads input values on tensors
    of random values (:attr:`Reference.reads_values` then names the line).
    ``declared`` tells in the error how the shapes were made (``inputs=...``).

    Raises
    ------
    InvalidArgument
        Where the reference cannot run on those shapes (its error is quoted),
        or leaves torch (``.numpy()``).
    """
    dtypes = dtypes or {}
    with quiet():
        try:
            return _facts(reference, shapes, dtypes, "meta")
        except Exception:  # noqa: BLE001 - tensors of its own off the meta device: fake ones
            pass
        try:
            return _facts(reference, shapes, dtypes, "fake")
        except InvalidArgument:
            raise
        except Exception as exc:  # noqa: BLE001 - told apart below
            fake_error = exc
        if leaves_torch(fake_error):
            raise InvalidArgument(leaving_torch(reference.describe(), fake_error)) from fake_error
        if not reads_values(fake_error):
            raise InvalidArgument(_cannot_run(reference, shapes, declared,
                                              fake_error)) from fake_error
        try:
            facts = _facts(reference, shapes, dtypes, "real")
        except InvalidArgument:
            raise
        except Exception as exc:
            raise InvalidArgument(_cannot_run(reference, shapes, declared, exc)) from exc
    reference.reads_values = user_line(fake_error) or "a line that could not be found"
    return facts


def _cannot_run(reference: Reference, shapes: Mapping[str, tuple[int, ...]], declared: str,
                exc: BaseException) -> str:
    where = user_line(exc)
    given = ", ".join(f"{k}={tuple(v)}" for k, v in shapes.items())
    return (f"the reference {reference.describe()} cannot run on inputs of shapes {given}"
            f"{f' ({declared})' if declared else ''}: {first_line(exc)}"
            f"{f' (at {where})' if where else ''}. Declare each input with the dimensions "
            "the reference expects (inputs whose sizes must agree share a dimension name), "
            "or bound dims= to sizes it accepts")


def _facts(reference: Reference, shapes: Mapping[str, tuple[int, ...]],
           dtypes: Mapping[str, torch.dtype], how: str) -> ShapeFacts:
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415 - torch-private

    sources: dict[int, tuple[torch.Tensor, str]] = {}
    mode = FakeTensorMode(allow_non_fake_inputs=True) if how == "fake" else contextlib.nullcontext()
    device = "meta" if how == "meta" else "cpu"
    quiet_grad = torch.no_grad() if how == "real" else contextlib.nullcontext()
    with mode, reference.on_meta(how == "meta") as ref, quiet_grad:
        if how == "real":  # random values, integer inputs 0: a valid index of any size
            gen = torch.Generator().manual_seed(0)
            tensors = {n: torch.randn(s, dtype=torch.float64, generator=gen)
                       if dtypes.get(n, torch.float64).is_floating_point
                       else torch.zeros(s, dtype=dtypes[n]) for n, s in shapes.items()}
        else:
            tensors = {n: torch.empty(s, dtype=dtypes.get(n, torch.float64), device=device)
                       for n, s in shapes.items()}
        for n, t in tensors.items():
            sources[id(t)] = (t, n)
        rec = _Recorder(sources, backward=bool(ref.grads))
        with rec:
            outs, names = ref.flat(tensors)
        shapes_out = {n: tuple(o.shape) for n, o in zip(names, outs, strict=True)}
        if ref.grads:
            rec.output_products(outs, names)
            shapes_out.update({f"grad_{g}": tuple(tensors[g].shape) for g in ref.grads})
    products = tuple((a, b, n) for (a, b), n in rec.products.items())
    return ShapeFacts(shapes_out, rec.longest, products)
