"""Capture of PyTorch references as ATen graphs: pure graphs from in-place and
aliasing code, kept ops, output names, module parameters, gradients, caching."""

from __future__ import annotations

import operator

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from numoracle.errors import InvalidArgument
from numoracle.oracle.formats import quantize
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.capture import (
    KEEP,
    Reference,
    capture,
    decomposition_table,
    output_names,
)
from numoracle.oracle.traced.facts import shape_facts
from numoracle.oracle.traced.interpret import evaluate
from numoracle.oracle.traced.rules import Claims, RuleContext


def _targets(graph) -> list[str]:
    return [str(n.target) for n in graph.module.graph.nodes
            if n.op == "call_function" and n.target is not operator.getitem]


def _inputs(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def test_keep_ops_are_not_decomposed():
    kept = {str(getattr(op, "overloadpacket", op)) for op in decomposition_table()}
    assert not kept & set(KEEP)
    assert "aten.sum" in KEEP and "aten._softmax" in KEEP
    # and the table still lowers composite ops (gelu's backward, for one)
    assert any("gelu_backward" in str(op) for op in decomposition_table())


def test_in_place_and_aliasing_code_becomes_pure():
    def f(x, y):
        z = x.clone()
        z.mul_(2)
        v = z.view(-1)  # an alias: writing through it changes z
        v.add_(y.reshape(-1))
        return z
    ref = Reference(f, ("x", "y"))
    x, y = _inputs((2, 3), (2, 3))
    g = capture(ref, {"x": x, "y": y})
    ops = _targets(g)
    assert not [o for o in ops if o.split(".")[1].endswith("_") or "copy_" in o], ops
    out = g.module(torch.tensor(x), torch.tensor(y))
    np.testing.assert_array_equal(out[0].numpy(), 2 * x + y)


def test_softmax_is_captured_whole():
    g = capture(Reference(lambda x: torch.softmax(x, -1), ("x",)), {"x": _inputs((2, 5))[0]})
    assert _targets(g) == ["aten._softmax.default"]


@pytest.mark.parametrize(("result", "names"), [
    (torch.zeros(1), ("out",)),
    ((torch.zeros(1), torch.zeros(2)), ("out0", "out1")),
    ({"y": torch.zeros(1), "state": torch.zeros(2)}, ("y", "state")),
])
def test_output_names(result, names):
    assert output_names(result) == names


@pytest.mark.parametrize("result", [3.0, (torch.zeros(1), 2), {"a b": torch.zeros(1)}, ()])
def test_output_names_refuses_other_results(result):
    with pytest.raises(InvalidArgument, match="must return a tensor"):
        output_names(result)


def test_module_parameters_become_inputs():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    ref = Reference(net, ("input",))
    assert ref.names == ("input", "layer0_weight", "layer0_bias", "layer2_weight", "layer2_bias")
    assert ref.parameter_shapes()["layer2_weight"] == (2, 4)
    values = dict(zip(ref.names, _inputs((5, 3), (4, 3), (4,), (2, 4), (2,)), strict=True))
    g = capture(ref, values)
    got = g.module(*(torch.tensor(values[n]) for n in g.inputs))[0]
    w0, b0, w2, b2 = (values[n] for n in ref.names[1:])
    want = np.tanh(values["input"] @ w0.T + b0) @ w2.T + b2
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-14)
    # the module the user holds is untouched (a float64 copy is traced)
    assert net[0].weight.dtype == torch.float32


def test_gradient_graph_names_and_values():
    def f(x, w):
        return torch.tanh(x @ w), (x * x).sum()
    ref = Reference(f, ("x", "w"), grads=("x",))
    x, w, g0 = _inputs((3, 4), (4, 2), (3, 2))
    g1 = np.array(1.5)
    g = capture(ref, {"x": x, "w": w}, {"grad_out0": g0, "grad_out1": g1})
    assert g.inputs == ("x", "w", "grad_out0", "grad_out1")
    assert g.outputs == ("out0", "out1", "grad_x")
    got = g.module(*(torch.tensor(a) for a in (x, w, g0, g1)))
    xt = torch.tensor(x, requires_grad=True)
    y0, y1 = f(xt, torch.tensor(w))
    (want,) = torch.autograd.grad((y0, y1), (xt,), (torch.tensor(g0), torch.tensor(g1)))
    np.testing.assert_allclose(got[2].numpy(), want.numpy(), rtol=1e-13)


