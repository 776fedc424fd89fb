"""Capture of a PyTorch reference as an ATen graph (DESIGN §7).

A reference ``f(*inputs, **params)`` (a plain function or an ``nn.Module``,
whose parameters become inputs) is traced once with symbolic sizes and the
graph reused for every case whose sizes its guards admit (:mod:`.symbolic`):
in-place ops and aliasing become pure ops, and composite ops are lowered to
ATen primitives. The decomposition table is torch's core ATen table minus
:data:`KEEP`, the ops the rule library bounds as a whole because a composition
of their pieces would bound them loosely (a contraction, a softmax, a
normalisation, a pool, a loss), plus the splits as slices.

A reference whose Python reads input values is traced on each case's own
values (:func:`~.symbolic.trace_on_values`), so that each case takes the branch
its values take; :attr:`Reference.reads_values` names the line. A reference that
symbolic sizes cannot trace for another reason is traced on the case's values and
kept per signature. A capture on values traces the function a symbolic capture
traces, with the same passes, so that a case's graph is the same whichever
capture serves it (which one does depends on the shapes seen before).

With gradients, the graph is that of the reference's vector-Jacobian product:
it takes the inputs and one cotangent per floating-point output
(``grad_<output>``) and returns the outputs, then ``grad_<input>`` for each
input named in ``grads``.

``cache=False`` (:class:`Reference`) traces every case again on its values.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
from torch import fx
from torch.nn.attention import SDPBackend, sdpa_kernel

from ...errors import InvalidArgument
from .symbolic import (
    ReadsValues,
    Symbolic,
    leaves_torch,
    leaving_torch,
    quiet,
    trace_on_values,
)
from .symbolic import trace as trace_symbolic

__all__ = ["KEEP", "Graph", "Reference", "capture", "decomposition_table", "output_names",
           "CACHE_SIZE"]

#: ATen ops (overload packets) kept whole in the captured graph: each has a sharp
#: rule in the library; torch's core decompositions of them are not applied
KEEP: tuple[str, ...] = (
    # contractions and convolutions, forward and backward
    "aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.convolution",
    "aten.convolution_backward",
    # softmax family
    "aten._softmax", "aten._safe_softmax", "aten._log_softmax", "aten._softmax_backward_data",
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
        Reuse graphs (symbolic ones across sizes); False traces every case
        again on its values.
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
        #: seconds the last symbolic capture took, and per region of shapes
        #: (:func:`_pattern`) the seconds spent capturing on values since
        self.symbolic_seconds: float | None = None
        self._renting: dict[tuple[Any, ...], float] = {}
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

    def joint(self, out_names: Sequence[str]) -> Callable[..., tuple[torch.Tensor, ...]]:
        """``g(*inputs, *cotangents) -> (*outputs, *grads)``: the function captured
        when gradients are asked for (``out_names``: the outputs with cotangents).

        The gradients are taken with ``torch.autograd.grad``, which a trace with
        symbolic sizes follows (``torch.func.vjp`` makes their sizes constants), in
        a capture on values too: both give one graph (:func:`capture`); in-place code
        is functionalized after the trace.
        """
        names, grads = self.names, self.grads

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
        return through_autograd

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
    #: specialised from a symbolic capture (else captured on one case's values)
    symbolic: bool = False

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
        graph = _traced(reference, tensors, cots, symbolic=kept and _buys(reference, tensors,
                                                                          cots))
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


def _pattern(tensors: Mapping[str, torch.Tensor], cots: Mapping[str, torch.Tensor]
             ) -> tuple[Any, ...]:
    """Which sizes are 1 (the sizes a symbolic capture keeps fixed): the region
    of shapes that one more symbolic capture would serve."""
    return tuple((n, tuple(d == 1 for d in t.shape))
                 for n, t in (*tensors.items(), *sorted(cots.items())))


def _buys(reference: Reference, tensors: Mapping[str, torch.Tensor],
          cots: Mapping[str, torch.Tensor]) -> bool:
    """Whether a shape no kept graph admits gets a symbolic capture (its
    region's graph for every later size) or one on its own values (kept for
    its shape): the first capture is symbolic; after it, a region's shapes are
    captured on their values until those captures have cost as much as a
    symbolic one did (a symbolic capture costs several captures on values, and
    a region may see only one shape)."""
    if reference.symbolic_seconds is None:
        return True
    return reference._renting.get(_pattern(tensors, cots), 0.0) >= reference.symbolic_seconds


def _traced(reference: Reference, tensors: Mapping[str, torch.Tensor],
            cots: dict[str, torch.Tensor], *, symbolic: bool) -> Graph:
    """A new capture: ``symbolic`` where the reference allows it (kept for
    later sizes), else on this case's values."""
    t0 = time.perf_counter()
    graph = _capture_new(reference, tensors, cots, symbolic=symbolic)
    spent = time.perf_counter() - t0
    if graph.symbolic:
        reference.symbolic_seconds = spent
    elif not symbolic and reference.cache and reference.reads_values is None:
        region = _pattern(tensors, cots)
        reference._renting[region] = reference._renting.get(region, 0.0) + spent
    return graph


def _capture_new(reference: Reference, tensors: Mapping[str, torch.Tensor],
                 cots: dict[str, torch.Tensor], *, symbolic: bool) -> Graph:
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
        args = [*tensors.values(), *(cots[w] for w in want)]
        placeholders = reference.names + want
        outputs = out_names + tuple(f"grad_{g}" for g in reference.grads)
    else:
        fn, args = reference.forward(), list(tensors.values())
        placeholders, outputs = reference.names, out_names
    reference.captures += 1
    # attention as its math (matmuls, softmax), not a fused kernel whose backward has no rule
    with sdpa_kernel(SDPBackend.MATH):
        if symbolic and reference.reads_values is None:
            try:
                sym = trace_symbolic(fn, args, decomposition_table())
            except ReadsValues as exc:
                reference.reads_values = exc.where or "a line that could not be found"
            except Exception as exc:  # noqa: BLE001 - symbolic sizes unsupported: this case's, kept
                reference.symbolic_seconds = math.inf  # not again: on values from now on
                if leaves_torch(exc):
                    raise InvalidArgument(leaving_torch(reference.describe(), exc)) from exc
            else:
                if len(reference._symbolic) >= CACHE_SIZE:
                    reference._symbolic.clear()
                reference._symbolic.append((placeholders, outputs, want, sym))
                return Graph(sym.specialize(args), placeholders, outputs, symbolic=True)
        # real tracing: Python that reads values (``float(x.sum()) > 0``) sees this case's;
        # the symbolic capture's function and passes, so that the graph is the same
        gm = trace_on_values(fn, args, decomposition_table())
    return Graph(gm, placeholders, outputs)
