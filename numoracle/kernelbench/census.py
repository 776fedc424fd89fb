"""Which problems the traced oracle can judge: the ATen ops behind each problem.

:func:`problem_ops` captures a problem's forward pass at its official shapes
without running it (``make_fx`` in fake tracing mode over a model built on the
``meta`` device, so a 16384×16384 weight costs nothing) and lists the ATen ops
of the graph. :func:`classify` sorts a problem into one of three answers:

``judged``
    every op of the graph has a rule in the traced oracle's table;
``abstains``
    some ops have none: they are named (the oracle refuses an op without a
    rule, never approximates it);
``refused``
    the problem cannot be judged whatever the rules: the file does not load,
    the graph cannot be captured, or the model draws random numbers
    (``bernoulli``: live dropout) that no init argument switches off.

The graph is captured with the traced oracle's own decomposition table
(:func:`decompositions`), so the ops listed are those its interpreter meets.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from .problem import BadFile, Problem, load_problem

__all__ = ["ProblemOps", "problem_ops", "classify", "RANDOM_OPS", "STRUCTURAL_OPS",
           "decompositions"]

#: ATen ops that draw random numbers: a graph with one is not a function of its inputs
RANDOM_OPS = frozenset({"aten.bernoulli.p", "aten.bernoulli.default", "aten.native_dropout.default",
                        "aten.rand.default", "aten.randn.default", "aten.rand_like.default",
                        "aten.randn_like.default", "aten.uniform.default",
                        "aten.normal.default"})
#: graph nodes that are Python's, not ATen's (a tuple's item)
STRUCTURAL_OPS = frozenset({"<built-in function getitem>"})


def decompositions() -> Mapping[Any, Callable[..., Any]] | None:
    """The traced oracle's decomposition table, or None where it has none."""
    try:
        _capture = importlib.import_module("numoracle.oracle.traced.capture")
    except ImportError:
        return None
    table = getattr(_capture, "decomposition_table", None)
    return dict(table()) if callable(table) else None


@dataclass
class ProblemOps:
    """The ATen ops of one problem's forward pass, and what the census says of it."""

    problem: str
    ops: list[str] = field(default_factory=list)
    status: str = ""
    missing: list[str] = field(default_factory=list)
    reason: str = ""
    float64_bytes: int = 0
    output_dtypes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"problem": self.problem, "status": self.status, "ops": self.ops,
                "missing": self.missing, "reason": self.reason,
                "float64_bytes": self.float64_bytes, "output_dtypes": self.output_dtypes}


def _meta_inputs(problem: Problem, sizes: Mapping[str, Any] | None) -> list[Any]:
    specs = problem.input_specs(sizes)
    values = None
    out: list[Any] = []
    for i, spec in enumerate(specs):
        if spec.dtype is None:
            values = problem.inputs(sizes) if values is None else values
            out.append(values[i])
        else:
            out.append(torch.empty(spec.shape, dtype=spec.dtype, device="meta"))
    return out


def problem_ops(problem: Problem, *, sizes: Mapping[str, Any] | None = None,
                table: Mapping[Any, Callable[..., Any]] | None = None) -> ProblemOps:
    """Capture ``problem``'s forward pass at ``sizes`` (official where None) in
    fake mode and list its ATen ops.

    The model is built on the ``meta`` device and left in train mode, as
    KernelBench runs it; its parameters and buffers are inputs of the graph
    (``torch.func.functional_call``), so a buffer update (BatchNorm's running
    statistics) is captured as the graph's own.
    """
    result = ProblemOps(problem.name)
    inputs = _meta_inputs(problem, sizes)
    with torch.device("meta"):
        model = problem.model(sizes)
    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}

    def forward(state: dict[str, torch.Tensor], *xs: Any) -> Any:
        return torch.func.functional_call(model, state, xs)

    graph = make_fx(torch.func.functionalize(forward), tracing_mode="fake",
                    decomposition_table=table, _allow_non_fake_inputs=True)(state, *inputs)
    ops = {str(n.target) for n in graph.graph.nodes if n.op == "call_function"}
    result.ops = sorted(ops - STRUCTURAL_OPS)
    nbytes = sum(8 * t.numel() for t in state.values() if t.is_floating_point())
    nbytes += sum(8 * x.numel() for x in inputs if isinstance(x, torch.Tensor))
    outs = next(n for n in graph.graph.nodes if n.op == "output").args[0]
    for node in outs if isinstance(outs, (list, tuple)) else [outs]:
        val = getattr(node, "meta", {}).get("val")
        if isinstance(val, torch.Tensor):
            nbytes += 8 * val.numel()
            result.output_dtypes.append(str(val.dtype).replace("torch.", ""))
    result.float64_bytes = nbytes
    return result


def classify(path: Any, rules: Mapping[str, Any],
             table: Mapping[Any, Callable[..., Any]] | None = None) -> ProblemOps:
    """The census entry of the problem file at ``path`` under the rule table ``rules``."""
    name = getattr(path, "stem", str(path))
    try:
        problem = load_problem(path)
    except BadFile as exc:
        return ProblemOps(name, status="refused", reason=f"file: {exc}")
    notes = []
    try:
        result = problem_ops(problem, table=table)
        if set(result.ops) & RANDOM_OPS and problem.dropout_off():
            off = problem.dropout_off()
            result = problem_ops(problem, sizes=off, table=table)
            notes.append("judged with " + ", ".join(f"{k}=0" for k in off)
                         + " (dropout off: train mode's masks are random)")
    except Exception as exc:  # noqa: BLE001 - a graph that cannot be captured is a finding
        first = str(exc).splitlines()[0] if str(exc) else ""
        return ProblemOps(problem.name, status="refused",
                          reason=f"capture: {type(exc).__name__}: {first[:160]}")
    result.reason = "; ".join(notes)
    random = sorted(set(result.ops) & RANDOM_OPS)
    # the outputs of the graph's own mutations (copy_ into a buffer) are not the model's results
    result.missing = sorted(op for op in result.ops
                            if op not in rules and op not in RANDOM_OPS)
    if random:
        result.status = "refused"
        result.reason = (f"draws random numbers ({', '.join(random)}) and no init argument "
                         "switches them off")
    elif result.missing:
        result.status = "abstains"
    else:
        result.status = "judged"
    return result
