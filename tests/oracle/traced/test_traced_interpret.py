"""The bound interpreter: refusal by name before arithmetic, values and bounds
against torch, the exact regime, and the per-op and fused rounding policies."""

from __future__ import annotations

import weakref

import numpy as np
import pytest
import torch

from numoracle.oracle.formats import quantize
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced import RULES, Claims, NoRule, RuleContext
from numoracle.oracle.traced.capture import Reference, capture
from numoracle.oracle.traced.interpret import evaluate, rules_of, stores_per_op

FP32 = RuleContext(get_model("fp32"))


def _rand(shape, fmt="fp32", seed=0):
    return quantize(np.random.default_rng(seed).standard_normal(shape), fmt)


def _layer(x, w, b):
    return torch.relu(torch.nn.functional.linear(x, w, b))


def test_an_op_without_a_rule_is_refused_by_name_before_any_arithmetic(monkeypatch):
    calls = []
    mm = RULES["aten.mm.default"]
    monkeypatch.setitem(RULES, "aten.mm.default",
                        lambda *a, **k: calls.append(1) or mm(*a, **k))

    def f(a, b):
        return torch.special.bessel_j0(a @ b)
    g = capture(Reference(f, ("a", "b")), {"a": _rand((2, 3)), "b": _rand((3, 2))})
    with pytest.raises(NoRule, match=r"no rule for aten\.special_bessel_j0\.default"):
        evaluate(g, {"a": _rand((2, 3)), "b": _rand((3, 2))}, FP32)
    assert calls == []
    with pytest.raises(NoRule):
        rules_of(g)


def test_a_layer_is_bounded_and_torch_float32_lies_within():
    x, w, b = _rand((6, 9)), _rand((5, 9), seed=1), _rand((5,), seed=2)
    g = capture(Reference(_layer, ("x", "w", "b")), {"x": x, "w": w, "b": b})
    out = evaluate(g, {"x": x, "w": w, "b": b}, FP32)["out"]
    exact = _layer(*(torch.tensor(a) for a in (x, w, b))).numpy()
    np.testing.assert_allclose(out.value, exact, rtol=1e-15, atol=1e-300)
    got = _layer(*(torch.tensor(a, dtype=torch.float32) for a in (x, w, b))).double().numpy()
    err = np.abs(got - out.value)
    assert np.all(err <= out.bound())
    assert np.any(out.bound() > 0)


def test_a_layer_on_an_integer_grid_is_exact():
    rng = np.random.default_rng(3)
    x, w, b = (rng.integers(-8, 8, s).astype(np.float64) for s in ((4, 7), (3, 7), (3,)))
    g = capture(Reference(_layer, ("x", "w", "b")), {"x": x, "w": w, "b": b})
    out = evaluate(g, {"x": x, "w": w, "b": b}, FP32)["out"]
    assert out.is_exact
    torch_fp32 = _layer(*(torch.tensor(a, dtype=torch.float32) for a in (x, w, b)))
    np.testing.assert_array_equal(torch_fp32.double().numpy(), out.value)


def _chain(x, y, z):
    return (x * y + z) * y - x


@pytest.mark.parametrize("storage", ["bf16", "fp16"])
def test_per_op_rounding_covers_eager_and_fused_is_sharper(storage):
    shape = (64,)
    vals = {n: _rand(shape, storage, seed=i) for i, n in enumerate("xyz")}
    g = capture(Reference(_chain, ("x", "y", "z")), vals)
    model = get_model(storage)
    per_op = RuleContext(model, Claims(rounding="per-op"))
    fused = RuleContext(model, Claims(rounding="fused"))
    assert stores_per_op(per_op) and not stores_per_op(fused)
    eager_bound = evaluate(g, vals, per_op)["out"]
    fused_bound = evaluate(g, vals, fused)["out"]
    np.testing.assert_array_equal(eager_bound.value, fused_bound.value)
    assert np.all(fused_bound.bound() <= eager_bound.bound())
    assert np.any(fused_bound.bound() < eager_bound.bound())
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[storage]
    eager = _chain(*(torch.tensor(vals[n], dtype=dtype) for n in "xyz")).double().numpy()
    assert np.all(np.abs(eager - eager_bound.value) <= eager_bound.bound())
    # a fused kernel: float32 throughout, one rounding at the end
    wide = _chain(*(torch.tensor(vals[n], dtype=torch.float32) for n in "xyz"))
    once = wide.to(dtype).double().numpy()
    assert np.all(np.abs(once - fused_bound.value) <= fused_bound.bound())


def _moved(x, y):
    s = torch.softmax(x * y, -1)
    return s, s.detach().clone().t().unsqueeze(0)[0].t()


