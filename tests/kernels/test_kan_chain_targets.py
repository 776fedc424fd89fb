"""KAN chain targets against the oracle: networks of 1-3 layers, every layer's
outputs (the first layer's input gradient included); zero upstream gradient
gives exact zeros in every layer; reruns stay within the two-order yardstick;
seed 001's bug (the first layer's input gradient skipped) is caught at every depth.

The torch CPU targets run here; the CUDA targets (torch CUDA, CuPy) carry the
``gpu`` marker and skip cleanly without a GPU."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.checking.check import check_case, run_kernel
from numoracle.checking.rerun import check_reruns
from numoracle.kernels import get_target
from numoracle.oracle.ops.kan_chain import chain_outputs
from numoracle.running.runner import run_target
from numoracle.strategies import cases

GPU = pytest.mark.gpu
TARGETS = [pytest.param("torch-cpu-fp32"), pytest.param("torch-cpu-fp64"),
           pytest.param("torch-cuda-fp32", marks=GPU), pytest.param("torch-cuda-fp64", marks=GPU),
           pytest.param("cupy-fp32", marks=GPU)]
WIDTHS = {1: (3, 4), 2: (3, 5, 2), 3: (2, 4, 3, 2)}


def _target(name: str) -> Any:
    t = get_target(name, "kan_chain")
    reason = t.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    return t


def _case(name: str, layers: int, **params: Any) -> Case:
    base = {"layers": layers, "widths": WIDTHS[layers], "batch": 7, "grid_size": 5,
            "spline_order": 3, **params}
    storage = "fp64" if name.endswith("fp64") else "fp32"
    return Case("kan_chain", base, storage=storage, family="normal", seed=5)


@pytest.mark.parametrize("name", TARGETS)
@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("order", [1, 3, 5])
def test_correct_chain_passes(name: str, layers: int, order: int) -> None:
    verdict = check_case(_case(name, layers, spline_order=order), _target(name))
    assert verdict.passed, verdict.message()
    assert set(verdict.outputs) == set(chain_outputs(layers))


@pytest.mark.parametrize("name", [p for p in TARGETS if "fp64" not in p.values[0]])
def test_wide_batch_chain_passes(name: str) -> None:
    verdict = check_case(_case(name, 3, batch=128, widths=(8, 16, 8, 4)), _target(name))
    assert verdict.passed, verdict.message()


@pytest.mark.parametrize("name", TARGETS)
def test_zero_upstream_gradient_gives_exact_zeros_in_every_layer(name: str) -> None:
    target = _target(name)
    case = _case(name, 3, spline_order=2)
    inputs = case.inputs()
    inputs["grad_output"] = np.zeros_like(inputs["grad_output"])
    got, error = run_kernel(case, target, inputs)
    assert got is not None, error
    grads = [k for k in chain_outputs(3) if k.startswith("grad_")]
    assert len(grads) == 12
    for out in grads:
        assert np.all(got[out] == 0), out


@pytest.mark.parametrize("name", TARGETS)
def test_no_accumulation_across_calls(name: str) -> None:
    verdict = check_reruns(_case(name, 2, batch=16), _target(name), runs=3)
    assert verdict.passed, verdict.diagnosis


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_first_layer_input_gradient_skipped_is_caught_at_every_depth(layers: int,
                                                                       tmp_path: Path) -> None:
    mutant = importlib.import_module("numoracle.zoo.kan_chain").TARGETS[0]
    res = run_target(mutant, examples=20, seed=0, store=tmp_path,
                     strategy=cases(op="kan_chain", params={"layers": layers}))
    assert res.verdict == "FAIL", f"not caught in {res.cases} cases"
    assert res.diagnosis is not None and res.diagnosis.startswith("grad_input_0")
    assert res.repro is not None
