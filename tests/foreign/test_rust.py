"""The Rust example: a cdylib built by rustc alone (no cargo, no crates)."""

from __future__ import annotations

from pathlib import Path

from numoracle.foreign import run, shared_library_target

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SRC = str(EXAMPLES / "rust" / "linear.rs")
ARGS = ["x", "weight", "bias", "grad_output", "y", "grad_input", "grad_weight", "grad_bias",
        "batch", "in_features", "out_features"]


def _target(build, tmp_path: Path, bug: bool):
    lib = build("rustc", "--edition", "2021", "--crate-type", "cdylib", "-C", "opt-level=2",
                *(["--cfg", "planted_bug"] if bug else []), SRC, "-o", "{out}",
                out="liblinear_bug.so" if bug else "liblinear.so")
    return shared_library_target(lib, "linear_f32", op="linear", args=ARGS, spec_dir=tmp_path)


def test_correct_rust_kernel_passes(build, tmp_path: Path) -> None:
    res = run(_target(build, tmp_path, False), examples=20, store=None)
    assert res.verdict == "pass", res.message
    assert res.cases == 20


def test_planted_rust_bug_is_caught_and_shrunk(build, tmp_path: Path, shapes_of) -> None:
    res = run(_target(build, tmp_path, True), examples=20, store=tmp_path / "repros")
    assert res.verdict == "FAIL"
    assert res.diagnosis.startswith("grad_bias: exceeds every precision model")
    shapes = shapes_of(res.repro_shape)  # the bug skips the first sample: batch >= 2
    assert 2 <= shapes["x"][0] <= 3 and "bias" in shapes and max(shapes["weight"]) <= 2
