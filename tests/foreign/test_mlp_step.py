"""The C MLP training step of ``examples/c``: in-out parameters, a float
learning rate, one call per step; the correct step passes and the
per-sample-update step is caught and shrunk."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from numoracle.errors import InvalidArgument
from numoracle.foreign import run, shared_library_target
from numoracle.oracle.mlp import PARAMS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SRC = str(EXAMPLES / "c" / "mlp_step.c")


def _example():
    spec = importlib.util.spec_from_file_location("check_mlp_step",
                                                  EXAMPLES / "c" / "check_mlp_step.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _lib(build, bug: bool) -> Path:
    return build("gcc", "-O2", "-shared", "-fPIC", *(["-DPER_SAMPLE_UPDATE"] if bug else []),
                 SRC, "-o", "{out}", "-lm", out="libmlp_bug.so" if bug else "libmlp.so")


def test_the_correct_step_passes(build, tmp_path: Path) -> None:
    t = _example().target(_lib(build, False), spec_dir=tmp_path)
    res = run(t, examples=15, store=tmp_path / "repros")
    assert res.verdict == "pass", res.message
    assert res.cases >= 8


def test_the_per_sample_update_is_caught_and_shrunk(build, tmp_path: Path, shapes_of) -> None:
    t = _example().target(_lib(build, True), spec_dir=tmp_path)
    res = run(t, examples=25, store=tmp_path / "repros")
    assert res.verdict == "FAIL"
    steps, batch, _ = shapes_of(res.repro_shape)["x"]
    assert batch >= 2 and batch <= 4 and steps <= 2  # one sample cannot show it
    failing = {line.split(":")[0] for line in res.diagnosis.split("; ")}
    assert failing & set(PARAMS), res.diagnosis
    assert "logic bug" in res.diagnosis


def test_an_in_out_array_needs_one_step_per_call(build, tmp_path: Path) -> None:
    ex = _example()
    with pytest.raises(InvalidArgument, match="leave 'steps' out"):
        shared_library_target(_lib(build, False), "mlp_sgd_step", op="mlp_train",
                              args=[*ex.ARGS, "steps"], spec_dir=tmp_path)
