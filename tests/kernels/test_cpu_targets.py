"""CPU targets (numpy, torch CPU) against float64, flag pinning, and the registry."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
from float64_reference import make_host, reference

from numoracle.targets.target import LAYOUTS, Target
from numoracle.errors import InvalidArgument
from numoracle.kernels import all_targets, available_targets, get_backend, get_target
from numoracle.kernels import target_names

torch = pytest.importorskip("torch")

from numoracle.kernels.torch_targets import TorchMode, precision_flags  # noqa: E402

CPU_TARGETS = ("numpy-fp32", "torch-cpu-fp32", "torch-cpu-bf16")
#: loose sanity tolerance on err / S (S = the sum of |terms|); the oracle judges for real
TOL = {"fp32": 1e-5, "bf16": 1e-2}


def shapes(op: str, dims: tuple[int, int, int], bias: bool, batch_shape=()) -> dict:
    p, q, r = dims
    if op == "matmul":
        return {"a": batch_shape + (p, q), "b": batch_shape + (q, r)}
    out = {"x": (p, q), "weight": (r, q), "grad_output": (p, r)}
    if bias:
        out["bias"] = (r,)
    return out




def run_target(t: Target, host: dict[str, np.ndarray], layout: str) -> dict[str, np.ndarray]:
    be = get_backend(t.backend)
    storage = t.precision.storage.name
    lay = layout if layout in t.layouts else "C"
    dev = {k: be.to_device(v, storage, lay) for k, v in host.items()}
    before = {k: be.to_host(v) for k, v in dev.items()}
    out = t.fn(**dev)
    for k, v in dev.items():  # inputs are left as they were
        np.testing.assert_array_equal(be.to_host(v), before[k], err_msg=f"{t.name} changed {k}")
    got = {}
    for k, v in out.items():
        assert be.check_output(v, storage=storage) is None, (t.name, k, be.check_output(v))
        got[k] = be.to_host(v)
    return got


@pytest.mark.parametrize("name", CPU_TARGETS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dims", [(1, 1, 1), (3, 7, 5), (17, 33, 9)])
def test_linear_close_to_float64(name: str, layout: str, bias: bool, dims: tuple) -> None:
    t = get_target(name, "linear")
    storage = t.precision.storage.name
    host = make_host(shapes("linear", dims, bias), storage, seed=sum(dims), integers=False)
    got = run_target(t, host, layout)
    ref = reference("linear", host)
    assert set(got) == set(ref)
    for k, (val, s) in ref.items():
        assert got[k].shape == val.shape, k
        err = np.abs(got[k] - val)
        assert np.all(err <= TOL[storage] * s + 1e-30), (name, k, float(np.max(err / s)))


@pytest.mark.parametrize("name", CPU_TARGETS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("batch_shape", [(), (3,), (2, 2)])
def test_matmul_close_to_float64(name: str, layout: str, batch_shape: tuple) -> None:
    t = get_target(name, "matmul")
    storage = t.precision.storage.name
    host = make_host(shapes("matmul", (5, 19, 6), False, batch_shape), storage, 1, False)
    got = run_target(t, host, layout)
    val, s = reference("matmul", host)["out"]
    assert got["out"].shape == val.shape
    assert np.all(np.abs(got["out"] - val) <= TOL[storage] * s)


@pytest.mark.parametrize("name", CPU_TARGETS)
@pytest.mark.parametrize("op", ["linear", "matmul"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_exact_regime_is_exact(name: str, op: str, layout: str) -> None:
    """Small integers: every product and partial sum is exact, so any layout or
    indexing slip shows as a nonzero error."""
    t = get_target(name, op)
    host = make_host(shapes(op, (4, 6, 3), True, (2,)), "bf16", seed=3, integers=True)
    got = run_target(t, host, layout)
    for k, (val, _) in reference(op, host).items():
        np.testing.assert_array_equal(got[k], val, err_msg=f"{name} {op} {k} {layout}")


def test_torch_target_rejects_wrong_dtype() -> None:
    t = get_target("torch-cpu-bf16", "matmul")
    with pytest.raises(InvalidArgument, match="bfloat16"):
        t.fn(a=torch.ones(2, 2), b=torch.ones(2, 2))


# -- flag pinning -------------------------------------------------------------


def _flags() -> dict[str, Any]:
    mm = torch.backends.cuda.matmul
    out = {}
    for attr in (
        "fp32_precision",
        "allow_fp16_reduced_precision_reduction",
        "allow_bf16_reduced_precision_reduction",
        "allow_fp16_accumulation",
    ):
        with contextlib.suppress(AttributeError):
            out[attr] = getattr(mm, attr)
    out["mkldnn"] = torch.backends.mkldnn.matmul.fp32_precision
    return out


MODES = [
    TorchMode("cpu", "fp32"),
    TorchMode("cpu", "bf16"),
    TorchMode("cuda", "fp32"),
    TorchMode("cuda", "fp32", tf32=True),
    TorchMode("cuda", "bf16"),
    TorchMode("cuda", "fp16"),
]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.target_name)
def test_precision_flags_pin_and_restore(mode: TorchMode) -> None:
    before = _flags()
    mm = torch.backends.cuda.matmul
    with precision_flags(mode):
        if mode.device == "cuda" and mode.storage == "fp32":
            assert mm.fp32_precision == ("tf32" if mode.tf32 else "ieee")
        if mode.device == "cuda" and mode.storage == "fp16":
            assert mm.allow_fp16_reduced_precision_reduction is False
        if mode.device == "cuda" and mode.storage == "bf16":
            assert mm.allow_bf16_reduced_precision_reduction is False
        if mode == TorchMode("cpu", "fp32"):
            assert torch.backends.mkldnn.matmul.fp32_precision == "ieee"
    assert _flags() == before
    with pytest.raises(RuntimeError, match="inside"), precision_flags(mode):
        raise RuntimeError("inside")
    assert _flags() == before


def test_precision_flags_restore_a_users_tf32_setting() -> None:
    mm = torch.backends.cuda.matmul
    old = mm.fp32_precision
    mm.fp32_precision = "tf32"
    try:
        with precision_flags(TorchMode("cuda", "fp32")):
            assert mm.fp32_precision == "ieee"
        assert mm.fp32_precision == "tf32"
    finally:
        mm.fp32_precision = old


@pytest.mark.parametrize(
    "kwargs",
    [
        {"device": "xla", "storage": "fp32"},
        {"device": "cpu", "storage": "fp64"},
        {"device": "cpu", "storage": "fp32", "tf32": True},
    ],
)
def test_torch_mode_invalid(kwargs: dict) -> None:
    with pytest.raises(InvalidArgument):
        TorchMode(**kwargs)


# -- registry -----------------------------------------------------------------

EXPECTED_MODELS = {
    "numpy-fp32": "fp32",
    "torch-cpu-fp32": "fp32",
    "torch-cpu-bf16": "bf16",
    "torch-cuda-fp32": "fp32",
    "torch-cuda-tf32": "tf32",
    "torch-cuda-bf16": "bf16",
    "torch-cuda-fp16": "fp16",
    "cupy-fp32": "fp32",
}


def test_registry_lists_every_target_per_op() -> None:
    targets = all_targets()
    keys = [(t.name, t.op) for t in targets if t.op in ("linear", "matmul")]
    assert len(keys) == len(set(keys)) == 2 * len(EXPECTED_MODELS)
    assert len({(t.name, t.op) for t in targets}) == len(targets)
    assert {"numpy-fp32", "torch-cpu-fp32"} <= set(target_names("conv2d"))
    for op in ("linear", "matmul"):
        assert target_names(op) == sorted(EXPECTED_MODELS)
        for name, model in EXPECTED_MODELS.items():
            t = get_target(name, op)
            assert (t.name, t.op, t.precision.name) == (name, op, model)
            assert t.outputs == ()  # every target computes all of the op's outputs


def test_available_targets_here() -> None:
    names = {t.name for t in available_targets()}
    assert set(CPU_TARGETS) <= names
    assert {t.name for t in available_targets("matmul")} <= names
    for t in all_targets():
        if t.name not in names:
            assert isinstance(t.unavailable_reason(), str)


def test_cupy_targets_declare_contiguous_layout() -> None:
    for op in ("linear", "matmul"):
        t = get_target("cupy-fp32", op)
        assert t.layouts == ("C",)
        assert t.backend == "cupy"
        assert t.precision.deterministic_runs


@pytest.mark.parametrize(
    ("name", "op", "match"),
    [
        ("nope", "linear", "'nope' is unknown for op 'linear'; use one of"),
        ("numpy-fp32", "conv9d", "op='conv9d' has no targets"),
        ("torch-cpu-fp32", None, "has no targets"),
    ],
)
def test_get_target_errors(name: str, op: Any, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        get_target(name, op)


def test_get_target_error_lists_choices() -> None:
    with pytest.raises(InvalidArgument) as info:
        get_target("torch-cuda-fp64", "matmul")
    assert "torch-cuda-fp32" in str(info.value)
    assert "cupy-fp32" in str(info.value)
