"""The conv2d reference: values against torch float64, exact term counts,
sound bounds on torch CPU float32, the exact regime, invalid arguments."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from numoracle.cases.case import Case
from numoracle.checking.check import check_case
from numoracle.errors import InvalidArgument
from numoracle.kernels import get_target
from numoracle.oracle.ops import get_op
from numoracle.oracle.ops.conv2d import tap_counts
from numoracle.oracle.precision import get_model
from numoracle.oracle.tracked import exact, matmul
from numoracle.strategies import cases

torch = pytest.importorskip("torch")
F = torch.nn.functional
OP = get_op("conv2d")

# (in_channels, out_channels, height, width, kernel, stride, padding, dilation, groups)
TABLE = [
    (3, 4, 7, 6, (3, 2), 1, 0, 1, 1),
    (3, 4, 7, 6, 3, 2, 1, 1, 1),
    (4, 6, 9, 8, (3, 3), (3, 2), 2, 2, 1),
    (4, 6, 7, 7, 2, 2, (1, 0), (2, 1), 2),
    (4, 8, 5, 6, 3, 1, 1, 1, 4),  # depthwise, channel multiplier 2
    (3, 3, 6, 5, 3, 2, 2, 1, 3),  # depthwise
    (2, 2, 1, 1, 1, 1, 0, 1, 1),
    (2, 3, 4, 9, (1, 5), (1, 3), (0, 2), (1, 2), 1),
]


def _params(row: tuple, batch: int = 2, bias: bool = True) -> dict[str, Any]:
    c, o, h, w, k, s, p, d, g = row
    return OP.validate({"batch": batch, "in_channels": c, "out_channels": o, "height": h,
                        "width": w, "kernel_size": k, "stride": s, "padding": p,
                        "dilation": d, "groups": g, "bias": bias})


def _torch64(inputs: dict[str, np.ndarray], params: dict[str, Any]) -> dict[str, np.ndarray]:
    leaves = {k: torch.tensor(inputs[k], requires_grad=True)
              for k in ("x", "weight", "bias") if k in inputs}
    y = F.conv2d(leaves["x"], leaves["weight"], leaves.get("bias"), stride=params["stride"],
                 padding=params["padding"], dilation=params["dilation"], groups=params["groups"])
    names = list(leaves)
    grads = torch.autograd.grad(y, [leaves[k] for k in names],
                                grad_outputs=torch.tensor(inputs["grad_output"]))
    out = {"y": y.detach().numpy()}
    for k, gr in zip(names, grads, strict=True):
        out[{"x": "grad_input", "weight": "grad_weight", "bias": "grad_bias"}[k]] = gr.numpy()
    return out


@pytest.mark.parametrize("row", TABLE)
@pytest.mark.parametrize("bias", [True, False])
def test_values_match_torch_float64(row: tuple, bias: bool) -> None:
    params = _params(row, bias=bias)
    rng = np.random.default_rng(7)
    inputs = {k: rng.standard_normal(s) for k, s in OP.input_shapes(params).items()}
    ref = OP.reference(inputs, params, get_model("fp32"))
    want = _torch64(inputs, params)
    assert set(ref) == set(want) == set(OP.outputs(params))
    for name, arr in want.items():
        assert ref[name].shape == arr.shape == OP.output_shapes(params)[name]
        scale = np.abs(ref[name].mag).max() + 1e-300
        np.testing.assert_allclose(ref[name].value, arr, rtol=0, atol=1e-13 * scale)


def _brute_force_terms(params: dict[str, Any]) -> np.ndarray:
    """grad_input terms per (h, w) by enumerating every output position and tap."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (params[k] for k in (
        "kernel_size", "stride", "padding", "dilation"))
    ho, wo = OP.output_shapes(params)["y"][2:]
    count = np.zeros((params["height"], params["width"]), dtype=np.int64)
    for oh, ow, i, j in itertools.product(range(ho), range(wo), range(kh), range(kw)):
        h, w = oh * sh - ph + i * dh, ow * sw - pw + j * dw
        if 0 <= h < params["height"] and 0 <= w < params["width"]:
            count[h, w] += 1
    return count * (params["out_channels"] // params["groups"])


@pytest.mark.parametrize("row", TABLE)
def test_term_counts_are_exact(row: tuple) -> None:
    params = _params(row)
    brute = _brute_force_terms(params)
    np.testing.assert_array_equal(OP.grad_input_terms(params), brute)
    rng = np.random.default_rng(1)
    inputs = {k: rng.standard_normal(s) for k, s in OP.input_shapes(params).items()}
    ref = OP.reference(inputs, params, get_model("fp32"))
    n, c = params["batch"], params["in_channels"]
    np.testing.assert_array_equal(np.broadcast_to(ref["grad_input"].n, ref["grad_input"].shape),
                                  np.broadcast_to(brute, (n, c) + brute.shape))
    red = OP.reductions(params)
    ho, wo = OP.output_shapes(params)["y"][2:]
    assert ref["y"].max_n == red["y"] == c // params["groups"] * np.prod(
        params["kernel_size"]) + 1
    assert ref["grad_weight"].max_n == red["grad_weight"] == n * ho * wo
    assert ref["grad_bias"].max_n == red["grad_bias"] == n * ho * wo
    assert red["grad_input"] == brute.max()


