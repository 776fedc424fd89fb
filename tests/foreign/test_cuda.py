"""The CUDA C example: a .so built by nvcc whose entry point takes device
pointers and a stream. Here (no GPU) it is compiled and its target made; the
GPU-marked tests run it on CuPy arrays."""

from __future__ import annotations

from pathlib import Path

import pytest

from numoracle.foreign import run, shared_library_target

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SRC = str(EXAMPLES / "cuda" / "linear.cu")
ARGS = ["x", "weight", "bias", "grad_output", "y", "grad_input", "grad_weight",
        "batch", "in_features", "out_features", "stream"]


def _target(build, tmp_path: Path, bug: bool, backend: str = "cupy"):
    lib = build("nvcc", "-O2", "-shared", "-Xcompiler", "-fPIC",
                *(["-DPLANTED_BUG"] if bug else []), SRC, "-o", "{out}",
                out="liblinear_cuda_bug.so" if bug else "liblinear_cuda.so")
    return shared_library_target(lib, "linear_f32_cuda", op="linear", args=ARGS,
                                 device="cuda", backend=backend, returns="status",
                                 error_symbol="linear_last_error", spec_dir=tmp_path)


def test_cuda_example_compiles_and_makes_a_target(build, tmp_path: Path) -> None:
    t = _target(build, tmp_path, False)
    assert t.backend == "cupy" and t.outputs == ("y", "grad_input", "grad_weight")
    if t.unavailable_reason() is not None:  # no GPU here: the run says so, no call is made
        assert run(t, examples=2, store=None).verdict == "skipped"


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["cupy", "torch-cuda"])
def test_cuda_kernel_on_device_pointers(build, tmp_path: Path, backend: str,
                                        request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("cupy" if backend == "cupy" else "torch_cuda")
    res = run(_target(build, tmp_path, False, backend), examples=40, store=None)
    assert res.verdict == "pass" and res.cases == 40, res.message
    res = run(_target(build, tmp_path, True, backend), examples=40, store=tmp_path / "r")
    assert res.verdict == "FAIL"
    assert res.diagnosis.startswith("grad_weight: exceeds every precision model")
    assert "the kernel reads x as F" in res.diagnosis
