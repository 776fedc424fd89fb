"""Every output of every registered op is judged: a kernel that corrupts only
one output (a constant, a few elements a few bounds off, NaN where the
reference is finite) fails within a few cases, and no bound is negative.

The ops come from the registry, so an op added later is covered too."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.api import _fullest_params, op_outputs
from numoracle.cases.case import Case
from numoracle.targets.target import Target
from numoracle.checking.check import check_case
from numoracle.checking.corruption import CORRUPTIONS, Trial, cases_to_catch, prepare
from numoracle.kernels import available_targets
from numoracle.oracle.ops import all_ops
from numoracle.oracle.traced.op import TracedOp
from numoracle.running.runner import draw_cases

#: every op of the package and of installed plugins; traced ops are made per reference
#: (other test modules register their own while this one is collected), so they are
#: covered by the traced tests and the traced zoo instead
OPS = sorted(name for name, op in all_ops().items() if not isinstance(op, TracedOp))

#: cases drawn per op (one more, the smallest with every flag on, follows); a
#: corruption must be caught within them
CASES = 3
#: the largest case drawn (elements over all inputs): small, for CI
MAX_ELEMENTS = 600


def correct_target(op: str) -> Target:
    """A correct fp32 kernel of ``op`` that runs on a CPU."""
    found = [t for t in available_targets(op) if t.backend in ("numpy", "torch-cpu")
             and t.precision.storage.name == "fp32"]
    assert found, f"op {op!r} has no correct fp32 CPU target to corrupt"
    return found[0]


def draw(target: Target, n: int = CASES, seed: int = 0) -> list[Case]:
    """``n`` cases of the target's default strategy, small and with finite inputs."""
    return draw_cases(target, n, seed, max_overlays=0, families=("normal", "exact"),
                      max_elements=MAX_ELEMENTS)


_TRIALS: dict[str, tuple[Target, list[Trial]]] = {}


def trials(op: str) -> tuple[Target, list[Trial]]:
    """The drawn cases, then the smallest case with every flag on (so that every
    output the op can have is there: a bias gradient, a chain's deepest layer)."""
    if op not in _TRIALS:
        target = correct_target(op)
        fullest = Case(op, _fullest_params(op), storage="fp32", family="normal", seed=1)
        _TRIALS[op] = (target, prepare([*draw(target), fullest], target))
    return _TRIALS[op]


@pytest.mark.parametrize("op", OPS)
def test_every_output_of_every_op_is_judged(op: str) -> None:
    target, found = trials(op)
    assert found, f"no case of {op} could be judged"
    missed = []
    for trial in found:  # the correct kernel passes, and no bound is negative
        for name, ref in trial.reference.items():
            b = ref.bound(target.precision.probabilistic)
            assert not bool(np.any(b < 0)), f"{op}.{name}: a negative bound {np.nanmin(b)}"
    outputs = sorted({name for t in found for name in t.got})
    assert set(op_outputs(op)) <= set(outputs), (op_outputs(op), outputs)
    for name in outputs:
        for how in CORRUPTIONS:  # end to end once per output, the rest by the judge alone
            whole = how == CORRUPTIONS[0]
            if cases_to_catch(found, name, how, target.precision, end_to_end=whole) is None:
                missed.append(f"{name} ({how})")
    assert not missed, f"{op}: corrupted outputs never caught in {len(found)} cases: {missed}"


@pytest.mark.parametrize("op", OPS)
def test_the_correct_kernel_passes_on_the_same_cases(op: str) -> None:
    target, found = trials(op)
    for trial in found:
        v = check_case(trial.case, target, inputs=trial.inputs)
        assert v.passed, v.message()