def test_tap_counts_on_one_axis() -> None:
    # size 5, kernel 3, stride 2, no padding: outputs at 0 and 2 cover 0-2 and 2-4
    assert tap_counts(5, 3, 2, 0, 1).tolist() == [1, 1, 2, 1, 1]


def test_matmul_terms_shrink_the_bound_per_element() -> None:
    rng = np.random.default_rng(0)
    a, b = exact(rng.standard_normal((3, 8))), exact(rng.standard_normal((8, 2)))
    model = get_model("fp32")
    full = matmul(a, b, model)
    fewer = matmul(a, b, model, terms=np.array([[8], [4], [1]]))
    assert full.n == 8 and fewer.n_at((1, 0)) == 4 and fewer.max_n == 8
    np.testing.assert_array_equal(fewer.value, full.value)
    np.testing.assert_array_equal(fewer.det[0], full.det[0])
    assert np.all(fewer.det[1:] < full.det[1:])
    with pytest.raises(InvalidArgument, match="terms must lie in"):
        matmul(a, b, model, terms=np.array(9))


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(cases(op="conv2d", storage="fp32", max_elements=4096, max_overlays=1,
             layouts={"x": ("NCHW", "NCHW:F"), "weight": ("OIHW", "OIHW:F")}))
def test_bounds_are_sound_on_torch_cpu_fp32(case: Case) -> None:
    v = check_case(case, get_target("torch-cpu-fp32", "conv2d"))
    assert v.passed, v.message()


@settings(max_examples=60, deadline=None, database=None)
@given(cases(op="conv2d", storage="fp32", families="exact", max_elements=4096))
def test_exact_regime_is_bit_exact_on_torch_cpu_fp32(case: Case) -> None:
    inputs = case.inputs()
    ref = OP.reference(inputs, case.params, get_model("fp32"))
    # (an all-zero operand lies on no grid: the oracle then does not claim exactness)
    on_grid = all(np.any(inputs[k]) for k in ("x", "weight", "grad_output"))
    for t in ref.values():
        assert t.is_exact or not on_grid, "the exact family must give bound 0"
    v = check_case(case, get_target("torch-cpu-fp32", "conv2d"))
    assert v.passed, v.message()
    for name, o in v.outputs.items():
        assert o.worst_ratio == 0 and (o.exact or not on_grid)
        np.testing.assert_array_equal(v.got[name], ref[name].value)


BASE = {"batch": 1, "in_channels": 4, "out_channels": 4, "height": 5, "width": 5,
        "kernel_size": 3}