def test_graphs_are_kept_per_signature():
    ref = Reference(torch.relu, ("input",))
    a = capture(ref, {"input": _inputs((2, 3))[0]})
    assert capture(ref, {"input": _inputs((2, 3), seed=1)[0]}) is a
    assert capture(ref, {"input": _inputs((3, 3))[0]}) is not a
    fresh = Reference(torch.relu, ("input",), cache=False)
    assert capture(fresh, {"input": _inputs((2, 3))[0]}) is not \
        capture(fresh, {"input": _inputs((2, 3))[0]})


def _losses(logits, pred, target):
    return (torch.softmax(logits, -1), F.log_softmax(logits, -1).mean(),
            F.binary_cross_entropy_with_logits(pred, target.sigmoid()))


def test_a_case_has_one_graph_whichever_capture_serves_it():
    """A symbolic capture and a capture on values (what the shapes seen before decide
    between) give one graph, so one bound: the same ops, with gradients, and the same
    radii bit for bit under the per-op bf16 claim."""
    names = ("logits", "pred", "target")
    values = dict(zip(names, (quantize(a, "bf16") for a in _inputs((4, 9), (4, 9), (4, 9))),
                      strict=True))
    cots = {"grad_out0": quantize(_inputs((4, 9), seed=1)[0], "bf16"),
            "grad_out1": np.array(1.0), "grad_out2": np.array(0.5)}
    symbolic = capture(Reference(_losses, names, grads=("logits", "pred")), values, cots)
    on_values = capture(Reference(_losses, names, grads=("logits", "pred"), cache=False),
                        values, cots)
    assert symbolic.symbolic and not on_values.symbolic
    for g in (symbolic, on_values):
        g.module.graph.eliminate_dead_code()
    assert _targets(symbolic) == _targets(on_values)
    ctx = RuleContext(get_model("bf16"), Claims(rounding="per-op"))
    a, b = (evaluate(g, {**values, **cots}, ctx) for g in (symbolic, on_values))
    assert a.keys() == b.keys() == {"out0", "out1", "out2", "grad_logits", "grad_pred"}
    for name, t in a.items():
        for field in ("value", "det", "prob", "ref_err"):
            np.testing.assert_array_equal(getattr(t, field), getattr(b[name], field),
                                          err_msg=f"{name}.{field}")


def test_data_dependent_python_is_resolved_per_case():
    def f(x):
        return x * 2 if float(x.sum()) > 0 else -x
    ref = Reference(f, ("x",), cache=False)
    pos = capture(ref, {"x": np.ones((2,))})
    neg = capture(ref, {"x": -np.ones((2,))})
    assert _targets(pos) == ["aten.mul.Tensor"]
    assert _targets(neg) == ["aten.neg.default"]


def test_shape_facts_of_a_layer_with_gradients():
    def f(x, w, b):
        return torch.nn.functional.linear(x, w, b)
    facts = shape_facts(Reference(f, ("x", "w", "b"), grads=("x", "w", "b")),
                        {"x": (5, 3), "w": (4, 3), "b": (4,)})
    assert facts.outputs == {"out": (5, 4), "grad_x": (5, 3), "grad_w": (4, 3), "grad_b": (4,)}
    assert facts.longest == 5  # grad_w and grad_b sum over the batch
    assert ("x", "w", 4) in facts.products


def test_shape_facts_quote_the_reference_error():
    with pytest.raises(InvalidArgument, match="cannot run on inputs of shapes"):
        shape_facts(Reference(torch.mm, ("a", "b")), {"a": (2, 3), "b": (4, 5)})


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"grads": ("z",)}, "not inputs"),
    ({"params": {"t": torch.zeros(1)}}, "is a tensor"),
])
def test_reference_invalid_arguments(kwargs, match):
    with pytest.raises(InvalidArgument, match=match):
        Reference(torch.add, ("input", "other"), **kwargs)
