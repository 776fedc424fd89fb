"""Bad input: specs that do not match the op, libraries that cannot be loaded,
missing symbols; all rejected with InvalidArgument before any call. And what a
misbehaving library call becomes: a status, an unwritten output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.checking.check import check_case
from numoracle.errors import InvalidArgument
from numoracle.foreign import ArgSpec, command_target, shared_library_target
from numoracle.foreign.spec import ParamReader, array_names
from numoracle.oracle.ops import get_op

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SRC = str(EXAMPLES / "c" / "matmul.c")
MM = ["a", "b", "out", "prod(batch_shape)", "m", "k", "n"]
CONV = ["x", "weight", "y", "batch", "in_channels", "out_channels", "height", "width",
        "kernel_size[0]", "kernel_size[1]", "stride[0]", "stride[1]", "padding[0]",
        "padding[1]", "dilation[0]", "dilation[1]", "groups"]


@pytest.fixture(scope="module")
def lib(build) -> Path:
    return build("gcc", "-O2", "-shared", "-fPIC", SRC, "-o", "{out}", out="libmatmul.so")


INVALID = [
    # (op, args, keyword arguments, what the message says)
    ("matmul", ["a", "b", "result", "m", "k", "n"], {}, "neither an array nor a parameter"),
    ("matmul", ["a", "b", "out", "m", "k"], {}, "leave out ['n', 'batch_shape']"),
    ("matmul", ["a", "b", "out", "m", "k", "n"], {}, "leave out ['batch_shape']"),
    ("matmul", ["a", "b", "m", "k", "n", "prod(batch_shape)"], {}, "names no output"),
    ("matmul", ["a", "a", "out", "prod(batch_shape)", "m", "k", "n"], {}, "more than once"),
    ("matmul", MM, {"dtypes": {"a": "float64"}}, "does not match precision 'fp32'"),
    ("matmul", MM, {"dtypes": "float32", "precision": "fp64"}, "whose arrays are float64"),
    ("matmul", MM, {"layouts": {"a": "NHWC"}}, "layout 'NHWC' of 'a' must be one of"),
    ("matmul", MM, {"layouts": {"a": "T"}}, "layout 'T' of 'a' must be one of"),
    ("matmul", MM, {"layouts": {"c": "F"}}, "not an array of the spec"),
    ("matmul", MM, {"layouts": "HWIO"}, "must be 'C' (row-major) or 'F'"),
    ("matmul", ["a", "b", "out", "batch_shape", "m", "k", "n"], {}, "is a pair or shape"),
    ("matmul", ["a", "b", "out", "prod(m)", "m", "k", "n"], {}, "prod() takes a shape"),
    ("matmul", ["a", "b", "out", "prod(batch_shape)", "m:int16", "k", "n"], {},
     "must be one of"),
    ("matmul", MM + ["=x:float32"], {}, "is not a number"),
    ("matmul", MM + ["=1:complex"], {}, "C type 'complex' is unknown"),
    ("matmul", "a b out", {}, "must be a non-empty list"),
    ("conv2d", CONV[:-1], {}, "leave out ['groups']"),
    ("conv2d", [a for a in CONV if a != "stride[1]"], {}, "leave out ['stride']"),
    ("conv2d", CONV[:10] + ["stride"] + CONV[12:], {}, "is a pair or shape"),
    ("conv2d", CONV, {"layouts": {"weight": "NHWC"}}, "layout 'NHWC' of 'weight'"),
    ("linear", ["x", "weight", "y", "batch", "in_features", "out_features", "bias[0]"], {},
     "is not a pair"),
    ("kan_chain", ["x", "y_0", "batch", "prod(widths)", "grid_size", "spline_order", "layers"],
     {}, "cannot read from the shapes"),
]


@pytest.mark.parametrize(("op", "args", "kw", "says"), INVALID)
def test_invalid_specs_are_rejected_before_any_call(lib: Path, tmp_path: Path, op: str,
                                                    args: list[str], kw: dict,
                                                    says: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        # the symbol would crash if it were ever called
        shared_library_target(lib, "matmul_f32_segfault", op=op, args=args, spec_dir=tmp_path,
                              **kw)
    assert says in str(info.value)


def test_valid_specs_round_trip() -> None:
    s = ArgSpec.build("conv2d", CONV + ["bias", "param:bias", "=0.5:float64", "stream"],
                      layouts={"weight": "HWIO:F", "y": "NHWC"})
    assert ArgSpec.build("conv2d", s.to_dict()["args"], layouts=s.layouts) == s
    assert s.order_and_memory("weight") == ("HWIO", "F")
    assert s.order_and_memory("y") == ("NHWC", "C")
    assert s.outputs == ("y",) and s.inputs == ("x", "weight", "bias")


@pytest.mark.parametrize(("path", "symbol", "says"), [
    ("no/such/lib.so", "f", "does not exist; build it first"),
    (__file__, "f", "cannot be loaded"),
    (None, "no_such_symbol", "has no symbol 'no_such_symbol'"),
])
def test_unloadable_library_or_missing_symbol(lib: Path, tmp_path: Path, path: str | None,
                                              symbol: str, says: str) -> None:
    with pytest.raises(InvalidArgument, match=says):
        shared_library_target(path or lib, symbol, op="matmul", args=MM, spec_dir=tmp_path)


def test_bad_target_options(lib: Path, tmp_path: Path) -> None:
    for kw, says in [({"device": "tpu"}, "must be 'cpu' or 'cuda'"),
                     ({"device": "cpu", "backend": "cupy"}, "does not run on device"),
                     ({"returns": "int"}, "must be None"),
                     ({"device": "cuda", "isolate": True}, "isolate CPU kernels only")]:
        with pytest.raises(InvalidArgument, match=says):
            shared_library_target(lib, "matmul_f32", op="matmul", args=MM, spec_dir=tmp_path,
                                  **kw)


def test_status_and_unwritten_outputs_fail(lib: Path, tmp_path: Path) -> None:
    case = Case("matmul", {"m": 2, "k": 3, "n": 2, "batch_shape": (2,)})
    t = shared_library_target(lib, "matmul_f32_status", op="matmul", args=MM,
                              returns="status", spec_dir=tmp_path)
    assert "matmul_f32_status returned status 3" in check_case(case, t).error
    t = shared_library_target(lib, "matmul_f32_skip_last", op="matmul", args=MM,
                              spec_dir=tmp_path)
    v = check_case(case, t)
    assert not v.passed and "NaN" in v.message()
    t = shared_library_target(lib, "matmul_f32", op="matmul", args=MM, spec_dir=tmp_path)
    assert check_case(case, t).passed


def test_every_output_an_op_can_have_is_a_spec_name() -> None:
    """An optimizer's state outputs exist only for some optimizers; a spec names them."""
    ins, outs = array_names("optim")
    assert ins == ("param0", "grads")
    assert {"param", "momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"} <= set(outs)


def test_a_command_takes_an_op_whose_parameters_are_inputs_and_outputs(tmp_path) -> None:
    """mlp_train's w1 ... b3 are inputs and outputs: named once, read and written back."""
    t = command_target(["prog", "{dir}"], op="mlp_train", spec_dir=tmp_path)
    assert set(t.fn.foreign_spec.inouts) == {"w1", "b1", "w2", "b2", "w3", "b3"}
    assert "loss" in t.outputs


def test_kan_parameters_are_read_from_its_shapes() -> None:
    # the spline order is the knots minus the coefficients minus one
    op = get_op("kan")
    params = op.validate({"batch": 3, "in_features": 4, "out_features": 5, "grid_size": 6,
                          "spline_order": 2})
    arrays = {k: np.zeros(v, np.float32) for k, v in op.input_shapes(params).items()}
    assert ParamReader("kan").read(arrays) == params
