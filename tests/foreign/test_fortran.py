"""The Fortran example: column-major conv2d through bind(c); seed 000's
weight-layout trap (grad_weight written in cuDNN's row-major order) is caught
and the diagnosis names the layout."""

from __future__ import annotations

from pathlib import Path

from numoracle.foreign import run, shared_library_target

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SRC = str(EXAMPLES / "fortran" / "conv2d.F90")
ARGS = ["x", "weight", "bias", "grad_output", "y", "grad_weight", "grad_bias",
        "batch", "in_channels", "out_channels", "height", "width",
        "kernel_size[0]", "kernel_size[1]", "stride[0]", "stride[1]",
        "padding[0]", "padding[1]", "dilation[0]", "dilation[1]", "groups", "param:bias"]
LAYOUTS = {"x": "NCHW:F", "weight": "OIHW:F", "grad_output": "NCHW:F",
           "y": "NCHW:F", "grad_weight": "OIHW:F"}


def _target(build, tmp_path: Path, bug: str | None):
    lib = build("gfortran", "-O2", "-shared", "-fPIC", "-J", "{dir}",
                *([f"-D{bug}"] if bug else []), SRC, "-o", "{out}",
                out=f"libconv2d_{bug}.so" if bug else "libconv2d.so")
    return shared_library_target(lib, "conv2d_f32", op="conv2d", args=ARGS, layouts=LAYOUTS,
                                 spec_dir=tmp_path)


def test_correct_fortran_kernel_passes(build, tmp_path: Path) -> None:
    res = run(_target(build, tmp_path, None), examples=25, store=None)
    assert res.verdict == "pass", res.message
    assert res.cases == 25


def test_weight_layout_trap_is_caught_and_named(build, tmp_path: Path, shapes_of) -> None:
    # grad_weight written in cuDNN's row-major order, "not transformed like the weights"
    res = run(_target(build, tmp_path, "PLANTED_BUG"), examples=15, store=tmp_path / "r")
    assert res.verdict == "FAIL"
    assert res.diagnosis.startswith("grad_weight: exceeds every precision model")
    assert ("grad_weight is right once its memory is read in layout 'OIHW': the kernel "
            "writes grad_weight as OIHW, but it is declared 'OIHW:F'") in res.diagnosis
    assert "OIHW" in res.message and res.repro is not None
    # shrunk: one sample, one channel each way, a 2x2 weight (the smallest where
    # the two orders differ)
    shapes = shapes_of(res.repro_shape)  # a layout trap needs a kernel of 2 taps or more
    assert max(shapes["x"]) <= 3 and 2 <= shapes["weight"][2] * shapes["weight"][3] <= 9


def test_weights_read_in_row_major_order_are_named(build, tmp_path: Path) -> None:
    # the other side of the trap: the forward pass reads w(out, in, kh, kw) as
    # cuDNN's row-major OIHW
    res = run(_target(build, tmp_path, "PLANTED_BUG_READ"), examples=15, store=None)
    assert res.verdict == "FAIL"
    assert res.diagnosis.startswith("y: exceeds every precision model")
    assert ("layout mix-up: ['y'] are right for weight read in layout 'OIHW': the kernel "
            "reads weight as OIHW, but it is declared 'OIHW:F'") in res.diagnosis
