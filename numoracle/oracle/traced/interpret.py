"""The bound interpreter: a captured ATen graph evaluated over tracked arrays.

Every placeholder becomes an exact input (:func:`~numoracle.oracle.tracked.exact`
for floating-point values, a NumPy array for integer and boolean ones); every
``call_function`` node calls the rule of its ATen op
(:func:`~numoracle.oracle.traced.rules.lookup`) with the node's arguments, its
earlier nodes' results in their place; ``operator.getitem`` picks one result
of a multi-output op. The graph is walked once *before* any arithmetic, so a
reference that calls an op without a rule is refused by name
(:class:`~numoracle.oracle.traced.rules.NoRule`) and never half evaluated.

Rules return their results rounded in the model's accumulation format. Where
the storage format is narrower than the accumulation format, the rounding to
storage follows the claimed policy (:class:`~numoracle.oracle.traced.rules.Claims`):

* ``per-op``: every floating-point result of every op is rounded to the storage
  format (:func:`~numoracle.oracle.tracked.store`), as eager torch does in bf16
  and fp16, where every op reads and writes tensors of the storage dtype; an op
  that only moves elements (a view, an ``alias``, a copy, a slice:
  :func:`~numoracle.oracle.traced.rules.moves`) is not rounded again, as its
  elements are its operand's, rounded once where they were computed;
* ``fused``: intermediates stay in the accumulation format, and only the
  graph's outputs are rounded to the storage format.

A kernel that keeps intermediates wider than eager passes under either claim
where its outputs are within both bounds; a fused kernel judged with the per-op
claim is judged against a looser bound than it meets, never a tighter one it
cannot. Where storage and accumulation formats agree (fp32 in fp32, fp64), the
accumulation rounding already is the storage rounding and nothing more is added.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import fx

from ...errors import InvalidArgument
from ..tracked import Tracked, exact, store
from ..xp import on_device, to_numpy
from . import library  # noqa: F401 - registers the rules
from .capture import Graph
from .library.views import handed_over, identity_rule, viewed
from .rules import IN_PART, Call, Rule, RuleContext, lookup, moves

__all__ = ["evaluate", "rules_of", "stores_per_op"]


def rules_of(graph: Graph) -> dict[fx.Node, Rule]:
    """The rule of every ATen call of ``graph``, found before any arithmetic.

    Raises
    ------
    NoRule
        Naming the first ATen op of the graph without a rule.
    InvalidArgument
        For a node that calls something other than an ATen op or ``getitem``.
    """
    found: dict[fx.Node, Rule] = {}
    for node in graph.module.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        if not isinstance(node.target, torch._ops.OpOverload):
            raise InvalidArgument(f"the captured graph calls {node.target!r}, which is not an "
                                  "ATen op; the traced oracle evaluates ATen graphs only")
        found[node] = lookup(node.target)
    return found


def stores_per_op(ctx: RuleContext) -> bool:
    """Whether every op's result is rounded to the storage format
    (:meth:`RuleContext.stores_per_op`)."""
    return ctx.stores_per_op()


def _to_value(a: Any, ctx: RuleContext) -> Any:
    """A tensor constant of the graph (or an input) as the rules take it: a
    floating-point one exact in the context's namespace (on its device), an integer
    or boolean one a host array."""
    if isinstance(a, torch.Tensor):
        if a.is_floating_point():
            return exact(ctx.array(a.detach().to(torch.float64)))
        return a.detach().cpu().numpy()
    if hasattr(a, "dtype") and hasattr(a, "shape"):  # an array of any namespace
        if str(a.dtype).startswith("float"):
            return exact(ctx.array(a))
        return np.asarray(to_numpy(a))
    return a


def _stored(result: Any, ctx: RuleContext) -> Any:
    if isinstance(result, Tracked):
        return store(result, ctx.model)
    if isinstance(result, (tuple, list)):
        return type(result)(_stored(r, ctx) for r in result)
    return result


def _load(env: dict[fx.Node, Any], a: Any) -> Any:
    return fx.node.map_arg(a, lambda n: env[n])


def evaluate(graph: Graph, inputs: Mapping[str, Any], ctx: RuleContext,
             outputs: Sequence[str] = (), *, consume: bool = False) -> dict[str, Any]:
    """Evaluate ``graph`` on ``inputs`` (arrays of any namespace, or tensors, by
    placeholder name) under ``ctx``, in the context's namespace and on its device
    (:attr:`RuleContext.xp`); returns the requested outputs (all when empty) by
    name: a :class:`Tracked` for each floating-point output, a NumPy array for an
    integer one.

    Only the nodes the requested outputs depend on are evaluated; a value no later
    node reads is dropped as the evaluation goes. ``consume`` (``inputs`` a dict
    the caller hands over): each input is popped from it as it is bound, so that,
    the caller keeping no other reference, its memory is freed after its last
    reader too.
    """
    with on_device(ctx.xp, ctx.device):
        return _evaluate(graph, inputs, ctx, outputs, consume)


def _evaluate(graph: Graph, inputs: Mapping[str, Any], ctx: RuleContext,
              outputs: Sequence[str], consume: bool = False) -> dict[str, Any]:
    rules = rules_of(graph)
    want = tuple(outputs) or graph.outputs
    unknown = [o for o in want if o not in graph.outputs]
    if unknown:
        raise InvalidArgument(f"outputs {unknown} are not outputs of the graph; it has "
                              f"{graph.outputs}")
    nodes = list(graph.module.graph.nodes)
    out_node = nodes[-1]
    flat_out = _flatten(out_node.args[0])
    if len(flat_out) != len(graph.outputs):
        raise InvalidArgument(f"the graph returns {len(flat_out)} values for the outputs "
                              f"{graph.outputs}")
    targets = {graph.outputs.index(o): flat_out[graph.outputs.index(o)] for o in want}
    needed = _needed([t for t in targets.values() if isinstance(t, fx.Node)])
    per_op = stores_per_op(ctx)
    narrower = ctx.model.storage.t < ctx.model.accumulate.t
    env: dict[fx.Node, Any] = {}
    placeholders = iter(graph.inputs)
    kept = set(targets.values())
    readers = _last_readers(nodes, needed)
    spent = _last_uses(nodes, readers, kept)
    in_part = _read_in_part(nodes, needed, kept)
    deferred = set(in_part.values())
    for node in nodes:
        for gone in spent.get(node, ()):  # values no later node reads: freed as it runs
            env.pop(gone, None)
        if node.op == "placeholder":
            name = next(placeholders)
            if node in needed:
                if name not in inputs:
                    raise InvalidArgument(f"input {name!r} is missing; the graph takes "
                                          f"{graph.inputs}")
                given = inputs.pop(name) if consume else inputs[name]  # type: ignore[attr-defined]
                env[node] = _to_value(given, ctx)
                del given
        elif node not in needed:
            continue
        elif node.op == "get_attr":
            env[node] = _to_value(getattr(graph.module, str(node.target)), ctx)
        elif node.op == "call_function":
            args, kwargs = _load(env, node.args), _load(env, node.kwargs)
            if node.target is operator.getitem:
                env[node] = args[0][args[1]]
                continue
            rule = rules[node]
            if node in deferred:  # (its one reader evaluates it, in part)
                env[node] = _Deferred(args, kwargs)
                continue
            if node in in_part:
                env[node] = _read_part(ctx, node, in_part[node], rules, args, kwargs, per_op)
                continue
            if rule is identity_rule and _last_read(node, readers, kept):
                result = handed_over(ctx, args[0])  # (a clone or detach of a dying value)
            elif rule is identity_rule and _viewed(node, kept):
                result = viewed(ctx, args[0])  # (an alias of a value read later)
            else:
                result = rule(ctx, *args, **kwargs)
            # (an op that only moves elements rounds nothing: its operand was rounded)
            env[node] = _stored(result, ctx) if per_op and not moves(node.target) else result
    done: dict[str, Any] = {}
    for i, node in targets.items():
        value = env[node] if isinstance(node, fx.Node) else _to_value(node, ctx)
        if isinstance(value, Tracked) and narrower and not per_op:
            value = store(value, ctx.model)  # fused: one rounding to storage, at the end
        done[graph.outputs[i]] = value
    return done


class _Deferred:
    """The arguments of a call that its one reader evaluates in part (:data:`IN_PART`)."""

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.args, self.kwargs = args, kwargs


def _read_in_part(nodes: Sequence[fx.Node], needed: set[fx.Node], kept: set[Any]
                  ) -> dict[fx.Node, fx.Node]:
    """Reader -> producer, for each reader with a rule of :data:`IN_PART` whose first
    operand is the producer's result, read by it alone (once, and not an output)."""
    found: dict[fx.Node, fx.Node] = {}
    for node in nodes:
        if node not in needed or node.op != "call_function" or not node.args:
            continue
        first = node.args[0]
        if (isinstance(first, fx.Node) and first.op == "call_function" and first not in kept
                and (str(first.target), str(node.target)) in IN_PART
                and [u for u in first.users if u in needed] == [node]
                and sum(a is first for a in _flatten([*node.args, *node.kwargs.values()])) == 1):
            found[node] = first
    return found


