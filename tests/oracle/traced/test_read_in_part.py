"""A reader that computes its operand in part (``rules.IN_PART``): cross-entropy's
forward, the log-softmax at each sample's target alone, gives the bits of the whole
log-softmax followed by ``nll_loss_forward``, and falls back to them where it declines."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from numoracle.oracle import fused_cpu
from numoracle.oracle.formats import quantize
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced import RULES, Claims, RuleContext, interpret
from numoracle.oracle.traced.capture import Reference, capture

FIELDS = ("value", "det", "prob", "ref_err", "mag", "n")


def _loss(reduction, ignore_index, weighted):
    def f(x, t, w):
        return F.cross_entropy(x, t, weight=w if weighted else None, reduction=reduction,
                               ignore_index=ignore_index)
    return f


def _evaluate(monkeypatch, g, inputs, ctx, in_part):
    whole = []
    log_softmax = RULES["aten._log_softmax.default"]
    monkeypatch.setitem(RULES, "aten._log_softmax.default",
                        lambda *a, **k: whole.append(1) or log_softmax(*a, **k))
    if not in_part:
        monkeypatch.setattr(interpret, "_read_in_part", lambda *a: {})
    out = interpret.evaluate(g, dict(inputs), ctx)
    monkeypatch.undo()
    return out, bool(whole)


@pytest.mark.parametrize("storage,rounding", [("fp32", "per-op"), ("bf16", "per-op"),
                                              ("bf16", "fused"), ("fp16", "per-op")])
@pytest.mark.parametrize("reduction,ignore_index,weighted",
                         [("mean", -100, False), ("sum", 3, False), ("none", -100, False),
                          ("mean", 0, False), ("mean", -100, True)])
@pytest.mark.parametrize("values", ["normal", "wide", "masked"])
def test_cross_entropy_forward_in_part_gives_the_whole_rules_bits(
        monkeypatch, storage, rounding, reduction, ignore_index, weighted, values):
    rng = np.random.default_rng(hash((storage, reduction, values)) % 2**32)
    rows, classes = 12, 37
    x = rng.standard_normal((rows, classes)) * (30.0 if values == "wide" else 1.0)
    if values == "masked":
        x[2, 5:] = -np.inf  # (a row with -inf: the loops decline, both rules run)
    x = quantize(x, storage)
    t = rng.integers(0, classes, rows)
    t[[1, 7]] = 3 if ignore_index == 3 else ignore_index if ignore_index != 0 else 0
    w = quantize(rng.uniform(0.5, 2.0, classes), storage)
    g = capture(Reference(_loss(reduction, ignore_index, weighted), ("x", "t", "w")),
                {"x": x, "t": t, "w": w})
    ctx = RuleContext(get_model(storage), Claims(rounding=rounding))
    inputs = {"x": x, "t": t, "w": w}
    for loop_min in (1, 1 << 30):
        monkeypatch.setattr(fused_cpu, "LOOP_MIN", loop_min)
        part, whole_run = _evaluate(monkeypatch, g, inputs, ctx, True)
        monkeypatch.setattr(fused_cpu, "LOOP_MIN", loop_min)
        whole, _ = _evaluate(monkeypatch, g, inputs, ctx, False)
        declines = loop_min > 1 or weighted or ignore_index == 0 or values == "masked"
        assert whole_run == declines
        for name, got in whole.items():
            for f in FIELDS:
                np.testing.assert_array_equal(getattr(part[name], f), getattr(got, f),
                                              err_msg=f"{name}.{f}")


def test_a_log_softmax_read_elsewhere_too_is_computed_whole(monkeypatch):
    """With the backward, the log-softmax's gradient reads it too: no reader takes it
    in part, and the evaluation is the plain one."""
    rng = np.random.default_rng(1)
    x, t = quantize(rng.standard_normal((8, 300)), "fp32"), rng.integers(0, 300, 8)
    ref = Reference(lambda x, t: F.cross_entropy(x, t), ("x", "t"), grads=("x",))
    g = capture(ref, {"x": x, "t": t}, {"grad_out": np.ones(())})
    nodes = list(g.module.graph.nodes)
    assert interpret._read_in_part(nodes, set(nodes), set()) == {}
    g = capture(Reference(lambda x, t: F.cross_entropy(x, t), ("x", "t")), {"x": x, "t": t})
    nodes = list(g.module.graph.nodes)
    assert [str(n.target) for n in interpret._read_in_part(nodes, set(nodes), set())] == [
        "aten.nll_loss_forward.default"]
    monkeypatch.setattr(fused_cpu, "LOOP_MIN", 1)
    out = interpret.evaluate(g, {"x": x, "t": t}, RuleContext(get_model("fp32")))["out"]
    expected = F.cross_entropy(torch.tensor(x), torch.tensor(t)).item()
    assert abs(out.value - expected) <= out.bound()
