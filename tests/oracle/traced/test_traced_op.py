"""TracedOp and check_kernel(reference=...): correct torch kernels pass, broken
ones fail, gradients are judged, modules' parameters are inputs, specs rebuild."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from numoracle import check_kernel
from numoracle.cases.case import Case
from numoracle.errors import InvalidArgument, KernelMismatch
from numoracle.oracle.ops import OPS, get_op
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced import Claims
from numoracle.oracle.traced.op import TracedOp, resolve_reference, traced_op
from numoracle.strategies import FAMILY_ORDER, families_for
from numoracle.zoo import traced as zoo

LAYER_INPUTS = {"x": ("batch", "i"), "w": ("o", "i"), "b": ("o",)}
FAST = {"examples": 12, "store": None, "backend": "torch-cpu"}


def layer(x, w, b):
    return torch.relu(torch.nn.functional.linear(x, w, b))


def test_a_correct_torch_kernel_passes_and_a_broken_one_fails():
    def good(x, w, b):
        return {"out": torch.relu(x @ w.T + b)}

    def no_bias(x, w, b):
        return {"out": torch.relu(x @ w.T)}

    def last_column_dropped(x, w, b):
        return {"out": torch.relu(x[:, :-1] @ w[:, :-1].T + b)}

    r = check_kernel(good, reference=layer, inputs=LAYER_INPUTS, op="traced_layer_t1", **FAST)
    assert r.verdict == "pass" and r.cases == 12
    for bad in (no_bias, last_column_dropped):
        with pytest.raises(KernelMismatch, match="traced_layer_t1"):
            check_kernel(bad, reference=layer, inputs=LAYER_INPUTS, op="traced_layer_t1",
                         **FAST)


def test_gradients_are_judged():
    def good(x, w, b, grad_out):
        xt, wt, bt = (t.detach().requires_grad_(True) for t in (x, w, b))
        y = layer(xt, wt, bt)
        gx, gw = torch.autograd.grad(y, (xt, wt), grad_out)
        return {"out": y.detach(), "grad_x": gx, "grad_w": gw}

    def stale_mask(x, w, b, grad_out):  # the ReLU mask forgotten in the backward pass
        out = good(x, w, b, grad_out)
        out["grad_x"] = grad_out @ w
        return out

    kwargs = {"reference": layer, "inputs": LAYER_INPUTS, "grads": ("x", "w"),
              "op": "traced_layer_grads", **FAST}
    assert check_kernel(good, **kwargs).verdict == "pass"
    op = get_op("traced_layer_grads")
    params = {"batch": 2, "i": 3, "o": 4}
    assert op.outputs(params) == ("out", "grad_x", "grad_w")
    assert op.input_shapes(params)["grad_out"] == (2, 4)
    with pytest.raises(KernelMismatch, match="grad_x"):
        check_kernel(stale_mask, **kwargs)


class TwoLayers(torch.nn.Module):
    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, width)
        self.out = torch.nn.Linear(width, 2, bias=False)

    def forward(self, x):
        return self.out(torch.relu(self.fc(x)))


def test_a_module_reference_takes_its_parameters_as_inputs():
    def kernel(x, fc_weight, fc_bias, out_weight):
        return {"out": torch.relu(x @ fc_weight.T + fc_bias) @ out_weight.T}

    def stale(x, fc_weight, fc_bias, out_weight):  # keeps the first weights it saw
        kept = stale.__dict__.setdefault("w", fc_weight.clone())
        return {"out": torch.relu(x @ kept.T + fc_bias) @ out_weight.T}

    op = traced_op(TwoLayers, inputs={"x": ("batch", 3)}, init=(5,), name="traced_two_layers")
    assert op.parameters == ("fc_weight", "fc_bias", "out_weight")
    assert op.input_shapes({"batch": 2})["out_weight"] == (2, 5)
    assert check_kernel(kernel, op="traced_two_layers", **FAST).verdict == "pass"
    with pytest.raises(KernelMismatch):
        check_kernel(stale, op="traced_two_layers", **FAST)


def test_example_inputs_fix_the_shapes():
    op = TracedOp(layer, inputs=[torch.zeros(2, 3), torch.zeros(4, 3), torch.zeros(4)],
                  name="traced_layer_fixed")
    assert op.param_names == ()
    assert op.input_shapes({}) == {"x": (2, 3), "w": (4, 3), "b": (4,)}
    assert op.output_shapes({}) == {"out": (2, 4)}


def test_spec_rebuilds_the_op_and_cases_replay():
    op = traced_op(layer, inputs=LAYER_INPUTS, dims={"i": (2, 9)}, grads=("w",),
                   name="traced_layer_spec", claims=Claims(rounding="fused"))
    spec = op.spec()
    assert spec is not None and spec["reference"].endswith(":layer")
    again = TracedOp.from_spec(spec)
    assert again.spec() == spec
    assert traced_op(again) is op  # the same spec under the same name: the registered one
    case = Case("traced_layer_spec", {"batch": 2, "i": 3, "o": 2}, family="exact", seed=4)
    assert Case.from_dict(case.to_dict()) == case
    inputs = case.inputs()
    ref = op.reference(inputs, case.params, get_model("fp32"))
    assert set(ref) == {"out", "grad_w"} and ref["out"].is_exact


def test_dims_bound_the_drawn_sizes():
    op = TracedOp(layer, inputs=LAYER_INPUTS, dims={"i": (3, 5), "o": 2},
                  name="traced_layer_dims")
    assert {d.name: (d.smallest, d.max_value) for d in op.plan} == {
        "batch": (1, 16), "i": (3, 5), "o": (1, 2)}
    with pytest.raises(InvalidArgument, match=r"i=6 must be an int in \[3, 5\]"):
        op.validate({"batch": 1, "i": 6, "o": 1})


def test_names_are_not_taken_twice():
    traced_op(torch.relu, inputs={"x": ("n",)}, name="traced_relu_once")
    with pytest.raises(InvalidArgument, match="exists already"):
        traced_op(torch.tanh, inputs={"x": ("n",)}, name="traced_relu_once")
    with pytest.raises(InvalidArgument, match="exists already"):
        traced_op(torch.relu, inputs={"x": ("n",)}, name="linear")
    assert "traced_relu_once" in OPS


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"inputs": {"x": "batch"}}, "tuple of dimension names"),
    ({"inputs": {"x": ("batch", 0)}}, "positive int"),
    ({"inputs": {"x": ("n",)}, "dims": {"m": 3}}, "no input uses"),
    ({"inputs": {"x": ("n",)}, "dims": {"n": (4, 2)}}, "lo <= hi"),
    ({"inputs": {"x": ("n",)}, "grads": "x"}, "tuple of input names"),
    ({"inputs": {"x": ("n",)}, "init": (3,)}, "module class"),
    ({"inputs": {}}, "must name the reference"),
])
def test_invalid_arguments(kwargs, match):
    with pytest.raises(InvalidArgument, match=match):
        TracedOp(torch.relu, **kwargs)


@pytest.mark.parametrize(("ref", "match"), [
    ("torch.nn.functional.relu", "'module:name'"),
    ("no_such_module_here:f", "cannot be imported"),
    ("torch:no_such_function", "has no"),
])
def test_resolve_reference_errors(ref, match):
    with pytest.raises(InvalidArgument, match=match):
        resolve_reference(ref)


def test_check_kernel_arguments():
    with pytest.raises(InvalidArgument, match="give op="):
        check_kernel(lambda: {}, store=None)
    with pytest.raises(InvalidArgument, match="needs inputs="):
        check_kernel(lambda: {}, reference=layer, store=None)
    with pytest.raises(InvalidArgument, match="describe a reference"):
        check_kernel(lambda: {}, op="linear", grads=("x",), store=None)


def test_a_reference_string_resolves():
    op = TracedOp("torch.nn.functional:softplus", inputs={"x": ("n",)},
                  name="traced_softplus_str")
    assert op.spec()["reference"] == "torch.nn.functional:softplus"
    assert np.isclose(op.ref.fn(torch.tensor([0.0])).item(), np.log(2.0))


def test_a_repro_of_a_traced_op_replays_in_a_fresh_registry(tmp_path, monkeypatch):
    from numoracle.checking.replay import replay
    from numoracle.store.repro import load_repro

    def no_bias(x, w, b):
        return {"out": torch.relu(x @ w.T)}

    with pytest.raises(KernelMismatch) as info:
        check_kernel(no_bias, reference=layer, inputs=LAYER_INPUTS, op="traced_layer_repro",
                     examples=12, store=tmp_path, backend="torch-cpu")
    folders = [p for p in tmp_path.iterdir() if (p / "repro.json").is_file()]
    assert len(folders) == 1 and str(folders[0]) in str(info.value)
    monkeypatch.delitem(OPS, "traced_layer_repro")  # as a new process starts
    r = load_repro(folders[0])
    assert r.op == "traced_layer_repro" and isinstance(get_op(r.op), TracedOp)
    v = replay(folders[0], rerun=False)
    assert not v.passed


def test_normalising_references_are_drawn_the_workload_families() -> None:
    softmax = traced_op(zoo.softmax, inputs={"x": ("batch", "n")}, name="vf_softmax")
    norm = traced_op(zoo.layer_norm, inputs={"x": ("batch", "n"), "w": ("n",), "b": ("n",)},
                     name="vf_layer_norm")
    gelu = traced_op(F.gelu, inputs={"x": ("batch", "n")}, name="vf_gelu")
    assert softmax.value_families == norm.value_families == ("rows", "large")
    assert gelu.value_families == ()  # elementwise: large rows would only saturate
    assert families_for("vf_softmax") == FAMILY_ORDER + ("rows", "large")
    assert families_for("vf_gelu") == FAMILY_ORDER