def _read_part(ctx: RuleContext, node: fx.Node, producer: fx.Node, rules: dict[fx.Node, Rule],
               args: Any, kwargs: Any, per_op: bool) -> Any:
    """``node``'s results by its :data:`IN_PART` rule, its first operand the deferred
    call of ``producer``; where that rule declines, the producer's rule and then
    ``node``'s, as they run elsewhere."""
    call = args[0]

    def finish(result: Any) -> Any:
        return _stored(result, ctx) if per_op and not moves(producer.target) else result
    got = IN_PART[(str(producer.target), str(node.target))](
        ctx, Call(call.args, call.kwargs, finish), *args[1:], **kwargs)
    if got is None:
        got = rules[node](ctx, finish(rules[producer](ctx, *call.args, **call.kwargs)),
                          *args[1:], **kwargs)
    return _stored(got, ctx) if per_op and not moves(node.target) else got


def _last_readers(nodes: Sequence[fx.Node], needed: set[fx.Node]) -> dict[fx.Node, fx.Node]:
    """For each value an evaluated node reads, the last evaluated node that reads it."""
    last: dict[fx.Node, fx.Node] = {}
    for node in nodes:
        if node in needed:
            for arg in node.all_input_nodes:
                last[arg] = node
    return last


def _last_read(node: fx.Node, readers: dict[fx.Node, fx.Node], kept: set[Any]) -> bool:
    """Whether ``node`` reads one value, computed by an earlier node (not an input:
    the caller's arrays), that no later node reads and that is not an output."""
    args = node.all_input_nodes
    return (len(args) == 1 and args[0].op == "call_function" and args[0] not in kept
            and readers.get(args[0]) is node)


