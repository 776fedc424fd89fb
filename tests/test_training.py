"""Stepwise training check: correct SGD steps pass every step, mutants are named
at the first step and tensor that break the bound (teacher forcing)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numoracle.errors import InvalidArgument
from numoracle.kernels.sgd_steps import numpy_sgd_step, torch_sgd_step
from numoracle.oracle.ops.conv2d import Conv2d, conv2d_tracked
from numoracle.oracle.precision import get_model
from numoracle.oracle.tracked import Tracked, exact
from numoracle.trajectory import TENSORS, TinyCNN, check_trajectory

pytest.importorskip("torch")

ZOO = importlib.import_module("numoracle.zoo.training")
FP32 = get_model("fp32")


def _f32(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _problem(seed: int, n: int = 2, c: int = 2, o: int = 2, h: int = 6, w: int = 6,
             k: int = 3, bias: bool = True, conv: dict | None = None):
    rng = np.random.default_rng(seed)
    x = _f32(rng, (n, c, h, w))
    weight = _f32(rng, (o, c // (conv or {}).get("groups", 1), k, k))
    b = _f32(rng, (o,)) if bias else None
    params = Conv2d().validate({"batch": n, "in_channels": c, "out_channels": o, "height": h,
                                "width": w, "kernel_size": k, "bias": bias, **(conv or {})})
    target = _f32(rng, (n, o, *Conv2d._out_hw(params)))
    return x, weight, b, target


@st.composite
def problems(draw):
    n, c, o = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    h, w = draw(st.integers(3, 8)), draw(st.integers(3, 8))
    k = draw(st.integers(1, 3))
    pad = draw(st.integers(0, 1))
    stride = draw(st.integers(1, 2))
    bias = draw(st.booleans())
    lr = draw(st.floats(1e-3, 0.5))
    steps = draw(st.integers(3, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    x = _f32(rng, (n, c, h, w))
    weight = _f32(rng, (o, c, k, k))
    b = _f32(rng, (o,)) if bias else None
    conv = {"padding": pad, "stride": stride}
    params = Conv2d().validate({"batch": n, "in_channels": c, "out_channels": o, "height": h,
                                "width": w, "kernel_size": k, "bias": bias, **conv})
    target = _f32(rng, (n, o, *Conv2d._out_hw(params)))
    return x, weight, b, target, lr, steps, conv


@settings(max_examples=150, deadline=None)
@given(p=problems(), kernel=st.sampled_from(["torch", "numpy"]))
def test_correct_steps_pass_every_step(p, kernel) -> None:
    x, weight, b, target, lr, steps, conv = p
    make = torch_sgd_step if kernel == "torch" else numpy_sgd_step
    v = check_trajectory(make(x, target, lr, conv), weight, b, x, target, lr, steps,
                         conv=conv, free_running=False)
    assert v.passed, v.message()
    assert len(v.steps) == steps and v.worst_ratio < 1


@settings(max_examples=150, deadline=None)
@given(p=problems())
def test_correct_steps_pass_under_the_probabilistic_bound(p) -> None:
    x, weight, b, target, lr, steps, conv = p
    v = check_trajectory(torch_sgd_step(x, target, lr, conv), weight, b, x, target, lr, steps,
                         conv=conv, probabilistic=True, free_running=False)
    assert v.passed, v.message()


def test_verdict_reports_every_tensor_and_the_free_running_drift() -> None:
    x, weight, b, target = _problem(0)
    v = check_trajectory(torch_sgd_step(x, target, 0.1), weight, b, x, target, 0.1, 4)
    assert v.passed and v.first_failure is None
    assert [list(s.outputs) for s in v.steps] == [list(TENSORS)] * 4
    assert v.drift is not None and 0 <= v.drift.weight < 1e-4 and v.drift.bias is not None
    text = v.message()
    assert "within fp32" in text and "free-running drift" in text and "step 4: pass" in text


def test_no_bias() -> None:
    x, weight, _, target = _problem(1, bias=False)
    v = check_trajectory(numpy_sgd_step(x, target, 0.2), weight, None, x, target, 0.2, 3)
    assert v.passed, v.message()
    assert list(v.steps[0].outputs) == ["y", "loss", "grad_weight", "weight"]
    assert v.drift is not None and v.drift.bias is None


@pytest.mark.parametrize("name", sorted(ZOO.STEP_MUTANTS))
@pytest.mark.parametrize("seed", range(4))
def test_mutants_are_named_at_their_first_step_and_tensor(name: str, seed: int) -> None:
    factory, step, tensor = ZOO.STEP_MUTANTS[name]
    x, weight, b, target = _problem(seed, n=2, c=2, o=3, h=7, w=6, k=3)
    v = check_trajectory(factory(x, target, 0.1), weight, b, x, target, 0.1, 4)
    assert not v.passed
    f = v.first_failure
    assert f is not None and (f.step, f.tensor) == (step, tensor), v.message()
    assert f.ratio > 1 and f.diagnosis
    assert all(s.passed for s in v.steps[:step - 1])
    assert f"step {step}, tensor {tensor!r}" in v.message()


def test_stale_weights_diagnosis_is_a_logic_bug() -> None:
    factory, _, _ = ZOO.STEP_MUTANTS["stale_weights"]
    x, weight, b, target = _problem(5)
    v = check_trajectory(factory(x, target, 0.3), weight, b, x, target, 0.3, 3)
    assert v.first_failure is not None
    assert "exceeds every precision model" in v.first_failure.diagnosis
    assert v.steps[0].passed and not v.steps[1].passed


def test_teacher_forcing_charges_the_step_that_made_the_error() -> None:
    """An error made at step 3 only is named at step 3; the later steps, started
    from the kernel's own (wrong) weights, pass again."""
    x, weight, b, target = _problem(6)
    good = torch_sgd_step(x, target, 0.1)
    calls = []

    def step(w, bias):
        calls.append(1)
        out = dict(good(w, bias))
        if len(calls) == 3:
            out["weight"] = out["weight"] + np.float32(1e-3)
        return out
    v = check_trajectory(step, weight, b, x, target, 0.1, 5)
    assert v.first_failure is not None
    assert (v.first_failure.step, v.first_failure.tensor) == (3, "weight")
    assert [s.passed for s in v.steps] == [True, True, False, True, True]
    assert v.drift is not None and v.drift.weight > 5e-4


