"""A target that can tell which engine its library ran has it recorded in a
failing verdict, its message and its repro."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from numoracle.cases.case import Case
from numoracle.targets.target import Target
from numoracle.checking.check import check_case
from numoracle.kernels.torch_conv2d_cuda import algorithm_of
from numoracle.store.repro import save_repro

calls: list[str] = []


def off_by_one(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    return {"out": np.matmul(a, b) + np.float32(1)}


def probe(call: Any) -> str:
    calls.append("probed")
    call()
    return "winograd (fake_winograd_kernel)"


def _target(fn: Any) -> Target:
    return Target(name="probed", op="matmul", backend="numpy", precision="fp32", fn=fn,
                  engine=probe)


def test_a_failing_verdict_names_the_engine(tmp_path: Path) -> None:
    case = Case("matmul", {"batch_shape": (), "m": 2, "k": 3, "n": 2})
    verdict = check_case(case, _target(off_by_one))
    assert not verdict.passed
    assert verdict.engine == "winograd (fake_winograd_kernel)"
    assert "engine: winograd (fake_winograd_kernel)" in verdict.message()
    folder = save_repro(verdict, _target(off_by_one), store=tmp_path)
    assert json.loads((Path(folder) / "repro.json").read_text())["verdict"]["engine"] \
        == verdict.engine


def test_a_passing_verdict_costs_no_probe() -> None:
    calls.clear()
    case = Case("matmul", {"batch_shape": (), "m": 2, "k": 3, "n": 2})
    verdict = check_case(case, _target(lambda a, b: {"out": np.matmul(a, b)}))
    assert verdict.passed and verdict.engine is None and not calls


def test_kernel_names_map_to_algorithm_classes() -> None:
    assert algorithm_of(["cudnn::winograd_nonfused::winogradForwardData4x4"]) == "winograd"
    assert algorithm_of(["fft2d_r2c_32x32", "fft2d_c2r_32x32"]) == "fft"
    assert algorithm_of(["sm80_xmma_fprop_implicit_gemm_tf32f32"]) == "gemm"
    assert algorithm_of(["void cudnn::cnn::conv2d_grouped_direct_kernel"]) == "unknown"
