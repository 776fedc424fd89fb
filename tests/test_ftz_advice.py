"""CuPy's flush-to-zero: a failure explained by flushed subnormal inputs on the
``cupy`` backend says what happened and what to claim; on the CPU the CuPy
backend is stood in for by NumPy (the kernel flushes as CuPy's -ftz=true does)."""

from __future__ import annotations

import numpy as np
import pytest

import numoracle.checking.call as call_mod
import numoracle.checking.check as check_mod
from numoracle import get_model
from numoracle.cases.case import Case
from numoracle.targets.target import Target
from numoracle.checking.check import check_case
from numoracle.targets.backends import get_backend

TINY = np.finfo(np.float32).tiny
CASE = Case(op="matmul", params={"m": 1, "k": 2, "n": 1, "batch_shape": ()}, storage="fp32",
            family="exact", seed=0)
# a subnormal times 2^30 is a normal result, 2^-110: flushed, the kernel returns 0
INPUTS = {"a": np.array([[2.0**-140, 0.0]], dtype=np.float32),
          "b": np.array([[2.0**30], [0.0]], dtype=np.float32)}


def _flushing_matmul(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    a = np.where(np.abs(a) < TINY, np.float32(0), a)
    b = np.where(np.abs(b) < TINY, np.float32(0), b)
    return {"out": a @ b}


def _target(backend: str, model: str | object = "fp32") -> Target:
    return Target(name=f"user-kernel-{backend}", op="matmul", backend=backend,
                  precision=get_model(model), fn=_flushing_matmul, layouts=("C",))


@pytest.fixture
def cupy_on_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``cupy`` backend's arrays handled by NumPy (no GPU here)."""
    numpy_backend = get_backend("numpy")
    for module in (check_mod, call_mod):  # the reference's device, and the kernel's call
        monkeypatch.setattr(module, "get_backend", lambda name: numpy_backend)


def test_cupy_flush_failure_says_what_to_claim(cupy_on_numpy: None) -> None:
    v = check_case(CASE, _target("cupy"), inputs=INPUTS)
    assert not v.passed
    diagnosis = v.outputs["out"].diagnosis
    assert "consistent with fp32+flushed-subnormals" in diagnosis
    assert "-ftz=true" in diagnosis and "9576" in diagnosis
    assert "get_model('fp32', flush_subnormal_inputs=True)" in diagnosis
    assert "cupy.RawModule(path=...)" in diagnosis
    assert "get_model('fp32', flush_subnormal_inputs=True)" in v.message()


def test_the_advised_model_passes(cupy_on_numpy: None) -> None:
    advised = get_model("fp32", flush_subnormal_inputs=True)
    assert check_case(CASE, _target("cupy", advised), inputs=INPUTS).passed


def test_no_cupy_advice_on_other_backends() -> None:
    v = check_case(CASE, _target("numpy"), inputs=INPUTS)
    assert not v.passed
    assert "consistent with fp32+flushed-subnormals" in v.outputs["out"].diagnosis
    assert "CuPy" not in v.outputs["out"].diagnosis


def test_no_cupy_advice_for_a_logic_bug(cupy_on_numpy: None) -> None:
    def wrong(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
        return {"out": a @ b + 1}

    t = Target(name="wrong", op="matmul", backend="cupy", precision=get_model("fp32"),
               fn=wrong, layouts=("C",))
    v = check_case(CASE, t, inputs=INPUTS)
    assert not v.passed and "CuPy" not in v.outputs["out"].diagnosis
