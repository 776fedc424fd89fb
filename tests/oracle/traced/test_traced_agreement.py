"""The traced oracle agrees with the hand-written ops: a linear layer, a 2-D
convolution and an Adam step written as PyTorch references give the same
values, the same exact regime and bounds within a small factor of the
hand-written references' on the same inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from numoracle.cases.case import Case
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.op import traced_op

#: traced bounds lie within this factor of the hand-written ones (both ways)
FACTOR = 4.0


def linear_ref(x, weight, bias):
    return torch.nn.functional.linear(x, weight, bias)


def conv_ref(x, weight, bias, *, stride, padding, dilation, groups):
    return torch.nn.functional.conv2d(x, weight, bias, stride, padding, dilation, groups)


def adam_ref(param0, grads, *, lr, eps):
    """One step of torch's single-tensor Adam from a zero state, as torch writes it."""
    p, g = param0.clone(), grads[0]
    m, v = torch.zeros_like(p), torch.zeros_like(p)
    m.lerp_(g, 1 - 0.9)
    v.mul_(0.999).addcmul_(g, g, value=1 - 0.999)
    denom = (v.sqrt() / math.sqrt(1 - 0.999)).add_(eps)
    p.addcdiv_(m, denom, value=-lr / (1 - 0.9))
    return {"param": p[None], "exp_avg": m[None], "exp_avg_sq": v[None]}


def _agree(hand, traced, pairs, *, exact_family, lower=1 / FACTOR):
    for h_name, t_name in pairs:
        h, t = hand[h_name], traced[t_name]
        np.testing.assert_allclose(t.value, h.value, rtol=1e-13, atol=1e-300,
                                   err_msg=f"{t_name} vs {h_name}")
        hb, tb = h.bound(), t.bound()
        np.testing.assert_array_equal(tb == 0, hb == 0, err_msg=f"exact regime of {t_name}")
        if exact_family:
            assert h.is_exact and t.is_exact, t_name
        both = (hb > 0) & (tb > 0)
        ratio = tb[both] / hb[both]
        assert ratio.size == 0 or (ratio.max() <= FACTOR and ratio.min() >= lower), (
            t_name, float(ratio.min()), float(ratio.max()))


@pytest.mark.parametrize("family", ["normal", "exact", "cancel"])
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
def test_linear_agrees(family, precision):
    op = traced_op(linear_ref, inputs={"x": ("batch", "in_features"),
                                       "weight": ("out_features", "in_features"),
                                       "bias": ("out_features",)},
                   grads=("x", "weight", "bias"), name="traced_linear_agreement")
    params = {"batch": 5, "in_features": 33, "out_features": 7, "bias": True}
    storage = get_model(precision).storage.name
    ins = Case("linear", params, storage=storage, family=family, seed=3).inputs()
    model = get_model(precision)
    hand = get_op("linear").reference(ins, params, model)
    traced = op.reference({**ins, "grad_out": ins["grad_output"]},
                          {k: params[k] for k in op.param_names}, model)
    _agree(hand, traced, [("y", "out"), ("grad_input", "grad_x"),
                          ("grad_weight", "grad_weight"), ("grad_bias", "grad_bias")],
           exact_family=family == "exact" and precision == "fp32")


@pytest.mark.parametrize("family", ["normal", "exact"])
@pytest.mark.parametrize("geometry", [
    {"kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1},
    {"kernel_size": (2, 3), "stride": (2, 1), "padding": (0, 2), "dilation": (1, 2), "groups": 2},
])
def test_conv2d_agrees(family, geometry):
    params = {"batch": 2, "in_channels": 4, "out_channels": 6, "height": 7, "width": 6,
              "bias": True, **geometry}
    case = Case("conv2d", params, family=family, seed=5)
    ins = case.inputs()
    hand = get_op("conv2d").reference(ins, case.params, get_model("fp32"))
    shapes = {k: tuple(v.shape) for k, v in ins.items() if k != "grad_output"}
    key = "_".join(str(v) for g in geometry.values() for v in np.atleast_1d(g))
    op = traced_op(conv_ref, inputs=shapes, grads=("x", "weight", "bias"),
                   params={k: geometry[k] for k in ("stride", "padding", "dilation", "groups")},
                   name=f"traced_conv2d_agreement_{key}")
    traced = op.reference({**ins, "grad_out": ins["grad_output"]}, {}, get_model("fp32"))
    _agree(hand, traced, [("y", "out"), ("grad_input", "grad_x"),
                          ("grad_weight", "grad_weight"), ("grad_bias", "grad_bias")],
           exact_family=family == "exact")


@pytest.mark.parametrize("family", ["normal", "heavy"])
def test_adam_step_agrees(family):
    """The traced step is sharper than the hand-written one (which bounds the
    update's quotient coarsely), never looser, and holds torch's own Adam."""
    hyper = {"optimizer": "adam", "lr": 0.01, "momentum": 0.0, "dampening": 0.0,
             "nesterov": False, "weight_decay": 0.0, "eps": 1e-8, "amsgrad": False}
    params = {**hyper, "steps": 1, "numel": 40}
    case = Case("optim", params, family=family, seed=7)
    ins = case.inputs()
    hand = get_op("optim").reference(ins, case.params, get_model("fp32"))
    op = traced_op(adam_ref, inputs={"param0": ("numel",), "grads": (1, "numel")},
                   params={"lr": 0.01, "eps": 1e-8}, name="traced_adam_agreement")
    traced = op.reference(ins, {"numel": 40}, get_model("fp32"))
    _agree(hand, traced, [("param", "param"), ("exp_avg", "exp_avg"),
                          ("exp_avg_sq", "exp_avg_sq")], exact_family=False, lower=0.0)
    for foreach in (False, True):
        p = torch.tensor(ins["param0"], dtype=torch.float32, requires_grad=True)
        adam = torch.optim.Adam([p], lr=0.01, eps=1e-8, foreach=foreach)
        p.grad = torch.tensor(ins["grads"][0], dtype=torch.float32)
        adam.step()
        err = np.abs(p.detach().double().numpy() - traced["param"].value[0])
        assert np.all(err <= traced["param"].bound()[0])
