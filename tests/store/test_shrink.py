"""``numoracle shrink``: a failing case supplied from outside, shrunk to the
smallest case failing for the same reason and saved as a repro."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from numoracle.api import _make_target
from numoracle.checking.replay import replay
from numoracle.checking.shrink import infer_params, shrink
from numoracle.cli import main
from numoracle.errors import InvalidArgument
from numoracle.oracle.formats import quantize
from numoracle.store.repro import load_repro
from numoracle.store.store import entries


def last_term_dropped(x: Any, weight: Any, grad_output: Any,
                      bias: Any = None) -> dict[str, Any]:
    """y skips the last input feature."""
    y = x[:, :-1] @ weight[:, :-1].T
    if bias is not None:
        y = y + bias
    out = {"y": y, "grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        out["grad_bias"] = grad_output.sum(axis=0)
    return out


def correct(x: Any, weight: Any, grad_output: Any, bias: Any = None) -> dict[str, Any]:
    """A correct linear layer."""
    y = x @ weight.T + (0 if bias is None else bias)
    out = {"y": y, "grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        out["grad_bias"] = grad_output.sum(axis=0)
    return out


def dumped(batch: int = 16, features: int = 24, out: int = 12) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    arrays = {"x": rng.standard_normal((batch, features)),
              "weight": rng.standard_normal((out, features)),
              "grad_output": rng.standard_normal((batch, out)), "bias": rng.standard_normal(out)}
    return {k: quantize(v, "fp32").astype(np.float32) for k, v in arrays.items()}


def test_params_are_read_off_the_shapes() -> None:
    assert infer_params("linear", dumped()) == {"batch": 16, "in_features": 24,
                                                "out_features": 12, "bias": True}
    rng = np.random.default_rng(0)
    conv = {"x": rng.standard_normal((2, 4, 9, 9)), "weight": rng.standard_normal((6, 4, 3, 3)),
            "grad_output": rng.standard_normal((2, 6, 9, 9))}
    p = infer_params("conv2d", conv, {"padding": (1, 1)})
    assert (p["batch"], p["in_channels"], p["out_channels"], p["height"], p["kernel_size"],
            p["bias"]) == (2, 4, 6, 9, (3, 3), False)
    kan = {"x": np.zeros((3, 2)), "grid": np.zeros((2, 12)), "coef": np.zeros((5, 2, 8)),
           "base_weight": np.zeros((5, 2)), "spline_weight": np.zeros((5, 2)),
           "grad_output": np.zeros((3, 5))}
    p = infer_params("kan", kan)
    assert (p["grid_size"], p["spline_order"]) == (5, 3)  # 5 + 2*3 + 1 knots, 5 + 3 coefs
    with pytest.raises(InvalidArgument, match=r"--param"):
        infer_params("conv2d", {**conv, "grad_output": np.zeros((2, 6, 5, 5))})


def test_a_dumped_case_shrinks_to_one_row_and_feature(tmp_path: Path) -> None:
    target = _make_target(last_term_dropped, op="linear", name="last_term_dropped")
    arrays = dumped()
    res = shrink(target, "linear", infer_params("linear", arrays), arrays, store=tmp_path)
    s = res.summary()
    assert s["elements_before"] == 16 * 24 + 12 * 24 + 16 * 12 + 12
    assert s["params_after"] == {"batch": 1, "in_features": 1, "out_features": 1, "bias": False}
    assert s["reason_after"] == ["y", "logic"]
    # values moved towards the exact grid: one significant bit each at most
    for a in res.inputs_after.values():
        nz = a[a != 0]
        m, _ = np.frexp(nz)
        assert np.all(np.abs(m) == 0.5)
    r = load_repro(res.repro)
    assert r.stored_inputs and not replay(res.repro).passed
    assert [e.path.name for e in entries(tmp_path)] == [Path(str(res.repro)).name]


def test_a_passing_case_is_refused() -> None:
    target = _make_target(correct, op="linear", name="correct")
    arrays = dumped(4, 4, 4)
    with pytest.raises(InvalidArgument, match="does not fail"):
        shrink(target, "linear", infer_params("linear", arrays), arrays)


def test_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "step37"
    folder.mkdir()
    for k, v in dumped(8, 8, 4).items():
        np.save(folder / f"{k}.npy", v)
    (tmp_path / "kernels.py").write_text(
        "def drop_last(x, weight, grad_output, bias=None):\n"
        "    y = x[:, :-1] @ weight[:, :-1].T + (0 if bias is None else bias)\n"
        "    out = {'y': y, 'grad_input': grad_output @ weight, 'grad_weight': grad_output.T @ x}\n"
        "    if bias is not None:\n"
        "        out['grad_bias'] = grad_output.sum(0)\n"
        "    return out\n")
    status = main(["shrink", str(folder), "--op", "linear", "--fn",
                   f"{tmp_path / 'kernels.py'}:drop_last", "--store", str(tmp_path / "store"),
                   "--json", str(tmp_path / "s.json")])
    out = capsys.readouterr().out
    assert status == 1, out
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["elements_after"] == 3 and "shrunk 132 input elements to 3" in out
    assert main(["shrink", str(folder), "--op", "linear", "--fn", "nomodule"]) == 2
    assert "must be 'module:name' or 'file.py:name'" in capsys.readouterr().err
