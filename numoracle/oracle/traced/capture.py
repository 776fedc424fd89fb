"""Capture of a PyTorch reference as an ATen graph (DESIGN §7).

A reference ``f(*inputs, **params)`` (a plain function or an ``nn.Module``,
whose parameters become inputs) is traced per case with
``make_fx(functionalize(f), tracing_mode="real", decomposition_table=...)`` on
the case's own float64 inputs: data-dependent Python is resolved by those
values, in-place ops and aliasing become pure ops, and composite ops are
lowered to ATen primitives. The decomposition table is torch's core ATen table
minus :data:`KEEP`, the ops the rule library bounds as a whole because a
composition of their pieces would bound them loosely (a contraction, a
softmax, a normalisation, a pool, a loss).

With gradients, the graph is that of ``torch.func.vjp`` applied to the
reference: it takes the inputs and one cotangent per floating-point output
(``grad_<output>``) and returns the outputs, then ``grad_<input>`` for each
input named in ``grads``.

Graphs are kept per signature (shapes, dtypes, the parameters and the
gradients asked for): a reference whose Python branches on its input *values*
must be given ``cache=False`` (:class:`Reference`), so that it is traced
again for every case.

:func:`shape_facts` runs the reference once on fake tensors (shapes only, no
arithmetic) and tells the output shapes, the longest reduction in the graph
and which inputs are multiplied together in a contraction: what case strategies
budget sizes and value families by.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
from torch import fx
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ...errors import InvalidArgument
from . import symbolic
from .symbolic import ReadsValues, Symbolic, drop_dead_mutations, quiet

__all__ = ["KEEP", "Graph", "Reference", "ShapeFacts", "capture", "decomposition_table",
           "output_names", "shape_facts", "CACHE_SIZE"]

#: ATen ops (overload packets) kept whole in the captured graph: each has a sharp
#: rule in the library; torch's core decompositions of them are not applied
KEEP: tuple[str, ...] = (
    # contractions and convolutions, forward and backward
    "aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.convolution",
    "aten.convolution_backward",
    # softmax family
    "aten._softmax", "aten._log_softmax", "aten._softmax_backward_data",
    "aten._log_softmax_backward_data", "aten.logsumexp",
    # normalisations
    "aten.native_layer_norm", "aten.native_layer_norm_backward", "aten.native_group_norm",
    "aten.native_group_norm_backward", "aten.native_batch_norm",
    "aten.native_batch_norm_backward", "aten._native_batch_norm_legit",
    "aten._native_batch_norm_legit_no_training", "aten._native_batch_norm_legit_functional",
    # reductions
    "aten.sum", "aten.mean", "aten.cumsum",
    # pooling
    "aten.max_pool2d_with_indices", "aten.max_pool2d_with_indices_backward",
    "aten.max_pool3d_with_indices", "aten.max_pool3d_with_indices_backward",
    "aten.avg_pool1d", "aten.avg_pool2d", "aten.avg_pool2d_backward", "aten.avg_pool3d",
    "aten.avg_pool3d_backward", "aten._adaptive_avg_pool2d",
    "aten._adaptive_avg_pool2d_backward", "aten.adaptive_avg_pool1d",
    # losses
    "aten.nll_loss_forward", "aten.nll_loss_backward", "aten.nll_loss2d_forward",
    "aten.nll_loss2d_backward",
)

#: graphs kept per reference (signatures of shapes, dtypes, parameters, gradients)
CACHE_SIZE = 64


@lru_cache(maxsize=1)
def decomposition_table() -> Mapping[Any, Callable[..., Any]]:
    """torch's core ATen decompositions without those of the :data:`KEEP` ops,
    and those of the splits and ``repeat``."""
    from torch._decomp import (  # noqa: PLC0415 - private torch module
        core_aten_decompositions,
        get_decompositions,
    )

    keep = set(KEEP)
    table = {op: fn for op, fn in core_aten_decompositions().items()
             if str(getattr(op, "overloadpacket", op)) not in keep}
    aten = torch.ops.aten
    # splits (an attention's packed projection, a GRU's gates) as the slices they
    # are, repeats (an instance norm's weights) as torch lowers them
    table.update(get_decompositions([aten.repeat]))
    table.update({aten.split_with_sizes.default: _split_with_sizes,
                  aten.unsafe_split_with_sizes.default: _split_with_sizes,
                  aten.split.Tensor: _split, aten.unsafe_split.Tensor: _split,
                  aten.unbind.int: _unbind})
    return table


def _split_with_sizes(x: torch.Tensor, sizes: Sequence[int], dim: int = 0
                      ) -> list[torch.Tensor]:
    starts = [0]
    for s in sizes:
        starts.append(starts[-1] + s)
    return [torch.ops.aten.slice.Tensor(x, dim, a, b)
            for a, b in zip(starts[:-1], starts[1:], strict=True)]


def _split(x: torch.Tensor, size: int, dim: int = 0) -> list[torch.Tensor]:
    n = x.shape[dim]
    sizes = [size] * (n // size) + ([n % size] if n % size else [])
    return _split_with_sizes(x, sizes or [n], dim)


def _unbind(x: torch.Tensor, dim: int = 0) -> list[torch.Tensor]:
    return [torch.ops.aten.select.int(x, dim, i) for i in range(x.shape[dim])]


# -- outputs -------------------------------------------------------------------------
def _named(result: Any, prefix: str) -> list[tuple[str, torch.Tensor]] | None:
    """The tensors of a tuple or list, nested ones included (an LSTM's
    ``(output, (h, c))``), named ``out0``, ``out1_0``, ...; None where an
    element is not a tensor."""
    if not isinstance(result, (tuple, list)) or not result:
        return None
    found: list[tuple[str, torch.Tensor]] = []
    for i, r in enumerate(result):
        if isinstance(r, torch.Tensor):
            found.append((f"{prefix}{i}", r))
            continue
        inner = _named(r, f"{prefix}{i}_")
        if inner is None:
            return None
        found.extend(inner)
    return found


def output_names(result: Any) -> tuple[str, ...]:
    """The names of a reference's outputs: ``out`` for one tensor, ``out0``,
    ``out1``, ... for a tuple or list (``out1_0`` inside a nested one), the
    keys of a dict.

    Raises
    ------
    InvalidArgument
        For any other kind of result (non-tensors).
    """
    if isinstance(result, torch.Tensor):
        return ("out",)
    named = _named(result, "out")
    if named is not None:
        return tuple(n for n, _ in named)
    if isinstance(result, Mapping) and result and all(
            isinstance(k, str) and k.isidentifier() and isinstance(v, torch.Tensor)
            for k, v in result.items()):
        return tuple(result)
    hint = ("; the traced oracle follows torch operations only: compute with torch on the "
            "tensor inputs (torch.tanh(x), not np.tanh(x.numpy()))"
            if "numpy" in type(result).__module__ else "")
    raise InvalidArgument(
        f"the reference returned {type(result).__name__}; it must return a tensor, a tuple "
        f"or list of tensors (nested ones too), or a dict of tensors keyed by "
        f"identifiers{hint}")


def _flat_outputs(result: Any) -> tuple[torch.Tensor, ...]:
    if isinstance(result, torch.Tensor):
        return (result,)
    if isinstance(result, Mapping):
        return tuple(result.values())
    return tuple(t for _, t in _named(result, "out") or ())


# -- the reference -------------------------------------------------------------------
def _input_name(state_name: str) -> str:
    """An ``nn.Module``'s parameter name as an input name (an identifier):
    ``0.weight`` -> ``layer0_weight``, ``fc.bias`` -> ``fc_bias``."""
    name = re.sub(r"\W", "_", state_name)
    return f"layer{name}" if name[:1].isdigit() else name


class Reference:
    """A PyTorch reference as the traced oracle calls it.

    Parameters
    ----------
    fn : callable or torch.nn.Module
        ``fn(*inputs, **params)``. A module is copied and converted to float64;
        its parameters become inputs (named by :func:`_input_name`), its buffers
        stay its own.
    inputs : sequence of str
        The names of the reference's tensor inputs, in call order (module
        parameters excluded: they come after them, in :attr:`names`).
    params : mapping
        Keyword arguments passed unchanged on every call (no tensors).
    grads : sequence of str
        Inputs (module parameters included) whose gradients the graph computes.
    cache : bool
        Keep graphs per signature; False traces every case again (references
        whose Python branches on input values).
    """

    def __init__(self, fn: Callable[..., Any], inputs: Sequence[str], *,
                 params: Mapping[str, Any] | None = None, grads: Sequence[str] = (),
                 cache: bool = True) -> None:
        if not callable(fn):
            raise InvalidArgument(f"reference={fn!r} must be callable: a function or an "
                                  "nn.Module")
        self.fn = fn
        self.params = dict(params or {})
        for k, v in self.params.items():
            if isinstance(v, torch.Tensor):
                raise InvalidArgument(f"params[{k!r}] is a tensor; give tensors as inputs "
                                      "(inputs={...}), params are fixed non-tensor arguments")
        self.module: torch.nn.Module | None = None
        self.state: dict[str, str] = {}  # input name -> module parameter name
        if isinstance(fn, torch.nn.Module):
            self.module = copy.deepcopy(fn).to(torch.float64)
            for pname, _ in self.module.named_parameters():
                self.state[_input_name(pname)] = pname
        #: a training-mode batch norm's running statistics, left out of the call:
        #: it normalises by the batch's statistics either way, and their update
        #: in place changes no output
        self._untracked: dict[str, None] = {} if self.module is None else {
            f"{m}.{b}" if m else b: None
            for m, sub in self.module.named_modules()
            if isinstance(sub, torch.nn.modules.batchnorm._NormBase) and sub.training
            for b in ("running_mean", "running_var", "num_batches_tracked")
            if getattr(sub, b, None) is not None}
        self.inputs = tuple(inputs)
        self.names = self.inputs + tuple(self.state)
        if len(set(self.names)) != len(self.names):
            raise InvalidArgument(f"input names {self.names} repeat; a module parameter's "
                                  "name clashes with an input: rename the input")
        unknown = [g for g in grads if g not in self.names]
        if unknown:
            raise InvalidArgument(f"grads={tuple(grads)!r} names {unknown}, which are not "
                                  f"inputs; the inputs are {self.names}")
        self.grads = tuple(grads)
        self.cache = bool(cache)
        self._graphs: dict[tuple[Any, ...], Graph] = {}
        #: symbolic captures: (placeholders, outputs, cotangents taken, graph)
        self._symbolic: list[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...],
                                   Symbolic]] = []
        #: captures made (symbolic or on one case's values)
        self.captures = 0
        #: where the reference's Python reads input values (``file:line (code)``),
        #: found by a capture or a shape run; None while none has
        self.reads_values: str | None = None
        self._keywords = self._takes_keywords()
        self._meta: Reference | None = None

    def parameter_shapes(self) -> dict[str, tuple[int, ...]]:
        """The shape of each module parameter, by input name (empty for a function)."""
        if self.module is None:
            return {}
        params = dict(self.module.named_parameters())
        return {name: tuple(params[p].shape) for name, p in self.state.items()}

    def _takes_keywords(self) -> bool:
        target = self.module.forward if self.module is not None else self.fn
        try:
            inspect.signature(target).bind(**dict.fromkeys(self.inputs), **self.params)
        except (TypeError, ValueError):
            return False
        return True

    def call(self, tensors: Mapping[str, torch.Tensor]) -> Any:
        """The reference's result on ``tensors`` (every input by name)."""
        args = [tensors[n] for n in self.inputs]
        if self.module is not None:
            state = {p: tensors[n] for n, p in self.state.items()}
            state.update(self._untracked)
            if self._keywords:
                return torch.func.functional_call(self.module, state, (),
                                                  {**dict(zip(self.inputs, args, strict=True)),
                                                   **self.params})
            return torch.func.functional_call(self.module, state, tuple(args), self.params)
        if self._keywords:
            return self.fn(**dict(zip(self.inputs, args, strict=True)), **self.params)
        return self.fn(*args, **self.params)

    def flat(self, tensors: Mapping[str, torch.Tensor]) -> tuple[tuple[torch.Tensor, ...],
                                                                  tuple[str, ...]]:
        """The reference's outputs on ``tensors``, flat, with their names."""
        result = self.call(tensors)
        return _flat_outputs(result), output_names(result)

    def joint(self, out_names: Sequence[str], *, autograd: bool = False
              ) -> Callable[..., tuple[torch.Tensor, ...]]:
        """``g(*inputs, *cotangents) -> (*outputs, *grads)``: the function captured
        when gradients are asked for (``out_names``: the outputs with cotangents).

        ``autograd`` takes the gradients with ``torch.autograd.grad``, which a
        trace with symbolic sizes follows (``torch.func.vjp`` makes their sizes
        constants); in-place code is functionalized after that trace.
        """
        names, grads = self.names, self.grads

        def g(*flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
            values = dict(zip(names, flat[:len(names)], strict=True))
            cotangents = flat[len(names):]

            def forward(*diff: torch.Tensor) -> tuple[torch.Tensor, ...]:
                return self.flat({**values, **dict(zip(grads, diff, strict=True))})[0]

            outs, pull = torch.func.vjp(torch.func.functionalize(forward),
                                        *(values[n] for n in grads))[:2]
            return (*outs, *pull(tuple(cotangents[:len(outs)])))

        def through_autograd(*flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
            values = dict(zip(names, flat[:len(names)], strict=True))
            cotangents = flat[len(names):]
            diff = [values[n].detach().requires_grad_(True) for n in grads]
            with torch.enable_grad():
                outs = self.flat({**values, **dict(zip(grads, diff, strict=True))})[0]
                found = torch.autograd.grad(outs, diff, cotangents[:len(outs)],
                                            allow_unused=True)
            return (*(o.detach() for o in outs),
                    *(torch.zeros_like(d) if f is None else f
                      for d, f in zip(diff, found, strict=True)))
        return through_autograd if autograd else g

    def forward(self) -> Callable[..., tuple[torch.Tensor, ...]]:
        """``f(*inputs) -> (*outputs,)``: the function captured without gradients."""
        def f(*flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return self.flat(dict(zip(self.names, flat, strict=True)))[0]
        return f

    @contextlib.contextmanager
    def on_meta(self, meta: bool = True) -> Iterator[Reference]:
        """This reference, or (``meta``) one whose module lives on the meta
        device (no data: shapes only); a function is the same either way."""
        if not meta or self.module is None:
            yield self
            return
        if self._meta is None:
            twin = copy.copy(self)
            twin.module = copy.deepcopy(self.module).to("meta")
            twin._graphs = {}
            self._meta = twin
        yield self._meta

    def describe(self) -> str:
        """``module.qualname`` of the reference (its class for a module)."""
        obj = type(self.fn) if self.module is not None else self.fn
        return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


@dataclass(frozen=True)
class Graph:
    """A captured reference: the fx graph and the names of its placeholders
    (inputs, then cotangents ``grad_<output>``) and of its outputs (the
    reference's, then ``grad_<input>``)."""

    module: fx.GraphModule
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def ops(self) -> tuple[str, ...]:
        """The ATen ops the graph calls, each once, in order of first call."""
        seen: dict[str, None] = {}
        for node in self.module.graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                seen.setdefault(str(node.target))
        return tuple(seen)


def _float64(a: Any) -> torch.Tensor:
    t = torch.as_tensor(a)
    return (t.to(torch.float64) if t.is_floating_point() else t).contiguous()


def _signature(tensors: Mapping[str, torch.Tensor]) -> tuple[Any, ...]:
    return tuple((n, tuple(t.shape), t.dtype) for n, t in tensors.items())


def capture(reference: Reference, inputs: Mapping[str, Any],
            cotangents: Mapping[str, Any] | None = None) -> Graph:
    """The ATen graph of ``reference`` on ``inputs`` (arrays or tensors by name,
    every name of ``reference.names``; floating ones traced in float64).

    With ``reference.grads``, ``cotangents`` gives ``grad_<output>`` for each
    floating-point output (their values only resolve data-dependent code; any
    of the right shape will do).

    A graph captured with symbolic sizes serves every case its guards admit
    (:mod:`.symbolic`); a reference whose Python reads input values is
    captured on each case's own values (:attr:`Reference.reads_values` says
    where it reads them).
    """
    missing = [n for n in reference.names if n not in inputs]
    if missing:
        raise InvalidArgument(f"inputs {missing} are missing; the reference takes "
                              f"{reference.names}")
    tensors = {n: _float64(inputs[n]) for n in reference.names}
    cots = {k: _float64(v) for k, v in (cotangents or {}).items()}
    key = (_signature(tensors), _signature(cots))
    kept = reference.cache and reference.reads_values is None
    if kept and key in reference._graphs:
        return reference._graphs[key]
    graph = _admitted(reference, tensors, cots) if kept else None
    if graph is None:
        graph = _traced(reference, tensors, cots)
    if reference.cache and reference.reads_values is None:
        if len(reference._graphs) >= CACHE_SIZE:
            reference._graphs.clear()
        reference._graphs[key] = graph
    return graph


def _admitted(reference: Reference, tensors: Mapping[str, torch.Tensor],
              cots: Mapping[str, torch.Tensor]) -> Graph | None:
    """The graph of a symbolic capture that admits these sizes, specialised to
    them, or None."""
    for placeholders, outputs, want, sym in reference._symbolic:
        if any(w not in cots for w in want):
            continue
        args = [*tensors.values(), *(cots[w] for w in want)]
        if sym.admits(args):
            return Graph(sym.specialize(args), placeholders, outputs)
    return None


def _traced(reference: Reference, tensors: Mapping[str, torch.Tensor],
            cots: dict[str, torch.Tensor]) -> Graph:
    """A new capture: symbolic where the reference allows it (kept for later
    sizes), else on this case's values."""
    with torch.no_grad(), quiet():
        outs, out_names = reference.flat(tensors)
    want: tuple[str, ...] = ()
    if reference.grads:
        graded = tuple(n for n, o in zip(out_names, outs, strict=True)
                       if o.is_floating_point())
        if len(graded) != len(outs):
            raise InvalidArgument("grads= needs every output of the reference to be floating "
                                  f"point; outputs {out_names} include integer ones")
        want = tuple(f"grad_{n}" for n in graded)
        cots.update({w: torch.zeros_like(o) for w, o in zip(want, outs, strict=True)
                     if w not in cots})
        fn = reference.joint(graded)
        sym_fn = reference.joint(graded, autograd=True)
        args = [*tensors.values(), *(cots[w] for w in want)]
        placeholders = reference.names + want
        outputs = out_names + tuple(f"grad_{g}" for g in reference.grads)
    else:
        fn, args = reference.forward(), list(tensors.values())
        sym_fn = fn
        placeholders, outputs = reference.names, out_names
    reference.captures += 1
    # attention as its math (matmuls, softmax), not a fused kernel whose backward has no rule
    with sdpa_kernel(SDPBackend.MATH):
        if reference.cache and reference.reads_values is None:
            try:
                sym = symbolic.trace(sym_fn, args, decomposition_table())
            except ReadsValues as exc:
                reference.reads_values = exc.where or "a line that could not be found"
            except Exception as exc:  # noqa: BLE001 - symbolic sizes unsupported: this case's, kept
                if symbolic.leaves_torch(exc):
                    raise InvalidArgument(_leaves_torch(reference, exc)) from exc
            else:
                if len(reference._symbolic) >= CACHE_SIZE:
                    reference._symbolic.clear()
                reference._symbolic.append((placeholders, outputs, want, sym))
                return Graph(sym.specialize(args), placeholders, outputs)
        # real tracing: Python that reads values (``float(x.sum()) > 0``) sees this case's
        with quiet():
            gm = make_fx(torch.func.functionalize(fn), tracing_mode="real",
                         decomposition_table=dict(decomposition_table()),
                         _error_on_data_dependent_ops=False)(*args)
            gm.graph.eliminate_dead_code()  # what only Python's branches read
            gm.recompile()
            # in-place ops of torch's own decompositions (``add_`` in rms_norm) made pure
            gm = drop_dead_mutations(make_fx(torch.func.functionalize(gm),
                                             tracing_mode="real")(*args))
    return Graph(gm, placeholders, outputs)


# -- shapes without arithmetic -------------------------------------------------------
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
        if symbolic.leaves_torch(fake_error):
            raise InvalidArgument(_leaves_torch(reference, fake_error)) from fake_error
        if not symbolic.reads_values(fake_error):
            raise InvalidArgument(_cannot_run(reference, shapes, declared,
                                              fake_error)) from fake_error
        try:
            facts = _facts(reference, shapes, dtypes, "real")
        except InvalidArgument:
            raise
        except Exception as exc:
            raise InvalidArgument(_cannot_run(reference, shapes, declared, exc)) from exc
    reference.reads_values = symbolic.user_line(fake_error) or "a line that could not be found"
    return facts


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": .")


def _cannot_run(reference: Reference, shapes: Mapping[str, tuple[int, ...]], declared: str,
                exc: BaseException) -> str:
    where = symbolic.user_line(exc)
    given = ", ".join(f"{k}={tuple(v)}" for k, v in shapes.items())
    return (f"the reference {reference.describe()} cannot run on inputs of shapes {given}"
            f"{f' ({declared})' if declared else ''}: {_first_line(exc)}"
            f"{f' (at {where})' if where else ''}. Declare each input with the dimensions "
            "the reference expects (inputs whose sizes must agree share a dimension name), "
            "or bound dims= to sizes it accepts")


def _leaves_torch(reference: Reference, exc: BaseException) -> str:
    where = symbolic.user_line(exc)
    return (f"the reference {reference.describe()} leaves torch"
            f"{f' at {where}' if where else ''} ({_first_line(exc)}): the traced oracle "
            "follows torch operations only and cannot see what NumPy computes; write the "
            "reference with torch operations on its tensor inputs, returning tensors "
            "(torch.tanh(x), not np.tanh(x.numpy()))")


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
