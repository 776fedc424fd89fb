"""One capture for every size: symbolic graphs, their guards, and their
specialisation to a case's sizes.

A reference is traced once with symbolic sizes (``make_fx(...,
tracing_mode="symbolic")``): every input dimension is a symbol, except those
of size 1, which broadcasting makes special and which stay 1. Python that
reads a size (``x.shape[-1]``, ``if n > 64``) leaves a *guard*, a condition on
the sizes under which the graph is the one the reference would build; a case
whose sizes satisfy the guards of a graph already captured reuses it
(:meth:`Symbolic.admits`), and the graph's size arithmetic
(``aten.sym_size``, products of sizes for a ``view``) is replaced by the case's
integers (:meth:`Symbolic.specialize`), so that the interpreter walks the same
plain ATen graph that a capture on the case's own values gives.

The first pass applies the decompositions; a second pass functionalizes its
result, so that in-place ops written by torch itself (a decomposition of
``rms_norm`` adding ``eps`` in place, a batch norm updating its running
statistics) become pure ops, as the user's own in-place ops are.

Python that reads input *values* (``float(x.sum()) > 0``, ``x.item()``,
``x.tolist()``) cannot be traced symbolically: :func:`trace` raises
:class:`ReadsValues` naming the line of the reference that reads them, and
such a reference is captured again for every case, on the case's values.
"""

from __future__ import annotations

import contextlib
import linecache
import logging
import os
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
from torch import fx
from torch.fx.experimental import _config as fx_config
from torch.fx.experimental.proxy_tensor import make_fx
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
)
from torch.utils._python_dispatch import TorchDispatchMode
from torch.fx.experimental.symbolic_shapes import (
    SYMPY_INTERP,
    GuardOnDataDependentSymNode,
    free_unbacked_symbols,
)

__all__ = ["ReadsValues", "Symbolic", "drop_dead_mutations", "first_line", "leaves_torch",
           "leaving_torch", "quiet", "reads_values", "trace", "trace_on_values",
           "user_line"]

_TORCH_DIR = os.path.dirname(torch.__file__)
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))  # numoracle/


class ReadsValues(Exception):  # noqa: N818 - a finding, not an error of the caller
    """The reference's Python reads input values (or makes sizes from them);
    ``where`` is the line that does, ``file:line (code)`` (empty if unknown)."""

    def __init__(self, where: str, cause: str) -> None:
        super().__init__(f"{where}: {cause}" if where else cause)
        self.where = where
        self.cause = cause


#: what a run on fake tensors raises where the code reads input values
_READS_VALUES = (GuardOnDataDependentSymNode, DataDependentOutputException,
                 DynamicOutputShapeException)


def reads_values(exc: BaseException) -> bool:
    """Whether ``exc``, raised by a run on fake tensors, says the code read
    input values (a branch on them, ``.item()``, an output of value-dependent
    shape)."""
    return isinstance(exc, _READS_VALUES)


def leaves_torch(exc: BaseException) -> bool:
    """Whether ``exc``, raised by a run on fake tensors, says the code took a
    tensor out of torch (``.numpy()``)."""
    return "numpy" in str(exc).lower()


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message`` of ``exc``."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": .")


def leaving_torch(reference: str, exc: BaseException) -> str:
    """The refusal of ``reference`` (its name), which took a tensor out of
    torch where it raised ``exc``."""
    where = user_line(exc)
    return (f"the reference {reference} leaves torch"
            f"{f' at {where}' if where else ''} ({first_line(exc)}): the traced oracle "
            "follows torch operations only and cannot see what NumPy computes; write the "
            "reference with torch operations on its tensor inputs, returning tensors "
            "(torch.tanh(x), not np.tanh(x.numpy()))")


def _users(frames: Sequence[traceback.FrameSummary]) -> list[traceback.FrameSummary]:
    return [f for f in frames
            if not f.filename.startswith((_TORCH_DIR, _OWN_DIR)) and "<frozen" not in f.filename
            and not f.filename.startswith("<")]


def user_line(exc: BaseException | None = None,
              frames: Sequence[traceback.FrameSummary] | None = None) -> str:
    """``file:line (code)`` of the innermost frame outside torch and numoracle
    in ``exc``'s traceback (or in ``frames``): the reference's own line; empty
    when there is none."""
    if frames is None:
        frames = traceback.extract_tb(exc.__traceback__) if exc is not None else []
    found = _users(frames)
    if not found:
        return ""
    f = found[-1]
    code = (f.line or linecache.getline(f.filename, f.lineno or 0)).strip()
    return f"{f.filename}:{f.lineno}" + (f" ({code!r})" if code else "")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """torch's loggers silenced: a fake-tensor run that fails logs the whole
    traceback at ERROR level before raising it, and the caller reports the
    failure in its own words."""
    loggers = [logging.getLogger(n) for n in list(logging.root.manager.loggerDict)
               if n == "torch" or n.startswith("torch.")]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, before, strict=True):
            lg.disabled = was