@pytest.mark.parametrize(("change", "match"), [
    ({"groups": 3}, "in_channels=4 must be divisible by groups=3"),
    ({"groups": 2, "out_channels": 5}, "out_channels=5 must be divisible by groups=2"),
    ({"groups": 0}, "groups=0 must be a positive int"),
    ({"stride": 0}, "stride=0 must be a positive int or a pair"),
    ({"stride": (1, 2, 3)}, r"stride=\(1, 2, 3\) must be a positive int or a pair"),
    ({"padding": -1}, "padding=-1 must be a non-negative int"),
    ({"dilation": (1, 0)}, r"dilation=\(1, 0\) must be a positive"),
    ({"kernel_size": 6}, "height=5 padded to 5 is smaller than the dilated kernel 6"),
    ({"kernel_size": (1, 3), "dilation": 3}, "width=5 padded to 5 is smaller than the dilated "
                                             "kernel 7"),
    ({"kernel_size": None}, "kernel_size=None must be a positive int"),
    ({"batch": 0}, "batch=0 must be a positive int"),
    ({"bias": 1}, "bias=1 must be True or False"),
    ({"stride": True}, "stride=True must be a positive int"),
    ({"strides": 2}, r"unknown parameters \['strides'\]"),
])
def test_invalid_arguments(change: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        OP.validate({**BASE, **change})


def test_pairs_are_normalised() -> None:
    p = OP.validate({**BASE, "stride": [2, 1], "padding": 1})
    assert p["stride"] == (2, 1) and p["padding"] == (1, 1) and p["dilation"] == (1, 1)
    assert p["groups"] == 1 and p["bias"] is True
    assert Case.from_dict(Case(op="conv2d", params=p).to_dict()).params == p


@pytest.mark.parametrize("family", ["normal", "exact", "special"])
@pytest.mark.parametrize(("stride", "padding", "dilation", "groups"),
                         [(1, 1, 1, 1), (2, 1, 1, 1), (1, 2, 2, 2), (2, 0, 1, 2)])
def test_blocked_reference_is_the_whole_one(monkeypatch, family, stride, padding, dilation,
                                            groups) -> None:
    """Built a sample at a time (the block size of real layers), the reference and
    its bounds are those built at once: same exact zeros, same unjudged elements."""
    from numoracle.oracle.ops import conv2d as conv_module
    from numoracle.oracle.precision import gamma, get_model

    params = {"batch": 3, "in_channels": 4, "out_channels": 4, "height": 7, "width": 6,
              "kernel_size": 3, "stride": stride, "padding": padding, "dilation": dilation,
              "groups": groups, "bias": True}
    case = Case("conv2d", get_op("conv2d").validate(params), storage="fp32", family=family,
                seed=5)
    inputs = case.inputs()
    model = get_model("fp32")
    whole = get_op("conv2d").reference(inputs, case.params, model)
    monkeypatch.setattr(conv_module, "BLOCK_ELEMENTS", 1)  # one sample per block
    blocked = get_op("conv2d").reference(inputs, case.params, model)
    for name, w in whole.items():
        b = blocked[name]
        assert b.shape == w.shape
        np.testing.assert_array_equal(np.isnan(b.det), np.isnan(w.det), err_msg=name)
        np.testing.assert_array_equal(b.det == 0, w.det == 0, err_msg=name)
        ok = np.isfinite(w.value) & np.isfinite(b.value)
        np.testing.assert_array_equal(np.isfinite(b.value), np.isfinite(w.value))
        tol = (w.ref_err + b.ref_err)[ok]
        assert np.all(np.abs(b.value[ok] - w.value[ok]) <= tol), name
        fin = np.isfinite(w.det) & np.isfinite(b.det)
        # equal but for the rounding of the magnitude sums S, in GEMMs of other shapes
        # (float32 ones on the CPU: tracked._single)
        k = params["in_channels"] // groups * params["kernel_size"] ** 2
        rtol = 2 * float(gamma(np.asarray(max(k, params["batch"] * 7 * 6) + 1), 2.0**-24))
        np.testing.assert_allclose(b.det[fin], w.det[fin], rtol=rtol, err_msg=name)
        np.testing.assert_array_equal(np.broadcast_to(b.n, b.shape), np.broadcast_to(w.n, w.shape))
