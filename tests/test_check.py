"""Misbehaving kernels get failing verdicts that say what went wrong, never a crash."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from numoracle.cases.case import Case
from numoracle.targets.target import Target
from numoracle.checking.check import check_case
from numoracle.errors import InvalidArgument, UnsupportedCase
from numoracle.oracle.precision import get_model
from numoracle.running.runner import run_target

CASE = Case("matmul", {"batch_shape": (), "m": 3, "k": 4, "n": 2}, family="normal", seed=1)


def _target(fn, **kw) -> Target:
    return Target(name="k", op="matmul", backend="numpy", precision=get_model("fp32"), fn=fn, **kw)


def _raises(a, b):
    raise ValueError("index out of range in my kernel")


def _unwritten(a, b):
    out = np.full((a.shape[0], b.shape[1]), np.nan, np.float32)  # poisoned, never written
    out[0] = (a @ b)[0]
    return {"out": out}


@pytest.mark.parametrize(("fn", "expected"), [
    (_raises, "the kernel raised ValueError: index out of range in my kernel"),
    (lambda a, b: [a @ b], "it must return a dict of outputs by name"),
    (lambda a, b: {"result": a @ b}, "did not return ['out']"),
    (lambda a, b: {"out": (a @ b).T}, "expected shape (3, 2), got (2, 3)"),
    (lambda a, b: {"out": (a @ b).astype(np.float64)}, "expected dtype float32"),
    (lambda a, b: {"out": torch.from_numpy(a @ b)}, "expected a numpy array"),
    (_unwritten, "NaN where the reference is not NaN at 4 element(s), first at (1, 0)"),
])
def test_misbehaving_kernels_fail_with_a_reason(fn, expected: str) -> None:
    v = check_case(CASE, _target(fn))
    assert not v.passed
    assert expected in v.diagnosis


def test_a_correct_kernel_passes_and_is_diagnosed_on_request() -> None:
    v = check_case(CASE, _target(lambda a, b: {"out": a @ b}), with_diagnosis=True)
    assert v.passed and "within fp32" in v.diagnosis


def test_layouts_the_target_does_not_accept_are_made_contiguous() -> None:
    case = Case("matmul", {"batch_shape": (), "m": 3, "k": 4, "n": 2}, layouts={"a": "S"})
    seen = []

    def kernel(a, b):
        seen.append(a.flags.c_contiguous)
        return {"out": a @ b}

    assert check_case(case, _target(kernel, layouts=("C",))).passed
    assert check_case(case, _target(kernel)).passed
    assert seen == [True, False]


def test_case_and_target_must_agree() -> None:
    with pytest.raises(InvalidArgument, match="storage 'bf16' differs"):
        check_case(Case("matmul", {"m": 1, "k": 1, "n": 1}, storage="bf16"),
                   _target(lambda a, b: {"out": a @ b}))
    with pytest.raises(InvalidArgument, match="computes 'matmul'"):
        check_case(Case("linear", {"batch": 1, "in_features": 1, "out_features": 1}),
                   _target(lambda a, b: {"out": a @ b}))


def _out_of_memory(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    raise RuntimeError("CUDA error: out of memory (cudaErrorMemoryAllocation)")


def test_a_gpu_out_of_memory_leaves_the_case_unjudged() -> None:
    target = Target(name="oom", op="matmul", backend="numpy", precision="fp32",
                    fn=_out_of_memory)
    case = Case("matmul", {"batch_shape": (), "m": 1, "k": 1, "n": 1})
    with pytest.raises(UnsupportedCase, match="ran out of memory"):
        check_case(case, target)
    res = run_target(target, examples=5, store=None)
    assert res.verdict == "pass" and res.cases == 0 and res.unjudged >= 5
    assert res.status()[0] == "unjudged"


def test_releasing_device_memory_without_cupy_loaded_is_a_no_op() -> None:
    import subprocess
    import sys

    code = ("import sys; from numoracle.oracle.xp import release_cached_memory; "
            "assert release_cached_memory() == 0; assert 'cupy' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
