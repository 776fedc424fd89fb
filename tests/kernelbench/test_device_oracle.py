"""The judge's oracle where the candidate runs: torch's namespace (here on the CPU,
standing in for a GPU), and the fall-back when the whole instance does not fit."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import numoracle.kernelbench.judge  # noqa: F401 - the module, below
from benchmarks.kernelbench.admission import out_of_memory
from benchmarks.kernelbench.official import classify
from numoracle.oracle.xp import is_torch

judge_module = sys.modules["numoracle.kernelbench.judge"]


def run(problems: Path, candidates: Path, problem: str, candidate: str, **kw: Any) -> Any:
    kw.setdefault("examples", 0)
    kw.setdefault("isolated", False)
    return judge_module.judge(problems / f"{problem}.py", candidates / f"{candidate}.py", **kw)


@pytest.fixture
def torch_namespace(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The oracle in torch's namespace on the CPU, as on a GPU; the namespaces it ran in."""
    seen: list[str] = []
    evaluate = judge_module.evaluate

    def spy(graph: Any, inputs: Any, ctx: Any, *args: Any, **kw: Any) -> Any:
        seen.append("torch" if is_torch(ctx.xp) else ctx.xp.__name__)
        return evaluate(graph, inputs, ctx, *args, **kw)

    monkeypatch.setattr(judge_module, "oracle_device", lambda device: torch.device("cpu"))
    monkeypatch.setattr(judge_module, "evaluate", spy)
    return seen


def test_the_oracle_on_the_device_passes_right_and_fails_wrong_gradients(
        problems: Path, candidates: Path, torch_namespace: list[str]) -> None:
    good = run(problems, candidates, "gemm_gelu", "gemm_gelu_custom_backward", examples=1)
    assert good.status == "pass" and good.backward, good.reason
    bad = run(problems, candidates, "gemm_gelu", "gemm_gelu_weight_grad_zero")
    assert bad.status == "fail" and "grad linear.weight" in bad.reason, bad.reason
    assert torch_namespace and set(torch_namespace) == {"torch"}


