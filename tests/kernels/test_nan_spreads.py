"""The ``nan_spreads`` claim: NaN where the reference is finite is excused only in a
case with non-finite inputs, and only for a model that claims it (torch's CPU
bfloat16 GEMM, benchmarks/results/findings/torch-cpu-bf16-linear-nan-spreads)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.checking.check import check_case, judge
from numoracle.oracle.precision import get_model

FINDING = (Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "findings"
           / "torch-cpu-bf16-linear-nan-spreads")


def _finding() -> tuple[Case, dict[str, np.ndarray], dict[str, np.ndarray]]:
    case = Case.from_dict(json.loads((FINDING / "repro.json").read_text())["case"])
    arrays = np.load(FINDING / "arrays.npz")
    got = {k[len("got_"):]: arrays[k] for k in arrays.files if k.startswith("got_")}
    return case, case.inputs(), got


def test_stored_outputs_fail_without_the_claim_and_pass_with_it() -> None:
    case, inputs, got = _finding()
    plain = get_model("bf16", flush_subnormal_inputs=True)
    v = judge(case, plain, inputs, got, with_diagnosis=False)["grad_weight"]
    assert not v.passed
    assert v.nonfinite is not None and "NaN where the reference is not NaN" in v.nonfinite
    spread = judge(case, plain.with_(nan_spreads=True), inputs, got, with_diagnosis=False)
    assert all(o.passed for o in spread.values()), {k: o.worst_ratio for k, o in spread.items()}


def test_the_claim_still_judges_finite_results() -> None:
    """A wrong finite value in a case with non-finite inputs still fails."""
    case, inputs, got = _finding()
    model = get_model("bf16", flush_subnormal_inputs=True, nan_spreads=True)
    bad = {k: v.copy() for k, v in got.items()}
    gw = bad["grad_weight"]
    i, j = np.argwhere(np.isfinite(gw) & (gw != 0))[0]
    gw[i, j] *= 1.5
    assert not judge(case, model, inputs, bad, with_diagnosis=False)["grad_weight"].passed


def test_the_claim_excuses_nothing_when_the_inputs_are_finite() -> None:
    case = Case("linear", {"batch": 3, "in_features": 4, "out_features": 5, "bias": False},
                storage="bf16", family="normal", seed=0)
    inputs = case.inputs()
    assert all(np.isfinite(v).all() for v in inputs.values())
    ref = {"y": inputs["x"] @ inputs["weight"].T, "grad_input": inputs["grad_output"]
           @ inputs["weight"], "grad_weight": inputs["grad_output"].T @ inputs["x"]}
    got = {k: v.copy() for k, v in ref.items()}
    got["y"][0, 0] = np.nan
    model = get_model("bf16", nan_spreads=True)
    assert not judge(case, model, inputs, got, with_diagnosis=False)["y"].passed


def test_torch_cpu_bf16_passes_the_stored_case() -> None:
    pytest.importorskip("torch")
    from numoracle.kernels import get_target

    case, _, _ = _finding()
    target = get_target("torch-cpu-bf16", "linear")
    assert target.precision.nan_spreads
    verdict = check_case(case, target)
    assert verdict.passed, verdict.message()


CUDNN_FINDING = (Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "findings"
                 / "cudnn-tf32-grouped-conv-nan-spreads")


@pytest.mark.parametrize("name", ["torch-cuda-tf32-conv2d-1be30a6507ef",
                                  "torch-cuda-tf32-cl-conv2d-3a96e4d37e83"])
def test_cudnn_tf32_grouped_conv_recorded_outputs(name: str) -> None:
    """The H100's recorded outputs of two grouped convolutions (NaN in a group whose
    inputs are all finite): failing under the plain TF32 claim, passing under the
    cuDNN TF32 targets' claim, which differs from it in ``nan_spreads`` alone."""
    from numoracle.kernels.torch_conv2d_cuda import TARGETS
    from numoracle.store.repro import load_repro

    r = load_repro(CUDNN_FINDING / name)
    claim = next(t.precision for t in TARGETS if t.name == r.target_name)
    assert claim.nan_spreads
    assert claim.with_(nan_spreads=False) == r.model
    nan_out = [k for k, v in r.got.items() if np.isnan(v).any()]
    assert nan_out
    plain = judge(r.case, r.model, r.inputs, r.got, with_diagnosis=False)
    assert not all(plain[k].passed for k in nan_out)
    claimed = judge(r.case, claim, r.inputs, r.got, with_diagnosis=False)
    assert all(v.passed for v in claimed.values()), {k: v.worst_ratio for k, v in claimed.items()}
