"""Backward mutants of the KernelBench zoo: a right forward with wrong gradients is
caught, the unchanged Model with its gradients judged passes; on a sampled official
instance the sampled inputs' gradients are judged on its rows, parameters' on drawn
cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.kernelbench.candidates import BACKWARD_MUTANTS, write_candidate
from numoracle.kernelbench.cases import KBCase
from numoracle.kernelbench.judge import (
    CPU_ACCURACY_NOTE,
    DEFAULT_MAX_BYTES,
    PRECISIONS,
    _Context,
    defines_backward,
    judge,
)
from numoracle.kernelbench.problem import load_problem


def test_backward_mutants_are_caught_and_the_model_passes(problems: Path,
                                                          tmp_path: Path) -> None:
    path = problems / "relu.py"
    model = write_candidate(tmp_path, path, "model")
    assert not defines_backward(model)  # the zoo's other rows stay forward-only
    j = judge(path, model, examples=1, isolated=False, backward=True)
    assert j.status == "pass" and "(outputs and gradients)" in j.reason, j.reason
    for body in BACKWARD_MUTANTS:
        cand = write_candidate(tmp_path, path, body)
        assert defines_backward(cand)  # judged with gradients by default
        bad = judge(path, cand, examples=1, isolated=False)
        assert bad.status == "fail" and bad.reason.startswith("grad "), (body, bad.reason)
        assert bad.official is not None and bad.official.outputs[0].passed  # forward right


def test_gradients_on_a_sampled_instance_are_judged_on_its_rows(problems: Path,
                                                                candidates: Path,
                                                                tmp_path: Path,
                                                                sampled_only: None) -> None:
    path = problems / "gemm_gelu.py"
    sampled = {"examples": 0, "isolated": False, "max_bytes": 4000, "shrink": False}
    good = judge(path, candidates / "gemm_gelu_custom_backward.py", **sampled)
    assert good.status == "pass" and "(outputs and gradients)" in good.reason, good.reason
    assert good.official is not None and good.official.case.rows  # the official one sampled
    assert any("gradients of the sampled inputs are judged on the sampled rows" in n
               for n in good.notes)
    halved = judge(path, write_candidate(tmp_path, path, "grad_halved"), **sampled)
    assert halved.status == "fail" and halved.failing is halved.official, halved.reason
    assert halved.reason.startswith("grad x")
    # a parameter's gradient is not determined by a sample of rows: caught on a drawn case
    weight = judge(path, candidates / "gemm_gelu_weight_grad_zero.py",
                   **{**sampled, "examples": 2})
    assert weight.status == "fail" and weight.failing is not weight.official
    assert "grad linear.weight" in weight.reason


def test_torchs_own_gelu_backward_passes_under_torchs_cpu_accuracy(problems: Path,
                                                                  candidates: Path,
                                                                  tmp_path: Path) -> None:
    # torch's vectorised CPU GELU backward evaluates erf by a polynomial with an absolute
    # error: the CPU claim (accuracy profile torch-cpu) names it, and says so
    path = problems / "gelu.py"
    j = judge(path, write_candidate(tmp_path, path, "model"), examples=0, isolated=False,
              backward=True)
    assert j.status == "pass", j.reason
    assert "fp32+torch-cpu bound" in j.reason and CPU_ACCURACY_NOTE in j.notes
    # under correctly rounded maths (the claim of a GPU candidate) the same run fails:
    # the claim, not a looser rule, is what lets it pass
    ieee = _Context(load_problem(path), write_candidate(tmp_path, path, "model"), "fp32",
                    "cpu", 60.0, DEFAULT_MAX_BYTES, isolated=False, backward=True)
    ieee.model = PRECISIONS["fp32"]
    try:
        assert not ieee.run(KBCase()).passed
    finally:
        ieee.close()
    # a real GELU-backward bug (the tanh form's derivative behind the erf form's forward,
    # off by up to 9e-4) stays caught under the CPU claim
    bad = judge(path, candidates / "gelu_backward_tanh.py", examples=0, isolated=False,
                backward=True)
    assert bad.status == "fail" and bad.reason.startswith("grad x"), bad.reason
    assert bad.official is not None and bad.official.outputs[0].passed  # forward right
