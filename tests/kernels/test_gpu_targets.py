"""GPU targets (CuPy kernels, torch CUDA) against float64; skipped without a GPU.

The error measure is ``max |got - ref| / S`` with ``S`` the sum of the
absolute values of an element's terms: below 1e-4 for fp32 and below 1e-2
for bf16, fp16 and TF32 (loose sanity limits; the oracle judges for real).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from float64_reference import make_host, reference

from numoracle.targets.target import LAYOUTS, Target
from numoracle.kernels import get_backend, get_target
from numoracle.oracle.formats import quantize

pytestmark = pytest.mark.gpu

TOL = {"fp32": 1e-4, "tf32": 1e-2, "bf16": 1e-2, "fp16": 1e-2}
ODD = (1, 7, 33, 129)
TORCH_CUDA = ("torch-cuda-fp32", "torch-cuda-tf32", "torch-cuda-bf16", "torch-cuda-fp16")


def shapes(op: str, m: int, k: int, n: int, bias: bool = True, batch_shape=()) -> dict:
    if op == "matmul":
        return {"a": batch_shape + (m, k), "b": batch_shape + (k, n)}
    out = {"x": (m, k), "weight": (n, k), "grad_output": (m, n)}
    if bias:
        out["bias"] = (n,)
    return out



def run_target(t: Target, host: dict, layout: str = "C") -> dict[str, np.ndarray]:
    be = get_backend(t.backend)
    storage = t.precision.storage.name
    lay = layout if layout in t.layouts else "C"
    dev = {k: be.to_device(v, storage, lay) for k, v in host.items()}
    out = t.fn(**dev)
    got = {}
    for k, v in out.items():
        assert be.check_output(v, storage=storage) is None, (t.name, k, be.check_output(v))
        got[k] = be.to_host(v)
    return got


def assert_close(got: dict, ref: dict, tol: float, what: str) -> None:
    assert set(got) == set(ref), what
    for k, (val, s) in ref.items():
        assert got[k].shape == val.shape, (what, k)
        assert np.isfinite(got[k]).all(), f"{what} {k}: unwritten (NaN) or non-finite elements"
        ratio = np.abs(got[k] - val) / np.where(s > 0, s, 1.0)
        assert float(ratio.max()) < tol, (what, k, float(ratio.max()))


# -- CuPy kernels -------------------------------------------------------------


@pytest.mark.parametrize("m", ODD)
@pytest.mark.parametrize("k", ODD)
@pytest.mark.parametrize("n", ODD)
def test_cupy_matmul_odd_sizes(cupy: Any, m: int, k: int, n: int) -> None:
    t = get_target("cupy-fp32", "matmul")
    host = make_host(shapes("matmul", m, k, n), "fp32", seed=m * 10007 + k * 101 + n)
    assert_close(run_target(t, host), reference("matmul", host), TOL["fp32"], f"{m}x{k}x{n}")


@pytest.mark.parametrize("batch_shape", [(1,), (3,), (2, 3), (2, 1, 2)])
@pytest.mark.parametrize("dims", [(1, 1, 1), (7, 33, 5), (33, 17, 129)])
def test_cupy_matmul_batch(cupy: Any, batch_shape: tuple, dims: tuple) -> None:
    t = get_target("cupy-fp32", "matmul")
    host = make_host(shapes("matmul", *dims, batch_shape=batch_shape), "fp32", seed=len(dims))
    assert_close(run_target(t, host), reference("matmul", host), TOL["fp32"], str(batch_shape))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch", ODD)
@pytest.mark.parametrize("dims", [(1, 1), (7, 33), (129, 17), (33, 129)])
def test_cupy_linear_odd_sizes(cupy: Any, bias: bool, batch: int, dims: tuple) -> None:
    t = get_target("cupy-fp32", "linear")
    host = make_host(shapes("linear", batch, dims[0], dims[1], bias), "fp32", seed=batch)
    assert_close(run_target(t, host), reference("linear", host), TOL["fp32"], f"{batch} {dims}")


@pytest.mark.parametrize("op", ["linear", "matmul"])
@pytest.mark.parametrize("dims", [(1, 1, 1), (7, 33, 129), (129, 7, 33), (40, 70, 20)])
def test_cupy_exact_regime_is_exact(cupy: Any, op: str, dims: tuple) -> None:
    """Small integers make every sum exact: any indexing slip is a nonzero error."""
    t = get_target("cupy-fp32", op)
    bs = (3,) if op == "matmul" else ()
    host = make_host(shapes(op, *dims, batch_shape=bs), "fp32", seed=7, integers=True)
    got = run_target(t, host)
    for k, (val, _) in reference(op, host).items():
        np.testing.assert_array_equal(got[k], val, err_msg=f"{op} {k} {dims}")


def test_cupy_is_deterministic(cupy: Any) -> None:
    t = get_target("cupy-fp32", "linear")
    host = make_host(shapes("linear", 65, 300, 33), "fp32", seed=11)
    a, b = run_target(t, host), run_target(t, host)
    for k in a:
        assert a[k].tobytes() == b[k].tobytes(), k


def test_cupy_large_row_count_uses_grid_stride(cupy: Any) -> None:
    """More row tiles than one grid dimension holds (65535): the y loop covers them."""
    from numoracle.kernels.cupy_linear import TILE, gemm

    m = TILE * 65535 + 3
    a = cupy.ones((m, 2), dtype=cupy.float32)
    b = cupy.full((2, 1), 2.0, dtype=cupy.float32)
    out = gemm(a, b, m=m, n=1, k=2)
    assert bool((out == 4.0).all())


def test_cupy_rejects_wrong_dtype(cupy: Any) -> None:
    from numoracle.errors import InvalidArgument

    t = get_target("cupy-fp32", "matmul")
    with pytest.raises(InvalidArgument, match="float32"):
        t.fn(a=cupy.ones((2, 2)), b=cupy.ones((2, 2)))


def test_cupy_backend_layouts_roundtrip(cupy: Any) -> None:
    be = get_backend("cupy")
    host = make_host({"a": (3, 4, 5)}, "fp32", seed=1)["a"]
    for layout in LAYOUTS:
        for storage in ("fp64", "fp32", "fp16"):
            h = quantize(host, storage)
            arr = be.to_device(h, storage, layout)
            np.testing.assert_array_equal(be.to_host(arr), h)
    assert not be.to_device(host, "fp32", "S").flags.c_contiguous
    assert be.to_device(host, "fp32", "F").flags.f_contiguous
    assert "numpy" in be.check_output(np.zeros(2))  # type: ignore[operator]


# -- torch CUDA -----------------------------------------------------------------


@pytest.mark.parametrize("name", TORCH_CUDA)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("bias", [True, False])
def test_torch_cuda_linear(torch_cuda: Any, name: str, layout: str, bias: bool) -> None:
    t = get_target(name, "linear")
    if t.unavailable_reason():
        pytest.skip(t.unavailable_reason())
    storage = t.precision.storage.name
    host = make_host(shapes("linear", 33, 129, 7, bias), storage, seed=5)
    got = run_target(t, host, layout)
    assert_close(got, reference("linear", host), TOL[t.precision.name], f"{name} {layout}")


@pytest.mark.parametrize("name", TORCH_CUDA)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("batch_shape", [(), (3,), (2, 2)])
def test_torch_cuda_matmul(torch_cuda: Any, name: str, layout: str, batch_shape: tuple) -> None:
    t = get_target(name, "matmul")
    if t.unavailable_reason():
        pytest.skip(t.unavailable_reason())
    storage = t.precision.storage.name
    host = make_host(shapes("matmul", 17, 257, 9, batch_shape=batch_shape), storage, seed=2)
    got = run_target(t, host, layout)
    assert_close(got, reference("matmul", host), TOL[t.precision.name], f"{name} {layout}")


def test_torch_cuda_fp32_is_not_tf32_even_when_the_process_enables_it(torch_cuda: Any) -> None:
    """The fp32 target pins TF32 off; the tf32 target really uses TF32 (on Ampere+)."""
    mm = torch_cuda.backends.cuda.matmul
    host = make_host(shapes("matmul", 64, 1024, 64), "fp32", seed=9)
    val, s = reference("matmul", host)["out"]
    old = mm.fp32_precision
    mm.fp32_precision = "tf32"
    try:
        fp32 = run_target(get_target("torch-cuda-fp32", "matmul"), host)["out"]
    finally:
        mm.fp32_precision = old
    assert mm.fp32_precision == old
    assert float(np.max(np.abs(fp32 - val) / s)) < 1e-5
    tf32 = run_target(get_target("torch-cuda-tf32", "matmul"), host)["out"]
    if torch_cuda.cuda.get_device_capability() >= (8, 0):
        assert float(np.max(np.abs(tf32 - val) / s)) > 1e-5