@pytest.mark.parametrize("storage", ["bf16", "fp16"])
def test_per_op_rounding_rounds_a_moved_value_once(storage):
    """Views, aliases and copies move elements an op computed and rounded: under the
    per-op claim their results keep that op's bound, bit for bit (a second rounding
    would double the rounding term of a bound that it dominates), and an eager run
    lies within it."""
    vals = {n: _rand((5, 12), storage, seed=i) for i, n in enumerate("xy")}
    g = capture(Reference(_moved, ("x", "y")), vals)
    ops = {str(n.target) for n in g.module.graph.nodes if n.op == "call_function"}
    assert {"aten.clone.default", "aten.unsqueeze.default", "aten.select.int"} <= ops
    out = evaluate(g, vals, RuleContext(get_model(storage), Claims(rounding="per-op")))
    direct, moved = out["out0"], out["out1"]
    np.testing.assert_array_equal(direct.value, moved.value)
    np.testing.assert_array_equal(direct.det, moved.det)
    np.testing.assert_array_equal(direct.prob, moved.prob)
    assert np.all(direct.det > 0)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[storage]
    eager = _moved(*(torch.tensor(vals[n], dtype=dtype) for n in "xy"))[1].double().numpy()
    assert np.all(np.abs(eager - moved.value) <= moved.bound())


def test_equal_formats_add_no_second_rounding():
    vals = {n: _rand((16,), seed=i) for i, n in enumerate("xyz")}
    g = capture(Reference(_chain, ("x", "y", "z")), vals)
    a = evaluate(g, vals, RuleContext(get_model("fp32"), Claims(rounding="per-op")))["out"]
    b = evaluate(g, vals, RuleContext(get_model("fp32"), Claims(rounding="fused")))["out"]
    np.testing.assert_array_equal(a.det, b.det)


def test_only_the_requested_outputs_are_evaluated(monkeypatch):
    calls = []
    relu = RULES["aten.relu.default"]
    monkeypatch.setitem(RULES, "aten.relu.default",
                        lambda *a, **k: calls.append(1) or relu(*a, **k))

    def f(x):
        return x + x, torch.relu(x)
    vals = {"x": _rand((3,))}
    g = capture(Reference(f, ("x",)), vals)
    out = evaluate(g, vals, FP32, outputs=("out0",))
    assert list(out) == ["out0"] and calls == []
    evaluate(g, vals, FP32)
    assert calls == [1]


def test_a_kernel_on_the_far_branch_of_either_lies_strictly_inside():
    from numoracle.oracle.tracked import either, exact

    v1, v2 = np.array([0.88682556]), np.array([0.88682175])  # tf32 inputs or not (1x1x1)
    t = either(exact(v1), exact(v2))
    assert np.all(np.abs(v2 - v1) / t.bound() < 1)


def test_intermediate_values_are_freed_once_no_later_node_reads_them(monkeypatch):
    """A chain of ten ops holds the value being read, not every intermediate: each
    result is dropped once the last node that reads it has run (the outputs kept)."""
    made, alive_at_call = [], []
    tanh = RULES["aten.tanh.default"]

    def counting(*a, **k):
        alive_at_call.append(sum(r() is not None for r in made))
        out = tanh(*a, **k)
        made.append(weakref.ref(out.value))
        return out
    monkeypatch.setitem(RULES, "aten.tanh.default", counting)

    def f(x):
        for _ in range(10):
            x = torch.tanh(x)
        return x
    vals = {"x": _rand((64,))}
    g = capture(Reference(f, ("x",)), vals)
    out = evaluate(g, vals, FP32)["out"]
    assert len(alive_at_call) == 10
    assert max(alive_at_call) <= 1  # the argument of the call, nothing older
    assert made[-1]() is out.value  # the output is kept
    expected = np.tanh(vals["x"])
    for _ in range(9):
        expected = np.tanh(expected)
    np.testing.assert_allclose(out.value, expected, rtol=1e-14)


def test_inputs_handed_over_are_freed_after_their_last_reader(monkeypatch):
    """``consume=True``: the inputs are popped from the caller's dict as they are
    bound, and an input no later node reads is freed as the evaluation goes."""
    alive = []
    tanh = RULES["aten.tanh.default"]

    def counting(*a, **k):
        alive.append(held() is not None)
        return tanh(*a, **k)
    monkeypatch.setitem(RULES, "aten.tanh.default", counting)

    def f(x):
        return torch.tanh(torch.tanh(x))
    x = _rand((64,))
    g = capture(Reference(f, ("x",)), {"x": x})
    held = weakref.ref(x)
    vals = {"x": x}
    del x
    out = evaluate(g, vals, FP32, consume=True)["out"]
    assert vals == {} and alive == [True, False]  # read by the first tanh only
    kept = {"x": _rand((64,))}
    np.testing.assert_array_equal(evaluate(g, dict(kept), FP32)["out"].value, out.value)


