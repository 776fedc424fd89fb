"""The float64 reference on the GPU (CuPy) agrees with the host's."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.checking.check import GPU_REFERENCE_WORK, _reference_inputs
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model


@pytest.mark.gpu
@pytest.mark.parametrize("model", ["fp32", "bf16", "tf32"])
def test_gpu_reference_matches_the_host(model: str) -> None:
    cupy = pytest.importorskip("cupy")
    storage = "bf16" if model == "bf16" else "fp32"
    case = Case("linear", {"batch": 128, "in_features": 1024, "out_features": 700, "bias": True},
                storage=storage, family="normal", seed=3)
    inputs = case.inputs()
    dev = _reference_inputs(case, inputs)
    assert isinstance(dev["x"], cupy.ndarray), f"work above {GPU_REFERENCE_WORK}: on the GPU"
    op, m = get_op("linear"), get_model(model)
    host = op.reference(inputs, case.params, m)
    gpu = {k: v.to_host() for k, v in op.reference(dev, case.params, m).items()}
    for name, h in host.items():
        g = gpu[name]
        tol = float(np.max(h.ref_err + g.ref_err))
        np.testing.assert_allclose(g.value, h.value, rtol=0, atol=tol)
        np.testing.assert_allclose(g.det, h.det, rtol=1e-12)
        np.testing.assert_array_equal(g.det == 0, h.det == 0)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["fp32", "tf32", "bf16", "fp16"])
@pytest.mark.parametrize("rounding", ["rne", "rz"])
def test_device_quantize_is_the_hosts_bit_for_bit(fmt: str, rounding: str) -> None:
    """quantize and representable run on the device (no host round trip) and give
    the host's bits: normals, subnormals of every format, ties, overflow, NaN, Inf."""
    cupy = pytest.importorskip("cupy")
    from numoracle.oracle.formats import quantize, representable

    rng = np.random.default_rng(7)
    x = np.concatenate([
        rng.standard_normal(50_000) * 2.0 ** rng.integers(-160, 140, 50_000),
        np.ldexp(1.0 + np.arange(64) * 2.0**-11, -20),  # ties of the narrow formats
        [0.0, -0.0, np.nan, np.inf, -np.inf, 2.0**-149, 2.0**-1074, 3.4e38, 7e4, 1e300],
    ])
    host_q = quantize(x, fmt, rounding)
    dev_q = quantize(cupy.asarray(x), fmt, rounding)
    assert isinstance(dev_q, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(dev_q).view(np.int64), host_q.view(np.int64))
    np.testing.assert_array_equal(cupy.asnumpy(representable(cupy.asarray(x), fmt)),
                                  representable(x, fmt))


@pytest.mark.gpu
def test_the_pool_the_reference_leaves_is_released_before_the_kernel() -> None:
    """A reference on the GPU leaves freed blocks in CuPy's pool; the kernel call
    that follows gets them back (a cuDNN workspace cannot use CuPy's pool)."""
    cupy = pytest.importorskip("cupy")
    from numoracle.oracle.xp import CACHED_MEMORY_KEPT, release_cached_memory

    pool = cupy.get_default_memory_pool()
    a = cupy.ones(CACHED_MEMORY_KEPT // 8 + 2**20)  # float64: above what the pool may keep
    del a
    held = pool.free_bytes()
    assert held > CACHED_MEMORY_KEPT
    # every whole chunk goes back; what stays is a free piece of a chunk another
    # array of the process still uses (a few bytes, as other tests left them)
    assert release_cached_memory() == held - pool.free_bytes() > CACHED_MEMORY_KEPT
    assert pool.free_bytes() < CACHED_MEMORY_KEPT
    small = cupy.ones(1024)
    del small
    assert release_cached_memory() == 0  # a little is kept: small cases pay nothing
