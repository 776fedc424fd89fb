"""The candidate's process draws a case's inputs again itself (``NUMORACLE_KERNELBENCH_DRAWS
=device``): the same bits as the judge's, checked by fingerprints; inputs that differ stop
the judgement, not judged; verdicts are those of the path that hands the inputs over."""

from __future__ import annotations

import importlib
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from numoracle.kernelbench import sandbox
from numoracle.kernelbench.cases import KBCase, case_inputs
from numoracle.kernelbench.draws import (
    DRAWS_VARIABLE,
    description,
    fingerprint,
    fingerprints,
    mismatch,
    regenerate,
)
from numoracle.kernelbench.judge import NOT_JUDGED, judge
from numoracle.kernelbench.problem import load_problem
from numoracle.kernelbench.reference import DTYPES

judge_module = importlib.import_module("numoracle.kernelbench.judge")


@pytest.fixture
def regenerating(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DRAWS_VARIABLE, "device")


@pytest.mark.parametrize("problem", ["gemm_gelu", "cross_entropy", "batchnorm"])
@pytest.mark.parametrize("family", ["official", "signed", "tiny"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_regenerated_inputs_are_the_judges_bit_for_bit(problems: Path, problem: str,
                                                       family: str, dtype: str) -> None:
    p = load_problem(problems / f"{problem}.py")
    base = p.dropout_off()
    case = KBCase(sizes=tuple(sorted((k, max(v // 2, 1)) for k, v in p.knobs.items()
                                     if v >= 4))[:1], family=family, seed=7)
    first, second, told = regenerate(
        description(p, case, base, dtype=dtype, device="cpu"), DTYPES)
    for draw, made in ((1, first), (2, second)):
        ours = case_inputs(p, case, base, draw=draw, dtype=DTYPES[dtype])
        assert len(ours) == len(made)
        for a, t in zip(ours, made, strict=True):
            assert isinstance(t, torch.Tensor) and t.dtype in (DTYPES[dtype], torch.int64)
            b = (t.float() if t.dtype == torch.bfloat16 else t).numpy()
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes()
        assert fingerprints([torch.from_numpy(a).to(DTYPES[dtype]) if a.dtype.kind == "f"
                             else torch.from_numpy(a) for a in ours]) \
            == told["first" if draw == 1 else "second"]


def test_defaults_the_candidate_changed_do_not_change_its_draws(problems: Path) -> None:
    p = load_problem(problems / "gemm_gelu.py")
    told = description(p, KBCase(seed=3), {}, dtype="float32", device="cpu")
    *_, honest = regenerate(told, DTYPES)
    torch.set_default_dtype(torch.float64)
    torch.set_default_device("meta")
    try:
        first, _, changed = regenerate(told, DTYPES)
        assert torch.get_default_dtype() == torch.float64
    finally:
        torch.set_default_device(None)
        torch.set_default_dtype(torch.float32)
    assert changed == honest and first[0].device.type == "cpu"


def test_a_fingerprint_sees_one_bit_an_exchange_and_a_shape() -> None:
    x = torch.rand(37, 53)
    flipped = x.clone()
    flipped.view(torch.int32)[5, 7] ^= 1
    swapped = x.clone()
    swapped[[0, 1]] = swapped[[1, 0]]
    base = fingerprint(x)
    assert fingerprint(x.clone()) == base
    assert fingerprint(flipped) != base and fingerprint(swapped) != base
    assert fingerprint(x.reshape(53, 37)) != base
    narrow = x.to(torch.bfloat16)
    assert fingerprint(narrow) == fingerprint(narrow.clone()) != fingerprint(narrow.float())
    narrow.view(torch.int16)[36, 52] ^= 1 << 15
    assert fingerprint(narrow) != fingerprint(x.to(torch.bfloat16))
    labels = torch.arange(10, dtype=torch.int64) * (1 << 40)
    assert fingerprint(labels) != fingerprint(labels + 1)
    assert fingerprint(3) == ("value", "3") != fingerprint(4)


def test_a_fingerprint_spans_pieces_and_is_its_definition(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    from numoracle.kernelbench import draws  # noqa: PLC0415

    x = torch.randn(100_000, dtype=torch.float64)  # 200,000 words
    whole = fingerprint(x)
    monkeypatch.setattr(draws, "_CHUNK", draws._PERIOD)  # seven pieces, a short last one
    assert fingerprint(x) == whole
    words = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    w = torch.arange(words.numel()) % 32749 + 1
    lo, hi = words & 0xFFFF, words >> 16
    assert whole == ((100_000,), "float64", int(lo.sum()), int(hi.sum()), int((lo * w).sum()),
                     int((hi * w).sum()))


def test_mismatch_names_the_input_and_the_draw() -> None:
    ours = {"first": [((4,), "float32", 1, 2, 3, 4), ("value", "3")],
            "second": [((4,), "float32", 1, 2, 3, 4), ("value", "3")]}
    assert mismatch(ours, ours, ["x", "k"]) is None
    theirs = {"first": ours["first"], "second": [((4,), "float32", 1, 2, 3, 5), ("value", "3")]}
    text = mismatch(ours, theirs, ["x", "k"])
    assert text is not None and "input 'x' of the second draw" in text and DRAWS_VARIABLE in text
    assert "no fingerprint" in str(mismatch(ours, None, ["x", "k"]))


@pytest.mark.parametrize(("problem", "candidate", "status", "words"), [
    ("relu", "relu_correct", "pass", "within"),
    ("relu", "relu_zeros", "fail", "outside the bound"),
    ("relu", "relu_mutates", "fail", "shares memory with input"),
    ("gemm_gelu", "gemm_gelu_correct", "pass", "within"),
    ("gemm_gelu", "gemm_gelu_last_row", "fail", "outside the bound"),
    ("relu", "relu_default_dtype", "pass", "within"),
])
def test_verdicts_through_the_candidates_own_draws(problems: Path, candidates: Path,
                                                   problem: str, candidate: str, status: str,
                                                   words: str, regenerating: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[dict[str, Any]] = []
    shared = sandbox.Sandbox._shared

    def spy(self: Any, request: Any) -> Any:
        out = shared(self, request)
        sent.append(out)
        return out

    monkeypatch.setattr(sandbox.Sandbox, "_shared", spy)
    j = judge(problems / f"{problem}.py", candidates / f"{candidate}.py", examples=2)
    assert j.status == status and words in j.reason, j.reason
    assert any("drew its inputs itself" in n for n in j.notes)
    assert sent and all("first" not in r and "second" not in r and "draws" in r
                        and "shared_inputs" not in r for r in sent)


@pytest.mark.parametrize(("problem", "candidate", "kw", "status", "words"), [
    ("gemm_gelu", "gemm_gelu_correct", {"max_bytes": 4000}, "pass", "within"),
    ("gemm_gelu", "gemm_gelu_last_row", {"max_bytes": 4000}, "fail", "outside the bound"),
    ("gemm_gelu", "gemm_gelu_custom_backward", {}, "pass", "(outputs and gradients)"),
    ("gemm_gelu", "gemm_gelu_custom_backward", {"max_bytes": 4000}, "pass", "within"),
    ("relu", "relu_backward_no_mask", {}, "fail", "grad x:"),
    ("gemm_gelu", "gemm_gelu_weight_grad_zero", {}, "fail", "grad linear.weight:"),
    ("gemm_gelu", "gemm_gelu_correct", {"precision": "bf16"}, "pass", "within"),
    ("gemm_gelu", "gemm_gelu_last_row", {"precision": "bf16"}, "fail", "outside the bound"),
])
def test_pieces_gradients_and_bf16_through_the_candidates_own_draws(
        problems: Path, candidates: Path, problem: str, candidate: str, kw: dict[str, Any],
        status: str, words: str, regenerating: None) -> None:
    j = judge(problems / f"{problem}.py", candidates / f"{candidate}.py", examples=4,
              isolated=False, **kw)
    assert j.status == status and words in j.reason, j.reason
    if "max_bytes" in kw and status == "pass":  # every row, in pieces
        assert j.official is not None and j.official.case.span


def test_inputs_drawn_with_another_seed_are_not_judged(problems: Path, candidates: Path,
                                                       regenerating: None,
                                                       monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    def planted(*args: Any, **kwargs: Any) -> dict[str, Any]:
        told = description(*args, **kwargs)
        return {**told, "seed": told["seed"] + 1}  # the candidate draws another case

    monkeypatch.setattr(judge_module, "description", planted)
    j = judge(problems / "relu.py", candidates / "relu_correct.py", examples=0)
    assert j.status == NOT_JUDGED, j.reason
    assert "drew other inputs than the judge's: input 'x' of the first draw" in j.reason
    j = judge(problems / "relu.py", candidates / "relu_zeros.py", examples=0)
    assert j.status == NOT_JUDGED and "drew other inputs" in j.reason  # never a verdict


def test_a_drawn_case_with_other_inputs_stops_the_judgement(problems: Path, candidates: Path,
                                                            regenerating: None,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    def planted(problem: Any, case: KBCase, *args: Any, **kwargs: Any) -> dict[str, Any]:
        told = description(problem, case, *args, **kwargs)
        return told if case.official else {**told, "family": "large"}

    monkeypatch.setattr(judge_module, "description", planted)
    j = judge(problems / "relu.py", candidates / "relu_correct.py", examples=3, isolated=False)
    assert j.status == NOT_JUDGED and "drew other inputs" in j.reason, j.reason


def test_the_request_holds_a_few_bytes_instead_of_the_inputs(
        problems: Path, candidates: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: dict[str, int] = {}
    shared = sandbox.Sandbox._shared

    def spy(self: Any, request: Any) -> Any:
        out = shared(self, request)
        mode = "device" if "draws" in out else "host"
        end = out.get("shared_inputs", (None, 0))[1]
        sizes[mode] = len(pickle.dumps(out)) + end
        return out

    monkeypatch.setattr(sandbox, "SHARED_INPUT_BYTES", 1)
    monkeypatch.setattr(sandbox.Sandbox, "_shared", spy)
    for mode in ("host", "device"):
        monkeypatch.setenv(DRAWS_VARIABLE, mode)
        assert judge(problems / "gemm_gelu.py", candidates / "gemm_gelu_correct.py",
                     examples=0).status == "pass"
    inputs = sum(a.nbytes for a in case_inputs(load_problem(problems / "gemm_gelu.py"),
                                               KBCase(), {}, draw=1, dtype=torch.float32)
                 if isinstance(a, np.ndarray))
    assert sizes["host"] >= 2 * inputs  # both draws handed over
    assert sizes["device"] < sizes["host"] - 2 * inputs + 1024


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64,
                                   torch.bool])
def test_a_fingerprint_on_the_gpu_is_the_hosts(dtype: torch.dtype) -> None:
    x = torch.randn(3 * (1 << 20) + 17, dtype=torch.float64) * 1e3  # pieces, a short last one
    x = x.to(dtype) if dtype != torch.bool else x > 0
    assert fingerprint(x.cuda()) == fingerprint(x)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_verdicts_through_the_candidates_own_draws_on_the_gpu(problems: Path, candidates: Path,
                                                              regenerating: None) -> None:
    good = judge(problems / "gemm_gelu.py", candidates / "gemm_gelu_correct.py", examples=2,
                 device="cuda")
    assert good.status == "pass", good.reason
    assert any("drew its inputs itself, by torch's generator on cuda" in n for n in good.notes)
    bad = judge(problems / "gemm_gelu.py", candidates / "gemm_gelu_last_row.py", examples=0,
                device="cuda")
    assert bad.status == "fail" and "outside the bound" in bad.reason, bad.reason