def test_a_clone_of_a_value_no_later_node_reads_takes_its_arrays(monkeypatch):
    """A clone (or detach) that is the last reader of its argument hands its arrays
    over (no copy: the same objects, so the same bits as a copy); a clone of a value
    read later copies, so that the two values share nothing a later in-place step
    could change in both."""
    made, operands = {}, []
    tanh, sigmoid, mul = (RULES[f"aten.{n}"] for n in ("tanh.default", "sigmoid.default",
                                                         "mul.Tensor"))

    def keeping(name, fn):
        def call(*a, **k):
            made[name] = out = fn(*a, **k)
            return out
        return call
    monkeypatch.setitem(RULES, "aten.tanh.default", keeping("tanh", tanh))
    monkeypatch.setitem(RULES, "aten.sigmoid.default", keeping("sigmoid", sigmoid))
    monkeypatch.setitem(RULES, "aten.mul.Tensor",
                        lambda ctx, a, b: operands.append(a) or mul(ctx, a, b))

    def f(x):
        t = torch.tanh(x)
        s = torch.sigmoid(x)
        return torch.clone(t) * 2.0 + torch.clone(s) * torch.exp(s)
    vals = {"x": _rand((8, 16))}
    g = capture(Reference(f, ("x",)), vals)
    out = evaluate(g, vals, FP32)["out"]
    t_clone, s_clone = operands
    assert t_clone.value is made["tanh"].value and t_clone.det is made["tanh"].det
    assert s_clone.value is not made["sigmoid"].value
    assert not np.shares_memory(s_clone.det, made["sigmoid"].det)
    expected = np.tanh(vals["x"]) * 2.0 + (e := 1.0 / (1.0 + np.exp(-vals["x"]))) * np.exp(e)
    np.testing.assert_allclose(out.value, expected, rtol=1e-14)



def _softmax_last(x):
    return torch.softmax(x, dim=-1)


def _cross_entropy(x, t):
    return torch.nn.functional.cross_entropy(x, t)


@pytest.mark.parametrize("storage,rounding", [("fp32", "per-op"), ("bf16", "per-op"),
                                              ("bf16", "fused")])
@pytest.mark.parametrize("which", ["softmax", "cross_entropy"])
def test_an_alias_of_a_value_read_later_views_its_arrays_with_a_copys_bits(
        monkeypatch, which, storage, rounding):
    """softmax's and cross-entropy's forward + backward graphs alias the (log-)softmax
    (an output, and the value its backward reads): each alias views the operand's
    memory (no copy; arrays of their own objects, so that no rounding in place writes
    the operand) and every output keeps the bits of the evaluation that copies it,
    with the whole-rule loops running (LOOP_MIN 1) and without."""
    from numoracle.oracle import fused_cpu
    from numoracle.oracle.traced import interpret

    name = "aten._softmax.default" if which == "softmax" else "aten._log_softmax.default"
    back = ("aten._softmax_backward_data.default" if which == "softmax"
            else "aten._log_softmax_backward_data.default")
    made, read = {}, []
    forward, backward = RULES[name], RULES[back]

    def keeping(*a, **k):
        made["y"] = out = forward(*a, **k)
        return out
    monkeypatch.setitem(RULES, name, keeping)
    monkeypatch.setitem(RULES, back,
                        lambda ctx, g, y, *a: read.append(y) or backward(ctx, g, y, *a))
    x = _rand((16, 40), storage)
    if which == "softmax":
        ref, vals, cot = Reference(_softmax_last, ("x",), grads=("x",)), {"x": x}, (16, 40)
    else:
        labels = np.random.default_rng(4).integers(0, 40, 16)
        ref, vals, cot = (Reference(_cross_entropy, ("x", "t"), grads=("x",)),
                          {"x": x, "t": labels}, ())
    g = capture(ref, vals, {"grad_out": _rand(cot, storage, seed=1)})
    assert sum(n.target is torch.ops.aten.alias.default for n in g.module.graph.nodes) >= 2
    ctx = RuleContext(get_model(storage), Claims(rounding=rounding))
    inputs = {**vals, "grad_out": _rand(cot, storage, seed=1)}
    viewing = interpret._viewed
    for loop_min in (1, 1 << 30):
        monkeypatch.setattr(fused_cpu, "LOOP_MIN", loop_min)
        monkeypatch.setattr(interpret, "_viewed", viewing)
        shared = evaluate(g, dict(inputs), ctx)
        assert np.shares_memory(read[-1].value, made["y"].value)
        assert read[-1].det is not made["y"].det
        monkeypatch.setattr(interpret, "_viewed", lambda node, kept: False)
        copied = evaluate(g, dict(inputs), ctx)
        assert not np.shares_memory(read[-1].value, made["y"].value)
        for out, t in copied.items():
            for f_ in ("value", "det", "prob", "ref_err", "mag"):
                np.testing.assert_array_equal(getattr(shared[out], f_), getattr(t, f_))
