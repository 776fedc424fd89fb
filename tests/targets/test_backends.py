"""Backends: exact transfers, real layouts, poisoned outputs, output checks (CPU only)."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.targets.target import BACKENDS, LAYOUTS
from numoracle.errors import InvalidArgument
from numoracle.targets.backends import Backend, get_backend
from numoracle.oracle.formats import FORMATS, quantize

torch = pytest.importorskip("torch")

CPU_BACKENDS = ("numpy", "torch-cpu")
STORAGES = ("fp64", "fp32", "fp16", "bf16")
SHAPES = ((5,), (3, 4), (2, 3, 5))


def host_values(shape: tuple[int, ...], storage: str, seed: int = 0) -> np.ndarray:
    """Values exact in ``storage``, with signed zeros, infinities, NaN and a subnormal."""
    rng = np.random.default_rng(seed)
    x = quantize(rng.standard_normal(shape) * 8.0, storage)
    fmt = FORMATS[storage]
    special = [-0.0, 0.0, np.inf, -np.inf, np.nan, fmt.tiny / 4, -fmt.max]
    flat = x.reshape(-1)
    flat[: min(len(special), flat.size)] = special[: flat.size]
    return x


def elem_strides(backend: Backend, arr: object) -> tuple[int, ...]:
    if backend.name == "numpy":
        return tuple(s // arr.itemsize for s in arr.strides)  # type: ignore[attr-defined]
    return tuple(arr.stride())  # type: ignore[attr-defined]


def is_c_contiguous(backend: Backend, arr: object) -> bool:
    if backend.name == "numpy":
        return bool(arr.flags.c_contiguous)  # type: ignore[attr-defined]
    return bool(arr.is_contiguous())  # type: ignore[attr-defined]


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


@pytest.mark.parametrize("name", CPU_BACKENDS)
@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES)
def test_roundtrip_is_bit_exact(
    name: str, storage: str, layout: str, shape: tuple[int, ...]
) -> None:
    be = get_backend(name)
    host = host_values(shape, storage)
    arr = be.to_device(host, storage, layout)
    assert be.check_output(arr, storage=storage, shape=shape) is None
    back = be.to_host(arr)
    assert back.dtype == np.float64
    assert back.shape == shape
    np.testing.assert_array_equal(back, host)
    assert np.array_equal(np.signbit(back), np.signbit(host))


@pytest.mark.parametrize("name", CPU_BACKENDS)
@pytest.mark.parametrize("shape", SHAPES)
def test_layout_strides(name: str, shape: tuple[int, ...]) -> None:
    be = get_backend(name)
    host = host_values(shape, "fp32")
    nd = len(shape)
    c = be.to_device(host, "fp32", "C")
    assert is_c_contiguous(be, c)
    assert elem_strides(be, c) == c_strides(shape)

    f = be.to_device(host, "fp32", "F")
    assert elem_strides(be, f) == tuple(reversed(c_strides(shape[::-1])))

    t = be.to_device(host, "fp32", "T")
    if nd >= 2:
        swapped = shape[:-2] + (shape[-1], shape[-2])
        st = c_strides(swapped)
        assert elem_strides(be, t) == st[:-2] + (st[-1], st[-2])
        assert not is_c_contiguous(be, t)
    else:
        assert is_c_contiguous(be, t)

    s = be.to_device(host, "fp32", "S")
    assert not is_c_contiguous(be, s)
    assert elem_strides(be, s)[-1] == 2
    if nd >= 2:
        assert not is_c_contiguous(be, f)


def test_numpy_layouts_are_views_of_dense_buffers() -> None:
    be = get_backend("numpy")
    host = host_values((3, 4), "fp32")
    assert be.to_device(host, "fp32", "F").flags.f_contiguous
    t = be.to_device(host, "fp32", "T")
    assert t.base is not None
    assert t.base.flags.c_contiguous
    assert t.base.shape == (4, 3)
    s = be.to_device(host, "fp32", "S")
    assert s.base is not None
    assert s.base.shape == (3, 8)
    # the gaps of the strided buffer are NaN, so a kernel ignoring strides fails
    assert np.isnan(s.base[:, 1::2]).all()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_torch_bf16_layouts(layout: str) -> None:
    be = get_backend("torch-cpu")
    host = host_values((3, 4), "bf16")
    t = be.to_device(host, "bf16", layout)
    assert t.dtype == torch.bfloat16
    assert t.device.type == "cpu"
    np.testing.assert_array_equal(t.float().numpy().astype(np.float64), host)


def test_to_device_does_not_alias_host() -> None:
    host = np.ones((2, 2))
    for name in CPU_BACKENDS:
        be = get_backend(name)
        arr = be.to_device(host, "fp64", "C")
        host[0, 0] = 5.0
        assert be.to_host(arr)[0, 0] == 1.0
        host[0, 0] = 1.0


@pytest.mark.parametrize("name", CPU_BACKENDS)
@pytest.mark.parametrize("storage", STORAGES)
def test_poisoned(name: str, storage: str) -> None:
    be = get_backend(name)
    p = be.poisoned((2, 3), storage)
    assert be.check_output(p, storage=storage, shape=(2, 3)) is None
    assert np.isnan(be.to_host(p)).all()
    assert is_c_contiguous(be, p)


def test_check_output_describes_wrong_arrays() -> None:
    np_be, torch_be = get_backend("numpy"), get_backend("torch-cpu")
    arr = np.zeros((2, 2), np.float32)
    assert "torch" in torch_be.check_output(arr)  # type: ignore[operator]
    assert "numpy" in torch_be.check_output(arr)  # type: ignore[operator]
    assert "torch" in np_be.check_output(torch.zeros(2, 2))  # type: ignore[operator]
    assert "dtype" in np_be.check_output(arr, storage="fp64")  # type: ignore[operator]
    assert "shape" in np_be.check_output(arr, shape=(2, 3))  # type: ignore[operator]
    assert np_be.check_output(arr, storage="fp32", shape=(2, 2)) is None
    assert "dtype" in torch_be.check_output(  # type: ignore[operator]
        torch.zeros(2, dtype=torch.bfloat16), storage="fp16"
    )


def test_cuda_backends_reject_host_arrays() -> None:
    cuda = get_backend("torch-cuda")
    assert "cpu" in cuda.check_output(torch.zeros(2))  # type: ignore[operator]


@pytest.mark.parametrize("name", BACKENDS)
def test_available_is_none_or_a_reason(name: str) -> None:
    reason = get_backend(name).available()
    assert reason is None or (isinstance(reason, str) and reason)
    if name in CPU_BACKENDS:
        assert reason is None


def test_get_backend_is_cached() -> None:
    assert get_backend("torch-cpu") is get_backend("torch-cpu")


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: get_backend("jax"), "backend 'jax' is unknown"),
        (lambda: get_backend("numpy").to_device(np.ones(2), "tf32", "C"), "tf32"),
        (lambda: get_backend("torch-cpu").to_device(np.ones(2), "tf32", "C"), "tf32"),
        (lambda: get_backend("numpy").to_device(np.ones(2), "fp8", "C"), "fp8"),
        (lambda: get_backend("numpy").to_device(np.ones(2), "fp32", "X"), "layout='X'"),
        (lambda: get_backend("numpy").to_device(np.array([0.1]), "fp32", "C"), "quantize"),
        (lambda: get_backend("numpy").to_device(np.array([1e5]), "fp16", "C"), "fp16"),
        (lambda: get_backend("torch-cpu").to_device(np.array([1 + 2**-9]), "bf16"), "bf16"),
        (lambda: get_backend("numpy").poisoned((2,), "tf32"), "tf32"),
        (lambda: get_backend("cupy").dtype("bf16"), "bfloat16"),
    ],
)
def test_invalid_arguments(call: object, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        call()  # type: ignore[operator]