def _viewed(node: fx.Node, kept: set[Any]) -> bool:
    """Whether ``node`` is an ``alias`` (a view in ATen, the same elements as its
    operand) of a value an earlier node computed that is not an output: then it may
    view its operand's arrays though later nodes read them too
    (:func:`~.library.views.viewed`), as the results of ``view``, ``expand`` or
    ``permute`` do, for no rule writes into its operands (the graph is functional,
    every rule computes into arrays of its own, and a rounding in place copies an
    array that is a view). An alias of an input (the caller's arrays) or of an
    output is still copied."""
    args = node.all_input_nodes
    return (node.target is torch.ops.aten.alias.default and len(args) == 1
            and args[0].op == "call_function" and args[0] not in kept)


def _last_uses(nodes: Sequence[fx.Node], last: dict[fx.Node, fx.Node], kept: set[Any]
               ) -> dict[fx.Node, list[fx.Node]]:
    """For each evaluated node, the earlier nodes whose values no node after it reads
    (``last``: :func:`_last_readers`; not outputs, ``kept``): their values are dropped
    once it has run, so that the evaluation holds the values and radii still to be
    read, not every intermediate of the graph at once."""
    after: dict[fx.Node, list[fx.Node]] = {}
    order = {node: i for i, node in enumerate(nodes)}
    for value, user in last.items():
        if value in kept:
            continue
        following = nodes[order[user] + 1] if order[user] + 1 < len(nodes) else None
        if following is not None:
            after.setdefault(following, []).append(value)
    return after


def _flatten(a: Any) -> list[Any]:
    if isinstance(a, (tuple, list)):
        return [x for item in a for x in _flatten(item)]
    return [a]


def _needed(roots: Sequence[fx.Node]) -> set[fx.Node]:
    """The nodes ``roots`` depend on, themselves included."""
    seen: set[fx.Node] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        stack.extend(node.all_input_nodes)
    return seen
