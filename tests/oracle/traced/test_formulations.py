"""Each composite rule bounds the algebraically equal formulations a careful kernel
may use (docs/traced-rules.md): two per rule, from benchmarks.traced.formulations,
each passing on drawn cases (the 1,000-case runs: benchmarks/results/cpu/special/)."""

from __future__ import annotations

import pytest
import torch

from benchmarks.traced.formulations import (
    _CE_ROWS, FORMULATIONS, cross_entropy_rows, cross_entropy_softmax_minus_onehot, softmax)
from numoracle import check_kernel

RULES = sorted({name.split(":")[0] for name in FORMULATIONS})


@pytest.mark.parametrize("rule", RULES)
def test_two_formulations_pass(rule: str) -> None:
    pair = [(n, k, spec) for n, (k, spec) in FORMULATIONS.items() if n.split(":")[0] == rule]
    assert len(pair) == 2
    for name, kernel, spec in pair:
        result = check_kernel(kernel, backend="torch-cpu", examples=15, seed=1, store=None,
                              name=kernel.__name__, **spec)
        assert result.verdict == "pass", name


def test_a_formulation_that_drops_the_shift_and_overflows_is_caught() -> None:
    """The bound covers formulations, not wrong answers: softmax without the shift
    overflows to NaN on large logits, where the reference is finite."""
    def unshifted(x: torch.Tensor) -> dict[str, torch.Tensor]:
        e = torch.exp(x * 100.0)
        return {"out": e / e.sum(-1, keepdim=True)}

    def reference(x: torch.Tensor) -> torch.Tensor:
        return softmax(x * 100.0)

    with pytest.raises(AssertionError):
        check_kernel(unshifted, reference=reference, inputs={"x": ("batch", "n")},
                     dims={"n": (2, 16)}, backend="torch-cpu", examples=30, seed=0,
                     store=None)


def _sum_in_bf16(x: torch.Tensor, labels: torch.Tensor,
                 grad_out: torch.Tensor) -> dict[str, torch.Tensor]:
    """The cross-entropy gradient with its denominator rounded to bf16."""
    m = x.amax(-1, keepdim=True)
    e = torch.exp(x - m)
    s = e.sum(-1, keepdim=True).bfloat16().float()
    onehot = torch.nn.functional.one_hot(labels, x.shape[-1]).float()
    return {"out": cross_entropy_rows(x, labels), "grad_x": (e / s - onehot) * grad_out[:, None]}


def _onehot_after_scaling(x: torch.Tensor, labels: torch.Tensor,
                          grad_out: torch.Tensor) -> dict[str, torch.Tensor]:
    """``e / s * dloss - onehot``: the one-hot subtracted after the scaling."""
    out = cross_entropy_softmax_minus_onehot(x, labels, torch.ones_like(grad_out))
    onehot = torch.nn.functional.one_hot(labels, x.shape[-1]).float()
    return {"out": out["out"], "grad_x": (out["grad_x"] + onehot) * grad_out[:, None] - onehot}


@pytest.mark.parametrize("kernel", [_sum_in_bf16, _onehot_after_scaling])
@pytest.mark.parametrize("precision", ["fp32", "fp32+triton"])
def test_the_one_hot_gradient_form_still_catches(kernel, precision: str) -> None:
    """The cross-entropy gradient's factored form ``(p - onehot) dloss`` is bounded
    with a rounding more, not a tolerance: a gradient whose softmax sums in bf16,
    or that scales before subtracting the one-hot, is caught."""
    with pytest.raises(AssertionError):
        check_kernel(kernel, reference=cross_entropy_rows, precision=precision,
                     backend="torch-cpu", examples=40, seed=0, store=None, **_CE_ROWS)
