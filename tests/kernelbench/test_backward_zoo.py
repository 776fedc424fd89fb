"""Backward mutants of the KernelBench zoo: a right forward with wrong gradients is
caught, the unchanged Model with its gradients judged passes; on a sampled official
instance the verdict says why its gradients are judged on the drawn cases instead."""

from __future__ import annotations

from pathlib import Path

from benchmarks.kernelbench.candidates import BACKWARD_MUTANTS, write_candidate
from numoracle.kernelbench.judge import defines_backward, judge


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


def test_gradients_on_a_sampled_instance_are_judged_on_drawn_cases(problems: Path,
                                                                   tmp_path: Path) -> None:
    path = problems / "gemm_gelu.py"
    bad = write_candidate(tmp_path, path, "grad_halved")
    j = judge(path, bad, examples=2, isolated=False, max_bytes=4000, shrink=False)
    assert j.official is not None and j.official.case.rows  # the official one sampled
    assert any("gradients are not judged on the sampled official instance" in n
               for n in j.notes)
    assert j.status == "fail" and j.failing is not j.official and "grad " in j.reason