def test_the_oracle_in_a_strict_namespace_judges_as_on_the_host(
        problems: Path, candidates: Path, strict: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge's oracle with CuPy's refusals on the CPU (tests/oracle/traced/strict_xp:
    no host array beside its arrays, no implicit conversion): right candidates pass and
    wrong ones fail, forward and backward, every evaluation in that namespace."""
    seen: list[Any] = []
    evaluate = judge_module.evaluate

    def spy(graph: Any, inputs: Any, ctx: Any, *args: Any, **kw: Any) -> Any:
        seen.append(ctx.xp)
        return evaluate(graph, inputs, ctx, *args, **kw)

    monkeypatch.setattr(judge_module, "oracle_device", lambda device: torch.device("cpu"))
    monkeypatch.setattr(judge_module, "namespace_named", lambda name: strict)
    monkeypatch.setattr(judge_module, "evaluate", spy)
    good = run(problems, candidates, "gemm_gelu", "gemm_gelu_custom_backward", examples=1)
    assert good.status == "pass" and good.backward, good.reason
    bad = run(problems, candidates, "gemm_gelu", "gemm_gelu_weight_grad_zero")
    assert bad.status == "fail" and "grad linear.weight" in bad.reason, bad.reason
    for problem in ("softmax", "batchnorm", "cross_entropy"):
        right = run(problems, candidates, problem, f"{problem}_correct", examples=1)
        assert right.status == "pass", (problem, right.reason)
    assert seen and all(xp is strict for xp in seen)


def test_a_whole_instance_the_device_cannot_hold_is_judged_in_pieces(
        problems: Path, candidates: Path, oracle_runs_out_once: list[int]) -> None:
    calls = oracle_runs_out_once
    good = run(problems, candidates, "gemm_gelu", "gemm_gelu_correct")
    assert good.status == "pass", good.reason
    assert good.official.case.span[:2] == (0, 8)  # every row, in pieces
    assert any("did not fit the device's memory" in n for n in good.notes)
    calls.clear()
    bad = run(problems, candidates, "gemm_gelu", "gemm_gelu_last_row")
    assert bad.status == "fail" and bad.failing is bad.official, bad.reason
    calls.clear()
    shared = run(problems, candidates, "batchnorm", "batchnorm_correct")
    assert shared.status == "pass" and not shared.official.case.rows
    assert not shared.official.case.span
    assert any("its distribution judged at" in n for n in shared.notes)
    row = {**shared.as_dict(), "official_how": "reduced"}
    assert classify(row) == "reduced sizes"
    # a driver that judges it again alone asks the judge not to fall back: not judged,
    # for want of memory (out_of_memory reads it so), nothing judged smaller
    calls.clear()
    stopped = run(problems, candidates, "gemm_gelu", "gemm_gelu_correct", fall_back=False)
    assert stopped.status == "not judged" and out_of_memory(stopped.as_dict()), stopped.reason
    assert stopped.official is None and len(calls) == 1


def test_a_comparison_that_runs_out_of_memory_is_judged_as_the_oracles(
        problems: Path, candidates: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison's float64 arrays out of device memory: not the candidate's fault;
    judged in pieces of rows, or (no fall-back) not judged, for want of memory."""
    compare = judge_module.compare
    calls: list[int] = []

    def first_runs_out(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise MemoryError("Out of memory allocating 8,589,934,592 bytes (simulated)")
        return compare(*args, **kw)

    monkeypatch.setattr(judge_module, "compare", first_runs_out)
    good = run(problems, candidates, "gemm_gelu", "gemm_gelu_correct")
    assert good.status == "pass" and good.official.case.span, good.reason
    assert any("the comparison ran out of device memory" in n for n in good.notes)
    calls.clear()
    stopped = run(problems, candidates, "gemm_gelu", "gemm_gelu_correct", fall_back=False)
    assert stopped.status == "not judged" and out_of_memory(stopped.as_dict()), stopped.reason


def test_how_an_official_instance_was_judged() -> None:
    assert classify({"status": "pass", "official_how": "whole"}) == "whole"
    assert classify({"status": "fail", "official_how": "sampled"}) == "sampled rows"
    assert classify({"status": "pass", "official_how": "pieces"}) == "whole"
    assert classify({"status": "abstain", "official_how": ""}) == "refused"
    assert classify({"status": "not judged", "official_how": "whole"}) == "refused"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_oracle_on_the_gpu_judges_whole_instances(problems: Path,
                                                      candidates: Path) -> None:
    good = run(problems, candidates, "gemm_gelu", "gemm_gelu_custom_backward", examples=2,
               device="cuda", isolated=True)
    assert good.status == "pass" and not good.official.case.rows, good.reason
    assert good.kernels and any("CUDA kernels" in n for n in good.notes)
    bad = run(problems, candidates, "gemm_gelu", "gemm_gelu_weight_grad_zero", device="cuda")
    assert bad.status == "fail" and "grad linear.weight" in bad.reason, bad.reason


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("namespace", ["cupy", "torch"])
def test_the_oracle_on_the_gpu_evaluates_in_the_namespace_the_switch_names(
        problems: Path, candidates: Path, namespace: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """CuPy where it works (the default), torch's namespace where forced: either judges
    a right candidate right and a wrong one wrong, evaluating where the switch says."""
    if namespace == "cupy":
        pytest.importorskip("cupy")
    from numoracle.oracle.xp import GPU_NAMESPACE_VARIABLE, gpu_namespace

    monkeypatch.setenv(GPU_NAMESPACE_VARIABLE, namespace)
    assert ("torch" if is_torch(gpu_namespace()) else gpu_namespace().__name__) == namespace
    seen: list[str] = []
    evaluate = judge_module.evaluate

    def spy(graph: Any, inputs: Any, ctx: Any, *args: Any, **kw: Any) -> Any:
        seen.append("torch" if is_torch(ctx.xp) else ctx.xp.__name__)
        return evaluate(graph, inputs, ctx, *args, **kw)

    monkeypatch.setattr(judge_module, "evaluate", spy)
    good = run(problems, candidates, "gemm_gelu", "gemm_gelu_custom_backward", examples=1,
               device="cuda")
    assert good.status == "pass" and good.backward, good.reason
    bad = run(problems, candidates, "gemm_gelu", "gemm_gelu_weight_grad_zero", device="cuda")
    assert bad.status == "fail" and "grad linear.weight" in bad.reason, bad.reason
    assert seen and set(seen) == {namespace}


@pytest.mark.parametrize("piece", [5, 1 << 24])
def test_whether_zeros_would_pass_is_decided_alike_a_piece_at_a_time(
        monkeypatch: pytest.MonkeyPatch, piece: int) -> None:
    from numoracle.oracle.tracked import bounded  # noqa: PLC0415

    monkeypatch.setattr(judge_module, "COMPARE_PIECE", piece)
    small = np.full((6, 4), 1e-9)
    tiny = bounded(small, np.full((6, 4), 1e-6))
    assert judge_module._within_bound_of_zero(tiny)
    one_out = small.copy()
    one_out[5, 3] = 1.0  # the last row's piece
    assert not judge_module._within_bound_of_zero(bounded(one_out, np.full((6, 4), 1e-6)))
    assert judge_module._within_bound_of_zero(bounded(np.zeros((6, 4)), None))
    assert not judge_module._within_bound_of_zero(bounded(np.ones(()), None))
