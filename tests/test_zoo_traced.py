"""The traced zoo: every mutant is caught, and its correct kernel passes."""

from __future__ import annotations

import pytest

from numoracle.errors import KernelMismatch
from numoracle.zoo import traced, zoo_modules
from numoracle.zoo.traced import MUTANTS, TracedMutant, check

FAMILIES = {"softmax", "normalization", "pooling", "elementwise", "reductions", "convolution"}


def test_every_rule_family_has_a_mutant() -> None:
    assert {m.family for m in MUTANTS} >= FAMILIES
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_is_caught_and_correct_kernel_passes(mutant: TracedMutant) -> None:
    ok = check(mutant, mutant.correct, examples=6, seed=1)
    assert ok.verdict == "pass" and ok.cases == 6 and ok.worst_ratio < 1.0
    with pytest.raises(KernelMismatch, match=f"traced_zoo_{mutant.name}"):
        check(mutant, examples=40, seed=1)


def test_not_loaded_as_an_op_module() -> None:
    """Named after no op: the zoo's per-op loader never imports it."""
    assert "traced" in zoo_modules()
    assert traced.__name__ == "numoracle.zoo.traced"
