"""How often a traced evaluation on a device reads values back to the host: every
``bool``, ``float``, ``int``, ``item``, ``tolist``, ``cpu`` or ``numpy`` of a tensor
waits for the device (a synchronisation). Counted here in torch's namespace on the CPU
(the same code as on a GPU) for the rows the GPU profile measures; a branch that only
skips a few passes computes them instead on a device, and the tests of several radii
are read together, so each row stays under a small budget."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.capture import capture
from numoracle.oracle.traced.interpret import evaluate
from numoracle.oracle.traced.op import TracedOp
from numoracle.oracle.traced.rules import RuleContext
from numoracle.oracle.xp import namespace_named

#: the conversions of a tensor that read its values on the host
READS = ("__bool__", "__float__", "__int__", "__index__", "item", "tolist", "cpu", "numpy")


def _softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def _layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b)


def _cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, labels)


def _fp32(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32).astype(np.float64)


#: row: (reference, inputs, gradients, reads allowed per evaluation)
ROWS: dict[str, tuple[Callable[..., Any], Callable[[np.random.Generator], dict[str, Any]],
                      tuple[str, ...], int]] = {
    "softmax": (_softmax, lambda r: {"x": _fp32(r, (8, 64))}, (), 25),
    "layer_norm_fwd_bwd": (_layer_norm, lambda r: {"x": _fp32(r, (8, 64)),
                                                   "w": _fp32(r, (64,)), "b": _fp32(r, (64,))},
                           ("x", "w", "b"), 60),
    "cross_entropy": (_cross_entropy, lambda r: {"logits": _fp32(r, (8, 50)),
                                                 "labels": r.integers(0, 50, 8)}, (), 50),
}


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read of a tensor's values from now on, by name (a read inside another,
    torch's own dispatch of one conversion through another, counted once)."""
    seen: list[str] = []
    busy = [False]
    for name in READS:
        orig = getattr(torch.Tensor, name)

        def counted(self: Any, *args: Any, _orig: Any = orig, _name: str = name,
                    **kwargs: Any) -> Any:
            if busy[0]:
                return _orig(self, *args, **kwargs)
            busy[0] = True
            seen.append(_name)
            try:
                return _orig(self, *args, **kwargs)
            finally:
                busy[0] = False

        monkeypatch.setattr(torch.Tensor, name, counted)
    return seen


@pytest.mark.parametrize("row", sorted(ROWS))
def test_a_traced_evaluation_on_a_device_reads_it_a_few_times(
        row: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fn, make, grads, budget = ROWS[row]
    inputs = make(np.random.default_rng(0))
    integers = {k: (0, 50) for k, v in inputs.items() if v.dtype.kind == "i"}
    op = TracedOp(fn, inputs={k: torch.from_numpy(v) for k, v in inputs.items()},
                  grads=grads, name=f"reads_{row}", integers=integers)
    rng = np.random.default_rng(1)
    for k, shape in op.input_shapes({}).items():
        inputs.setdefault(k, _fp32(rng, shape))
    graph = capture(op.ref, {k: inputs[k] for k in op.ref.names},
                    {k: v for k, v in inputs.items() if k.startswith("grad_")})
    base = op.context(get_model("fp32"))
    ctx = RuleContext(base.model, base.claims, xp=namespace_named("torch"), device="cpu")
    given = {k: torch.from_numpy(v) if v.dtype.kind == "f" else v for k, v in inputs.items()}
    evaluate(graph, given, ctx)  # (first use: dtype probes, constants)
    seen = _counting(monkeypatch)
    out = evaluate(graph, given, ctx)
    assert set(out) == set(graph.outputs)
    # the counter sees the reads that remain (a contraction's grid, a special value's
    # test), and no more than the budget
    assert 0 < len(seen) <= budget, (row, len(seen), sorted(set(seen)))
