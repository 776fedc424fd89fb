"""Argument checks of the SGD step factories and the models they claim."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.errors import InvalidArgument
from numoracle.targets import get_backend
from numoracle.kernels.sgd_steps import STEPS, cupy_sgd_step, step_model, torch_cuda_sgd_step
from numoracle.kernels.torch_conv2d_cuda import TARGETS as CUDNN_TARGETS


def test_step_models_match_the_conv2d_targets_they_build_on() -> None:
    claims = {t.name: t.precision for t in CUDNN_TARGETS}
    assert step_model("torch-cuda") == claims["torch-cuda-fp32"]
    assert step_model("torch-cuda-tf32") == claims["torch-cuda-tf32"]
    assert step_model("cupy").flush_subnormal_inputs
    assert step_model("numpy").name == step_model("torch-cpu").name == "fp32"
    assert set(STEPS) >= {"torch-cpu", "numpy", "torch-cuda", "torch-cuda-tf32", "cupy"}


def test_invalid_step_arguments() -> None:
    with pytest.raises(InvalidArgument, match="'fortran'"):
        step_model("fortran")
    x, t = np.zeros((1, 1, 3, 3), np.float32), np.zeros((1, 1, 1, 1), np.float32)
    if get_backend("cupy").available() is not None:
        with pytest.raises(InvalidArgument, match="needs a usable CuPy GPU"):
            cupy_sgd_step(x, t, 0.1)
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        with pytest.raises(InvalidArgument, match="needs a CUDA device"):
            torch_cuda_sgd_step(x, t, 0.1)
    else:
        with pytest.raises(InvalidArgument, match="unknown keys"):
            torch_cuda_sgd_step(x, t, 0.1, {"pad": 1})