def _is_size(val: Any) -> bool:
    """Whether a node's value is a size or a number made from sizes."""
    if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if isinstance(val, (list, tuple)):
        return bool(val) and all(_is_size(v) or isinstance(v, (int, float, bool)) for v in val)
    return isinstance(val, (int, float, bool)) and not isinstance(val, torch.Tensor)


def _concrete(val: Any, binding: Mapping[sympy.Symbol, sympy.Integer]) -> Any:
    """``val`` (a symbolic number, or a list of them) at the sizes of ``binding``."""
    if isinstance(val, (list, tuple)):
        return type(val)(_concrete(v, binding) for v in val)
    if not isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return val
    expr = sympy.sympify(val.node.expr).xreplace(binding)
    if expr.free_symbols:
        raise ValueError(f"size {val} depends on {expr.free_symbols}, which no input binds")
    kind = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}[type(val)]
    return kind(expr)


@dataclass(frozen=True)
class Symbolic:
    """A graph captured with symbolic sizes: the module, the guards under which
    it is the reference's graph (compiled over ``L['t0']``, ... the call's
    arguments), where each size symbol is read (argument, dimension), and the
    shape of each argument with its fixed sizes (ints) and symbols (None):
    the guards speak of symbols only."""

    module: fx.GraphModule
    guards: Any = field(repr=False)
    globals: Mapping[str, Any] = field(repr=False)
    symbols: tuple[tuple[int, int, sympy.Symbol], ...]
    shapes: tuple[tuple[int | None, ...], ...]

    def admits(self, args: Sequence[torch.Tensor]) -> bool:
        """Whether this graph is the reference's graph for ``args``."""
        if len(args) != len(self.shapes) or any(
                a.dim() != len(s) or any(f is not None and f != n for f, n in zip(s, a.shape))
                for a, s in zip(args, self.shapes)):
            return False
        names = {f"t{i}": a for i, a in enumerate(args)}
        try:
            return bool(eval(self.guards, dict(self.globals), {"L": names}))  # noqa: S307
        except (IndexError, TypeError, ValueError):  # ranks differ
            return False

    def specialize(self, args: Sequence[torch.Tensor]) -> fx.GraphModule:
        """The graph at the sizes of ``args`` (which it :meth:`admits`): each
        size node replaced by its integer, every ATen call kept."""
        binding = {s: sympy.Integer(int(args[i].shape[d])) for i, d, s in self.symbols}
        graph = fx.Graph()
        env: dict[fx.Node, Any] = {}
        for node in self.module.graph.nodes:
            if node.op == "call_function" and _is_size(node.meta.get("val")):
                env[node] = _concrete(node.meta["val"], binding)
            elif node.op == "output":
                graph.output(fx.node.map_arg(node.args[0], lambda n: env[n]))
            else:
                env[node] = graph.node_copy(node, lambda n: env[n])
        return fx.GraphModule(self.module, graph)


def _fixed_size(size: Any) -> int | None:
    """A placeholder's size as :attr:`Symbolic.shapes` keeps it: an int where the
    trace fixed it (a plain int, or a symbol the trace made a constant: Python that
    turned the size into a float, ``math.sqrt(q.shape[-1])``, leaves no guard on it,
    as torch expects the caller to compare such sizes), None where it is a symbol."""
    if not isinstance(size, torch.SymInt):
        return int(size)
    expr = size.node.expr  # (with the trace's replacements: a constant where one fixed it)
    return int(expr) if getattr(expr, "is_number", False) else None


def _placeholders(gm: fx.GraphModule) -> list[Any]:
    return [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]


def _guard_code(gm: fx.GraphModule) -> str:
    fakes = _placeholders(gm)
    env = next((f.fake_mode.shape_env for f in fakes if isinstance(f, torch.Tensor)), None)
    if env is None:
        return "True"
    return env.produce_guards_expression(fakes) or "True"


class _ValueRead(Exception):  # noqa: N818 - raised where the reference reads a value
    pass


