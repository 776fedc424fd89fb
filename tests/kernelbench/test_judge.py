"""The judge: correct candidates pass, broken ones fail for the right reason."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.utils.cpp_extension import CUDA_HOME

from numoracle.kernelbench.cases import KBCase
from numoracle.kernelbench.judge import judge


def run(problems: Path, candidates: Path, problem: str, candidate: str, **kw: object):
    kw.setdefault("examples", 8)
    kw.setdefault("isolated", False)
    return judge(problems / f"{problem}.py", candidates / f"{candidate}.py", **kw)


@pytest.mark.parametrize(("problem", "candidate"), [
    ("relu", "relu_correct"),
    ("matmul", "matmul_correct"),
])
def test_correct_candidates_pass(problems: Path, candidates: Path, problem: str,
                                 candidate: str) -> None:
    j = run(problems, candidates, problem, candidate)
    assert j.status == "pass", j.reason
    assert j.cases > 1 and j.official is not None and j.official.passed
    assert j.kernelbench == {"0.01": True, "0.0001": True}


@pytest.mark.parametrize(("candidate", "words", "official_passes"), [
    ("relu_zeros", "outside the bound", False),
    ("relu_float64", "has dtype torch.float64", False),
    ("relu_parameter", "not a plain torch.Tensor", False),
    ("relu_result_reuse", "NaN where the reference is not NaN", False),
    ("relu_identity", "outside the bound", True),
    ("relu_mutates", "shares memory with input 'x'", False),
    ("relu_strides_ignored", "outside the bound", True),
    ("relu_shape_specialised", "outside the bound", True),
])
def test_broken_candidates_fail_for_their_reason(problems: Path, candidates: Path,
                                                 candidate: str, words: str,
                                                 official_passes: bool) -> None:
    j = run(problems, candidates, "relu", candidate, examples=30)
    assert j.status == "fail"
    assert words in j.reason
    assert j.official is not None and j.official.passed is official_passes
    if official_passes:
        assert j.reason.startswith("right at the benchmark's shape, wrong as an operator")
        assert not j.failing.case.official
        # KernelBench's own rule, on the official case, lets it through
        assert j.kernelbench["0.01"] and j.kernelbench["0.0001"]
    assert "--case" in j.replay()


def test_the_failing_case_shrinks_and_replays(problems: Path, candidates: Path) -> None:
    j = run(problems, candidates, "relu", "relu_strides_ignored", examples=30)
    case = j.failing.case
    assert "S" in case.layouts or "T" in case.layouts
    sizes = dict(case.sizes)
    assert sizes["batch_size"] * sizes["dim"] <= 4  # shrunk from up to 16 x 64
    again = run(problems, candidates, "relu", "relu_strides_ignored",
                case=KBCase.from_json(case.to_json()))
    assert again.status == "fail" and again.cases == 1


def test_isolated_candidates_run_in_their_own_process(problems: Path, candidates: Path,
                                                      tmp_path: Path) -> None:
    crash = tmp_path / "relu_exits.py"
    crash.write_text((candidates / "relu_correct.py").read_text().replace(
        "        return torch.clamp(x, min=0.0)",
        "        import os\n\n        os._exit(3)"))
    j = judge(problems / "relu.py", crash, examples=0, isolated=True, timeout=60)
    assert j.status == "fail"
    assert "exited with code 3" in j.reason


def test_a_bad_candidate_file_is_refused(problems: Path, tmp_path: Path) -> None:
    bad = tmp_path / "no_model_new.py"
    bad.write_text("import torch\n\nclass Model(torch.nn.Module):\n    pass\n")
    j = judge(problems / "relu.py", bad, examples=0, isolated=False)
    assert j.status == "refused" and "does not define ModelNew" in j.reason


def test_a_reference_op_without_a_rule_abstains_by_name(problems: Path, tmp_path: Path,
                                                        candidates: Path) -> None:
    odd = tmp_path / "odd.py"
    odd.write_text((problems / "relu.py").read_text().replace("torch.relu(x)",
                                                              "torch.special.i0(x)"))
    j = judge(odd, candidates / "relu_correct.py", examples=0, isolated=False)
    assert j.status == "abstain"
    assert j.missing == ["aten.special_i0.default"] or "i0" in j.reason


def test_parameters_bind_by_position_where_names_differ(problems: Path,
                                                        candidates: Path) -> None:
    j = run(problems, candidates, "gemm_gelu", "gemm_gelu_correct")
    assert j.status == "pass", j.reason
    assert any("bound by position and shape" in n and "weight<-linear.weight" in n
               for n in j.notes)


@pytest.mark.parametrize(("candidate", "kb_1e2", "kb_1e4"), [
    ("gemm_gelu_tanh", True, True),   # tanh-GELU claimed as the erf form: within 1e-4
    ("gemm_gelu_bf16", True, False),  # bfloat16 arithmetic claimed fp32: within 1e-2
])
def test_semantic_and_precision_downgrades_fail_where_allclose_passes(
        problems: Path, candidates: Path, candidate: str, kb_1e2: bool, kb_1e4: bool) -> None:
    j = run(problems, candidates, "gemm_gelu", candidate)
    assert j.status == "fail"
    assert j.failing is j.official and "outside the bound" in j.reason
    assert j.kernelbench == {"0.01": kb_1e2, "0.0001": kb_1e4}


def test_a_correct_candidate_passes_under_a_bf16_claim(problems: Path,
                                                       candidates: Path) -> None:
    j = run(problems, candidates, "gemm_gelu", "gemm_gelu_correct", precision="bf16")
    assert j.status == "pass", j.reason


def test_batch_norm_in_train_mode_and_ignored_affine_weights(problems: Path,
                                                             candidates: Path) -> None:
    assert run(problems, candidates, "batchnorm", "batchnorm_correct").status == "pass"
    j = run(problems, candidates, "batchnorm", "batchnorm_no_affine", examples=20)
    assert j.status == "fail" and j.official.passed  # default weights are ones, biases zeros
    assert j.failing.case.params == "drawn"


def test_dropout_is_switched_off_and_said(problems: Path, candidates: Path) -> None:
    j = run(problems, candidates, "dropout", "dropout_correct")
    assert j.status == "pass", j.reason
    assert any("dropout_p=0" in n for n in j.notes)


def test_a_degenerate_problem_is_flagged(problems: Path, candidates: Path) -> None:
    j = run(problems, candidates, "zero_reference", "relu_zeros")
    assert j.degenerate and any("degenerate" in n for n in j.notes)
    assert j.status == "pass"  # zeros is right: the reference is zero everywhere
    assert not run(problems, candidates, "relu", "relu_zeros").degenerate


# the official instance of gemm_gelu (batch 8) is above this float64 floor, two rows are not
SAMPLED_BYTES = 4000


def test_an_instance_too_large_is_run_whole_and_judged_on_sampled_rows(
        problems: Path, candidates: Path, sampled_only: None) -> None:
    j = run(problems, candidates, "gemm_gelu", "gemm_gelu_correct", examples=0,
            max_bytes=SAMPLED_BYTES)
    assert j.status == "pass", j.reason
    rows = j.official.case.rows
    assert rows[0] == 0 and rows[-1] == 7 and len(rows) >= 2
    assert any("rows 0" in n and "(batch_size) are judged" in n for n in j.notes)
    bad = run(problems, candidates, "gemm_gelu", "gemm_gelu_last_row", examples=0,
              max_bytes=SAMPLED_BYTES)
    assert bad.status == "fail" and bad.failing is bad.official, bad.reason
    again = run(problems, candidates, "gemm_gelu", "gemm_gelu_last_row",
                max_bytes=SAMPLED_BYTES, case=KBCase.from_json(bad.failing.case.to_json()))
    assert again.status == "fail" and again.failing.case.rows == rows


def test_rows_that_share_batch_statistics_are_not_sampled(problems: Path,
                                                          candidates: Path) -> None:
    j = run(problems, candidates, "batchnorm", "batchnorm_correct", examples=0, max_bytes=4096)
    assert j.status == "pass", j.reason
    assert not j.official.case.rows
    assert any("cannot be judged on its rows" in n for n in j.notes)


def test_cases_the_device_has_no_memory_for_are_not_judged(problems: Path,
                                                            candidates: Path) -> None:
    j = run(problems, candidates, "gemm_gelu", "gemm_gelu_out_of_memory", examples=30)
    assert j.status == "pass", j.reason  # batches above 8 skipped, not failed
    assert any("no memory for are not judged" in n for n in j.notes)
    big = KBCase(sizes=(("batch_size", 12),))
    again = run(problems, candidates, "gemm_gelu", "gemm_gelu_out_of_memory", case=big)
    assert again.status == "not judged" and "ran out of device memory" in again.reason


def test_a_candidate_that_refuses_unsupported_layouts_passes_on_official_inputs_only(
        problems: Path, candidates: Path) -> None:
    j = run(problems, candidates, "relu", "relu_contiguous_only", examples=12)
    assert j.status == "pass (official inputs only)" and j.passed
    assert j.refusals > 0 and "Tensors must be contiguous" in j.reason
    wrong = run(problems, candidates, "relu", "relu_strides_ignored", examples=30)
    assert wrong.status == "fail"  # silently wrong on the same layouts: FAIL


@pytest.mark.parametrize(("candidate", "device", "words"), [
    ("relu_needs_triton", "cpu", "No module named 'a_package_this_machine_does_not_have'"),
    pytest.param("relu_inline_cuda", "cpu", "CUDA", marks=pytest.mark.skipif(
        CUDA_HOME is not None, reason="needs a machine without a CUDA toolkit")),
    pytest.param("relu_correct", "cuda", "no CUDA device", marks=pytest.mark.skipif(
        torch.cuda.is_available(), reason="needs a machine without a GPU")),
])
def test_what_the_machine_lacks_is_not_judged(problems: Path, candidates: Path,
                                              candidate: str, device: str,
                                              words: str) -> None:
    j = run(problems, candidates, "relu", candidate, device=device)
    assert j.status == "not judged" and words in j.reason


def test_constants_derived_from_a_knob_follow_it(problems: Path, candidates: Path) -> None:
    j = run(problems, candidates, "cross_entropy", "cross_entropy_correct", examples=10)
    assert j.status == "pass", j.reason
    assert j.dropped == 0 and j.cases == 11


def test_cases_the_reference_rejects_are_dropped_and_counted(problems: Path,
                                                            candidates: Path) -> None:
    j = run(problems, candidates, "cross_entropy_fixed_labels", "cross_entropy_correct",
            examples=10)
    assert j.status == "pass", j.reason
    assert j.dropped > 0
    assert any(f"{j.dropped} drawn case" in n and "rejects dropped" in n for n in j.notes)


@pytest.mark.parametrize(("problem", "candidate", "words"), [
    ("relu", "relu_custom_backward", None),
    ("gemm_gelu", "gemm_gelu_custom_backward", None),
    ("relu", "relu_backward_no_mask", "grad x:"),
    ("gemm_gelu", "gemm_gelu_weight_grad_zero", "grad linear.weight:"),
])
def test_a_candidates_own_backward_is_judged(problems: Path, candidates: Path, problem: str,
                                             candidate: str, words: str | None) -> None:
    j = run(problems, candidates, problem, candidate, examples=10)
    assert j.backward  # on by default: the file defines a backward
    if words is None:
        assert j.status == "pass" and "(outputs and gradients)" in j.reason, j.reason
    else:
        assert j.status == "fail" and words in j.reason, j.reason


def test_backward_is_judged_on_request_and_through_the_candidates_process(
        problems: Path, candidates: Path) -> None:
    j = run(problems, candidates, "gemm_gelu", "gemm_gelu_correct", examples=0,
            backward=True, isolated=True)
    assert j.status == "pass" and "(outputs and gradients)" in j.reason, j.reason
    assert not run(problems, candidates, "gemm_gelu", "gemm_gelu_correct",
                   examples=0).backward  # torch ops only: off unless asked
    bad = run(problems, candidates, "relu", "relu_backward_no_mask", examples=8,
              isolated=True)
    assert bad.status == "fail" and "grad x:" in bad.reason, bad.reason
