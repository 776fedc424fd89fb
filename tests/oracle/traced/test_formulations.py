"""Each composite rule bounds the algebraically equal formulations a careful kernel
may use (docs/traced-rules.md): two per rule, from benchmarks.traced.formulations,
each passing on drawn cases (the 1,000-case runs: benchmarks/results/cpu/special/)."""

from __future__ import annotations

import pytest
import torch

from benchmarks.traced.formulations import FORMULATIONS, softmax
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
