"""The relaxed logic gates and the logic layer's reference: difflogic's gate order
and formulas, and the reference's values and gradients against mpmath (finite
differences at 60 digits) and torch float64 autograd."""

from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest
import torch

from numoracle.cases.case import Case
from numoracle.errors import InvalidArgument
from numoracle.kernels.numpy_logic import gates as numpy_gates
from numoracle.kernels.torch_logic import bin_op, logic_layer_forward_backward
from numoracle.oracle.logic_gates import COEF, GATE_NAMES, gate_values
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model

#: the truth table of each gate at (a, b) = 00, 01, 10, 11 (difflogic's table)
TRUTH = {"false": "0000", "and": "0001", "a_and_not_b": "0010", "a": "0011",
         "not_a_and_b": "0100", "b": "0101", "xor": "0110", "or": "0111", "nor": "1000",
         "xnor": "1001", "not_b": "1010", "a_or_not_b": "1011", "not_a": "1100",
         "not_a_or_b": "1101", "nand": "1110", "true": "1111"}


def test_gate_order_and_truth_tables() -> None:
    a = np.array([0.0, 0.0, 1.0, 1.0])
    b = np.array([0.0, 1.0, 0.0, 1.0])
    table = gate_values(a, b)  # (4, 16)
    for g, name in enumerate(GATE_NAMES):
        assert "".join(str(int(v)) for v in table[:, g]) == TRUTH[name], name


def test_coefficients_match_difflogic_formulas() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.random(50), rng.random(50)
    ours = gate_values(a, b)
    ta, tb = torch.tensor(a), torch.tensor(b)
    for g in range(16):
        np.testing.assert_allclose(bin_op(ta, tb, g).numpy(), ours[:, g], rtol=0, atol=1e-15)
        np.testing.assert_allclose(numpy_gates(a, b)[g], ours[:, g], rtol=0, atol=1e-15)
    assert COEF.shape == (16, 4)


def _mp_layer(x, ia, ib, w, g):
    """y and the loss sum(g * y) in mpmath (lists of mpf)."""
    out = []
    for bi in range(len(x)):
        row = []
        for j in range(len(ia)):
            a, b = x[bi][ia[j]], x[bi][ib[j]]
            e = [mpmath.exp(v) for v in w[j]]
            s = mpmath.fsum(e)
            mono = (1, a, b, a * b)
            row.append(mpmath.fsum(e[k] / s * mpmath.fsum(COEF[k, m] * mono[m] for m in range(4))
                                   for k in range(16)))
        out.append(row)
    loss = mpmath.fsum(g[bi][j] * out[bi][j] for bi in range(len(x)) for j in range(len(ia)))
    return out, loss


@pytest.mark.parametrize("seed", [0, 1])
def test_layer_reference_against_mpmath(seed: int) -> None:
    params = {"batch": 2, "in_features": 3, "out_features": 2}
    case = Case(op="logic_layer", params=params, storage="fp32", family="normal", seed=seed)
    inp = case.inputs()
    ref = get_op("logic_layer").reference(inp, params, get_model("fp32"))
    ia, ib = inp["idx_a"].astype(int), inp["idx_b"].astype(int)
    with mpmath.workdps(60):
        mp = lambda a: [[mpmath.mpf(float(v)) for v in row] for row in a]  # noqa: E731
        x, w, g = mp(inp["x"]), mp(inp["weights"]), mp(inp["grad_output"])
        y, _ = _mp_layer(x, ia, ib, w, g)
        step = mpmath.mpf(10) ** -30

        def fd(arr, i, j):
            arr[i][j] += step
            hi = _mp_layer(x, ia, ib, w, g)[1]
            arr[i][j] -= 2 * step
            lo = _mp_layer(x, ia, ib, w, g)[1]
            arr[i][j] += step
            return (hi - lo) / (2 * step)
        for name, got in (("y", y), ("grad_input", [[fd(x, i, j) for j in range(3)]
                                                    for i in range(2)]),
                          ("grad_weights", [[fd(w, i, j) for j in range(16)]
                                            for i in range(2)])):
            exact = np.array([[float(v) for v in row] for row in got])
            t = ref[name]
            # the oracle's value is within its own error of the exact result
            assert np.all(np.abs(t.value - exact) <= t.ref_err + 1e-25), name
            assert np.all(t.ref_err < 1e-12 * (1 + np.abs(exact))), name


def test_layer_reference_against_torch_float64() -> None:
    params = {"batch": 5, "in_features": 7, "out_features": 6}
    case = Case(op="logic_layer", params=params, storage="fp64", family="uniform", seed=3)
    inp = case.inputs()
    ref = get_op("logic_layer").reference(inp, params, get_model("fp64"))
    t = {k: torch.tensor(v) for k, v in inp.items()}
    out = logic_layer_forward_backward(t["x"], t["idx_a"], t["idx_b"], t["weights"],
                                       t["grad_output"])
    for name, arr in out.items():
        err = np.abs(arr.numpy() - ref[name].value)
        assert np.all(err <= ref[name].det + ref[name].ref_err), name
        # and the fp64 bound is tight enough to mean something
        assert np.all(ref[name].det <= 1e-13 * (1 + np.abs(ref[name].value))), name


def test_binary_inputs_give_the_truth_table() -> None:
    """With logits that pick one gate and binary inputs, y is that gate's truth value."""
    params = {"batch": 4, "in_features": 2, "out_features": 16}
    inp = {"x": np.array(list(itertools.product([0.0, 1.0], repeat=2))),
           "idx_a": np.zeros(16), "idx_b": np.ones(16),
           "weights": np.where(np.eye(16) > 0, 30.0, -30.0), "grad_output": np.ones((4, 16))}
    ref = get_op("logic_layer").reference(inp, params, get_model("fp64"))
    np.testing.assert_allclose(ref["y"].value, gate_values(inp["x"][:, :1], inp["x"][:, 1:2])
                               .reshape(4, 16), atol=1e-24)


@pytest.mark.parametrize(("params", "match"), [
    ({"in_features": 257}, "in_features"), ({"batch": 0}, "batch"),
    ({"out_features": True}, "out_features"), ({"gates": 16}, "unknown"),
])
def test_layer_invalid_parameters(params: dict, match: str) -> None:
    base = {"batch": 2, "in_features": 3, "out_features": 4}
    with pytest.raises(InvalidArgument, match=match):
        get_op("logic_layer").validate({**base, **params})


def test_layer_rejects_a_connection_map_outside_the_inputs() -> None:
    params = {"batch": 1, "in_features": 2, "out_features": 1}
    inp = {"x": np.ones((1, 2)), "idx_a": np.array([2.0]), "idx_b": np.array([0.0]),
           "weights": np.zeros((1, 16)), "grad_output": np.ones((1, 1))}
    with pytest.raises(InvalidArgument, match="idx_a"):
        get_op("logic_layer").reference(inp, params, get_model("fp32"))