def test_missing_and_misshapen_tensors_fail_by_name() -> None:
    x, weight, b, target = _problem(7)
    good = numpy_sgd_step(x, target, 0.1)

    def no_loss(w, bias):
        out = dict(good(w, bias))
        del out["loss"]
        return out

    def flat_y(w, bias):
        out = dict(good(w, bias))
        out["y"] = out["y"].reshape(-1)
        return out
    v = check_trajectory(no_loss, weight, b, x, target, 0.1, 2)
    assert v.first_failure is not None and v.first_failure.tensor == "loss"
    assert "returned no 'loss'" in v.first_failure.diagnosis
    v = check_trajectory(flat_y, weight, b, x, target, 0.1, 2)
    assert v.first_failure is not None and (v.first_failure.step, v.first_failure.tensor) == (
        1, "y")


def test_invalid_arguments() -> None:
    x, weight, b, target = _problem(8)
    step = numpy_sgd_step(x, target, 0.1)
    with pytest.raises(InvalidArgument, match="steps=0"):
        check_trajectory(step, weight, b, x, target, 0.1, 0)
    with pytest.raises(InvalidArgument, match="target"):
        check_trajectory(step, weight, b, x, target[:, :, :1], 0.1, 2)
    with pytest.raises(InvalidArgument, match="unknown keys"):
        check_trajectory(step, weight, b, x, target, 0.1, 2, conv={"strides": 2})


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), pad=st.integers(0, 1), stride=st.integers(1, 2))
def test_conv2d_tracked_is_sound_for_operands_with_radii(seed, pad, stride) -> None:
    """Operands carrying radii: a float32 kernel fed any values within them stays in
    the bound (the radius of grad_output reaches grad_weight and grad_bias)."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    rng = np.random.default_rng(seed)
    x = _f32(rng, (2, 2, 5, 5))
    w = _f32(rng, (3, 2, 3, 3))
    b = _f32(rng, (3,))
    params = Conv2d().validate({"batch": 2, "in_channels": 2, "out_channels": 3, "height": 5,
                                "width": 5, "kernel_size": 3, "bias": True, "padding": pad,
                                "stride": stride})
    g = _f32(rng, (2, 3, *Conv2d._out_hw(params)))
    r = np.abs(g) * 1e-3
    gt = Tracked(value=g.astype(np.float64), ref_err=np.zeros(g.shape), det=r.astype(np.float64),
                 prob=r.astype(np.float64), mag=np.abs(g).astype(np.float64))
    ref = conv2d_tracked(exact(x), exact(w), exact(b), params, FP32, grad_output=gt,
                         outputs=("y", "grad_input", "grad_weight", "grad_bias"))
    gk = (g + rng.choice([-1.0, 1.0], g.shape) * r).astype(np.float32)  # at the radius
    xs, ws, bs = (torch.from_numpy(a).requires_grad_(True) for a in (x, w, b))
    y = F.conv2d(xs, ws, bs, stride=stride, padding=pad)
    grads = torch.autograd.grad(y, [xs, ws, bs], grad_outputs=torch.from_numpy(gk))
    got = {"y": y.detach().numpy(), "grad_input": grads[0].numpy(),
           "grad_weight": grads[1].numpy(), "grad_bias": grads[2].numpy()}
    for name, arr in got.items():
        err = np.abs(arr.astype(np.float64) - ref[name].value)
        assert np.all(err <= ref[name].bound()), name
    # and the exact-input path is the reference's own
    plain = Conv2d().reference({"x": x, "weight": w, "bias": b, "grad_output": g}, params, FP32)
    again = conv2d_tracked(exact(x), exact(w), exact(b), params, FP32, grad_output=exact(g),
                           outputs=tuple(plain))
    for name, t in plain.items():
        np.testing.assert_array_equal(t.value, again[name].value)
        np.testing.assert_array_equal(t.det, again[name].det)


def test_tiny_cnn_rejects_bad_shapes() -> None:
    x, weight, b, _ = _problem(9)
    with pytest.raises(InvalidArgument, match="4-D"):
        TinyCNN.for_arrays(x[0], weight, b, 0.1)
    with pytest.raises(InvalidArgument, match="bias"):
        TinyCNN.for_arrays(x, weight, b[:1], 0.1)