class _NoValueReads(TorchDispatchMode):
    """Raises where the traced code reads a tensor's value as a Python number
    (``.item()``, ``float(t)``, ``t.tolist()``), so that its traceback names
    the line."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        if func is torch.ops.aten._local_scalar_dense.default:
            raise _ValueRead("a value read as a Python number")
        return func(*args, **(kwargs or {}))


def _reads_nothing(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: torch.Tensor) -> Any:
        with _NoValueReads():
            return fn(*args)
    return run


def _sizes_from_values(gm: fx.GraphModule) -> bool:
    """Whether a node of ``gm`` has sizes made from values (unbacked symbols)."""
    return any(n.meta.get("val") is not None and free_unbacked_symbols(n.meta["val"])
               for n in gm.graph.nodes)


def _mutates(node: fx.Node) -> bool:
    target = node.target
    return (node.op == "call_function" and isinstance(target, torch._ops.OpOverload)
            and target._schema.is_mutable)


def drop_dead_mutations(gm: fx.GraphModule) -> fx.GraphModule:
    """``gm`` without the in-place ops that functionalization leaves on
    tensors it does not track (copies of a module's buffers: a batch norm's
    ``num_batches_tracked += 1``) where nothing reads the tensor after them:
    such an op changes no output. An in-place op whose tensor is read later,
    directly or through a view, is kept (and refused by the interpreter)."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    changed = True
    while changed:
        changed = False
        for node in reversed(list(gm.graph.nodes)):
            if not _mutates(node) or node.users or not node.args \
                    or not isinstance(node.args[0], fx.Node) \
                    or node.args[0].op != "call_function":
                continue
            others = [u for u in node.args[0].users if u is not node]
            if all(order[u] < order[node] and not (
                    isinstance(u.target, torch._ops.OpOverload) and u.target.is_view)
                   for u in others):
                gm.graph.erase_node(node)
                changed = True
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def trace(fn: Callable[..., Any], args: Sequence[torch.Tensor],
          decompositions: Mapping[Any, Callable[..., Any]]) -> Symbolic:
    """``fn`` on ``args`` as a :class:`Symbolic` graph: traced with symbolic
    sizes and ``decompositions``, then functionalized.

    Raises
    ------
    ReadsValues
        Where ``fn``'s Python reads input values (a branch, ``.item()``).
    """
    # the fake-tensor cache pays off over many traces of one graph, not here
    with quiet(), fx_config.patch(use_duck_shape=False), \
            torch._dynamo.config.patch(fake_tensor_cache_enabled=False):
        try:
            first = make_fx(_reads_nothing(fn), tracing_mode="symbolic",
                            decomposition_table=dict(decompositions),
                            _allow_non_fake_inputs=True)(*args)
        except (*_READS_VALUES, _ValueRead) as exc:
            raise ReadsValues(user_line(exc), str(exc).split("\n")[0]) from exc
        if _sizes_from_values(first):
            raise ReadsValues("", "sizes made from input values")
        code = _guard_code(first)
        gm = first
        if any(_mutates(n) for n in first.graph.nodes):  # a pure graph needs no second pass
            gm = drop_dead_mutations(make_fx(torch.func.functionalize(first),
                                             tracing_mode="symbolic",
                                             _allow_non_fake_inputs=True)(*args))
            code = f"({code}) and ({_guard_code(gm)})"
    symbols, shapes = [], []
    for i, fake in enumerate(_placeholders(gm)):
        shapes.append(tuple(_fixed_size(n) for n in fake.shape))
        for d, size in enumerate(fake.shape):
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                symbols.append((i, d, size.node.expr))
    return Symbolic(gm, compile(code, "<guards>", "eval"), SYMPY_INTERP, tuple(symbols),
                    tuple(shapes))


def trace_on_values(fn: Callable[..., Any], args: Sequence[torch.Tensor],
                    decompositions: Mapping[Any, Callable[..., Any]]) -> fx.GraphModule:
    """``fn`` traced on the tensors ``args`` themselves (Python that reads their
    values takes their branch) by :func:`trace`'s passes: the decompositions, then
    functionalization where the graph mutates, so that its graph is the one a
    symbolic capture of ``fn`` specialises to these sizes. ``args`` are left as they
    are (the trace runs on copies: in-place code changes those)."""
    with quiet():
        first = make_fx(fn, tracing_mode="real", decomposition_table=dict(decompositions),
                        _error_on_data_dependent_ops=False)(*(a.clone() for a in args))
        first.graph.eliminate_dead_code()  # what only Python's branches read
        first.recompile()
        if not any(_mutates(n) for n in first.graph.nodes):  # a pure graph needs no second pass
            return first
        return drop_dead_mutations(make_fx(torch.func.functionalize(first),
                                           tracing_mode="real")(*(a.clone() for a in args)))
