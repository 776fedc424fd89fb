"""One capture per graph: symbolic sizes reused across drawn shapes, guards that
capture again where the graph changes, references that read values captured
per case (and said so), torch's own in-place layers, and clean refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from numoracle import check_kernel
from numoracle.errors import InvalidArgument, KernelMismatch
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.capture import Reference, capture
from numoracle.oracle.traced.op import TracedOp

FAST = {"examples": 8, "store": None, "backend": "torch-cpu"}


def _values(names, shapes, seed):
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(s) for n, s in zip(names, shapes, strict=True)}


def mlp(x, w1, b1, w2):
    return F.linear(F.gelu(F.linear(x, w1, b1)), w2).softmax(-1)


def test_twenty_distinct_shapes_take_one_capture():
    ref = Reference(mlp, ("x", "w1", "b1", "w2"))
    rng = np.random.default_rng(0)
    seen = set()
    while len(seen) < 20:
        b, i, h, o = (int(v) for v in rng.integers(2, 40, size=4))
        shapes = ((b, 3, i), (h, i), (h,), (o, h))
        if shapes in seen:
            continue
        seen.add(shapes)
        values = _values(ref.names, shapes, len(seen))
        graph = capture(ref, values)
        got = graph.module(*(torch.tensor(values[n]) for n in ref.names))[0]
        want = mlp(*(torch.tensor(values[n]) for n in ref.names))
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
    assert ref.captures == 1
    assert ref.reads_values is None


def test_a_size_of_one_is_captured_apart_and_its_graph_is_right():
    """Broadcasting makes 1 special: a graph captured where n = 1 is not the
    graph of n = 2 (a normalised shape of 1), and guards tell them apart."""
    def norm(x, w, b):
        return F.layer_norm(x, (x.shape[-1],), w, b)
    ref = Reference(norm, ("x", "w", "b"))
    graphs = []
    for n in (1, 2, 1, 5, 7):
        values = _values(ref.names, ((3, n), (n,), (n,)), n)
        graphs.append(capture(ref, values))
        got = graphs[-1].module(*(torch.tensor(values[k]) for k in ref.names))[0]
        want = norm(*(torch.tensor(values[k]) for k in ref.names))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
    assert graphs[0].symbolic and graphs[2].symbolic  # n = 1 again: the first graph
    assert 2 <= ref.captures <= 4  # n = 2, 5, 7: on values, until that costs a symbolic one


def test_every_graph_a_guard_admits_is_the_references_graph():
    """Attention over 30 random shapes with sizes from 1 (broadcasts, views,
    a scale of 1/sqrt(d)): each kept graph, specialised, computes what the
    reference computes at that shape."""
    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v).mean(-1)
    ref = Reference(sdpa, ("q", "k", "v"))
    rng = np.random.default_rng(1)
    for i in range(30):
        b, h, s, t, d = (int(v) for v in rng.integers(1, 6, size=5)) if i else (2, 3, 4, 5, 6)
        values = _values("qkv", ((b, h, s, d), (b, h, t, d), (b, h, t, d)), i)
        got = capture(ref, values).module(*(torch.tensor(values[n]) for n in "qkv"))[0]
        want = sdpa(*(torch.tensor(values[n]) for n in "qkv"))
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
    assert ref.captures < 30


def _scaled(q, k):
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])


def test_a_size_the_trace_made_a_constant_is_not_admitted_at_another_size():
    """``math.sqrt(q.shape[-1])`` fixes the size in the graph (its scale a constant)
    and leaves no guard on it; where no stride names it either (the other sizes 1),
    a graph traced at one size must still not serve another."""
    ref = Reference(_scaled, ("q", "k"))
    for d in (13, 2, 5):
        values = _values(ref.names, ((2, 1, d), (2, 1, d)), d)
        got = capture(ref, values).module(*(torch.tensor(values[n]) for n in ref.names))[0]
        want = _scaled(*(torch.tensor(values[n]) for n in ref.names))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-14)


def test_a_gradient_graph_is_captured_once_for_many_shapes():
    def f(x, w):
        return torch.tanh(x @ w).reshape(x.shape[0], -1)
    ref = Reference(f, ("x", "w"), grads=("x", "w"))
    for k, (m, n, p) in enumerate([(3, 4, 5), (6, 2, 7), (4, 9, 3), (8, 5, 2)]):
        x, w, g = _values(("x", "w", "g"), ((m, n), (n, p), (m, p)), k).values()
        graph = capture(ref, {"x": x, "w": w}, {"grad_out": g})
        got = graph.module(*(torch.tensor(a) for a in (x, w, g)))
        xt, wt = (torch.tensor(a, requires_grad=True) for a in (x, w))
        want = torch.autograd.grad(f(xt, wt), (xt, wt), torch.tensor(g))
        np.testing.assert_allclose(got[1].numpy(), want[0].numpy(), rtol=1e-12)
        np.testing.assert_allclose(got[2].numpy(), want[1].numpy(), rtol=1e-12)
    assert ref.captures == 1


def branchy(x):
    if float(x.sum()) > 0:  # the line the verdict names
        return x * 2
    return -x


def test_a_reference_that_reads_values_is_captured_per_case_and_said_so():
    ref = Reference(branchy, ("x",))
    pos = capture(ref, {"x": np.ones(3)})
    neg = capture(ref, {"x": -np.ones(3)})  # same signature, another branch
    assert [str(n.target) for n in pos.module.graph.nodes if n.op == "call_function"] \
        == ["aten.mul.Tensor"]
    assert [str(n.target) for n in neg.module.graph.nodes if n.op == "call_function"] \
        == ["aten.neg.default"]
    assert ref.reads_values is not None
    assert "test_traced_symbolic.py" in ref.reads_values and "x.sum()" in ref.reads_values

    def good(x):
        return {"out": x * 2 if float(x.sum()) > 0 else -x}

    r = check_kernel(good, reference=branchy, inputs={"x": ("n",)}, op="traced_branchy", **FAST)
    assert r.verdict == "pass"
    assert "reads input values" in r.message and "x.sum()" in r.message

    def always_doubled(x):
        return {"out": x * 2}

    with pytest.raises(KernelMismatch, match="reads input values"):
        check_kernel(always_doubled, reference=branchy, inputs={"x": ("n",)},
                     op="traced_branchy", **{**FAST, "examples": 40})


def rms(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, eps=1e-6)


def test_rms_norm_is_traced_and_judged_and_a_broken_one_caught():
    def good(x, w):
        return {"out": F.rms_norm(x, (x.shape[-1],), w, eps=1e-6)}

    def mean_not_squared(x, w):  # the root of the mean, not of the mean square
        return {"out": x / torch.sqrt(x.mean(-1, keepdim=True).abs() + 1e-6) * w}

    inputs = {"x": ("batch", "n"), "w": ("n",)}
    assert check_kernel(good, reference=rms, inputs=inputs, op="traced_rms_t",
                        **FAST).verdict == "pass"
    with pytest.raises(KernelMismatch):
        check_kernel(mean_not_squared, reference=rms, inputs=inputs, op="traced_rms_t", **FAST)


@pytest.mark.parametrize(("layer", "inputs", "grads"), [
    (torch.nn.RMSNorm(6), {"x": ("batch", 6)}, ("x",)),
    (torch.nn.BatchNorm2d(3), {"x": ("batch", 3, "h", "w")}, ("x", "weight")),
    (torch.nn.InstanceNorm1d(4, affine=True), {"x": ("batch", 4, "n")}, ()),
    (torch.nn.MultiheadAttention(8, 2, batch_first=True),
     {"query": ("batch", "s", 8), "key": ("batch", "s", 8), "value": ("batch", "s", 8)}, ()),
    (torch.nn.LSTM(4, 3, batch_first=True), {"input": ("batch", 3, 4)}, ()),
])
def test_torch_layers_trace_once_and_match_torch(layer, inputs, grads):
    torch.manual_seed(0)
    op = TracedOp(layer, inputs=inputs, grads=grads, name=f"traced_layer_{type(layer).__name__}")
    for n in (2, 5, 3):
        params = {d: n for d in op.param_names}
        values = _values(op.input_shapes(params), op.input_shapes(params).values(), n)
        got = op.reference(values, params, get_model("fp64"))
        tensors = {k: torch.tensor(v, requires_grad=k in grads) for k, v in values.items()}
        want = op.ref.flat(tensors)[0]
        for name, w in zip(op.outputs(params), want, strict=False):
            np.testing.assert_allclose(got[name].value, w.detach().numpy(), rtol=1e-9,
                                       atol=1e-12)
    assert op.ref.captures == 1


def test_batch_norm_in_training_mode_is_judged():
    layer = torch.nn.BatchNorm2d(3)

    def good(x, weight, bias):
        return {"out": F.batch_norm(x, None, None, weight, bias, training=True)}

    def eval_statistics(x, weight, bias):  # running statistics of a fresh layer: 0 and 1
        return {"out": F.batch_norm(x, torch.zeros(3, dtype=x.dtype),
                                    torch.ones(3, dtype=x.dtype), weight, bias)}

    inputs = {"x": ("batch", 3, "h", "w")}
    dims = {"batch": (2, 8), "h": (1, 6), "w": (1, 6)}  # training needs two values a channel
    assert check_kernel(good, reference=layer, inputs=inputs, dims=dims, op="traced_bn_train",
                        **FAST).verdict == "pass"
    with pytest.raises(KernelMismatch):
        check_kernel(eval_statistics, reference=layer, inputs=inputs, dims=dims,
                     op="traced_bn_train", **FAST)


def returns_numpy(x):
    return np.tanh(x.numpy())


def test_a_reference_that_leaves_torch_is_told_so():
    op = TracedOp(returns_numpy, inputs={"x": ("n",)}, name="traced_numpy_ref")
    with pytest.raises(InvalidArgument, match="leaves torch") as info:
        op.outputs({"n": 3})
    assert "declare shapes" not in str(info.value)
    assert "test_traced_symbolic.py" in str(info.value)


def test_a_dims_mismatch_is_one_clean_message(capfd):
    op = TracedOp(torch.mm, inputs={"input": ("n", "k"), "mat2": ("m", "n")}, name="traced_mm_bad")
    with pytest.raises(InvalidArgument) as info:
        op.outputs({"n": 2, "k": 3, "m": 4})
    text = str(info.value)
    assert "n=2, k=3, m=4" in text and "share a dimension name" in text
    assert "\n" not in text
    out, err = capfd.readouterr()
    assert "fake_tensor" not in out + err and "Traceback" not in out + err


def conv(x, w):
    return F.conv2d(x, w, padding=1)


CONV = {"x": ("batch", 3, "h", "w"), "w": (4, 3, 3, 3)}
CONV_DIMS = {"h": (2, 6), "w": (2, 6)}


def test_an_nhwc_layout_reaches_a_traced_kernel_and_is_judged():
    shapes = []

    def channels_last(x, w):
        shapes.append(tuple(x.shape))
        return {"out": F.conv2d(x.permute(0, 3, 1, 2), w, padding=1)}

    def reads_nchw(x, w):  # takes the NHWC array as if it were NCHW
        return {"out": F.conv2d(x.reshape(x.shape[0], 3, x.shape[1], x.shape[2]), w,
                                padding=1)}

    kwargs = {"reference": conv, "inputs": CONV, "dims": CONV_DIMS,
              "layouts": {"x": ("NHWC",)}, "op": "traced_conv_nhwc", **FAST}
    assert check_kernel(channels_last, **kwargs).verdict == "pass"
    assert shapes and all(s[-1] == 3 for s in shapes)  # channels last, every case
    with pytest.raises(KernelMismatch):
        check_kernel(reads_nchw, **kwargs)


@pytest.mark.parametrize(("layouts", "match"), [
    (("NHWC",), "per input"),
    ({"w": ("NHWC",)}, "one dimension per letter"),
])
def test_a_layout_a_traced_op_cannot_honour_is_refused(layouts, match):
    with pytest.raises(InvalidArgument, match=match):
        check_kernel(lambda x, w: {"out": conv(x, w)}, reference=conv,
                     inputs={"x": ("batch", 3, "h", "w"), "w": (4, 3, 3)}, layouts=layouts,
                     op="traced_conv_refused", **FAST)
