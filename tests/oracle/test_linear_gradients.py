"""The linear op's analytic gradients against mpmath finite differences at
high precision and against torch float64 autograd."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch

from numoracle.errors import InvalidArgument
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model

LINEAR = get_op("linear")
FP64 = get_model("fp64")


def _inputs(seed: int, batch: int, fin: int, fout: int, bias: bool = True) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    d = {"x": rng.standard_normal((batch, fin)), "weight": rng.standard_normal((fout, fin)),
         "grad_output": rng.standard_normal((batch, fout))}
    if bias:
        d["bias"] = rng.standard_normal(fout)
    return d


def _loss(x, w, b, g) -> mpmath.mpf:
    """L = sum(g * (x W^T + b)) in mpmath: dL/dx = g W, dL/dW = g^T x, dL/db = sum g."""
    total = mpmath.mpf(0)
    for i in range(len(x)):
        for j in range(len(w)):
            y = mpmath.fsum(x[i][c] * w[j][c] for c in range(len(w[j]))) + (b[j] if b else 0)
            total += g[i][j] * y
    return total


@pytest.mark.parametrize("seed", range(3))
def test_gradients_match_mpmath_central_differences(seed: int) -> None:
    params = {"batch": 2, "in_features": 3, "out_features": 2, "bias": True}
    inp = _inputs(seed, 2, 3, 2)
    ref = LINEAR.reference(inp, params, FP64)
    with mpmath.workdps(110):
        h = mpmath.mpf("1e-30")
        mp = {k: [[mpmath.mpf(float(v)) for v in row] for row in np.atleast_2d(a)]
              for k, a in inp.items()}
        mp["bias"] = mp["bias"][0]

        def fd(name: str, index: tuple[int, ...]) -> mpmath.mpf:
            vals = []
            for s in (1, -1):
                args = {k: [list(r) for r in v] if k != "bias" else list(v) for k, v in mp.items()}
                if name == "bias":
                    args["bias"][index[0]] += s * h
                else:
                    args[name][index[0]][index[1]] += s * h
                vals.append(_loss(args["x"], args["weight"], args["bias"], args["grad_output"]))
            return (vals[0] - vals[1]) / (2 * h)

        for out, wrt in (("grad_input", "x"), ("grad_weight", "weight"), ("grad_bias", "bias")):
            t = ref[out]
            for ix in np.ndindex(t.shape):
                exact = fd(wrt, ix)
                est = mpmath.mpf(float(t.value[ix])) + mpmath.mpf(
                    float((t.lo if t.lo is not None else np.zeros(t.shape))[ix]))
                # the FD quotient is exact to ~1e-60: the oracle must be within its own error
                assert abs(est - exact) <= (mpmath.mpf(float(t.ref_err[ix]))
                                            + mpmath.mpf("1e-50")), (out, ix)


@pytest.mark.parametrize(("batch", "fin", "fout", "bias"), [(1, 1, 1, True), (7, 13, 5, True),
                                                            (16, 31, 3, False)])
def test_gradients_match_torch_float64_autograd(batch: int, fin: int, fout: int,
                                                bias: bool) -> None:
    params = {"batch": batch, "in_features": fin, "out_features": fout, "bias": bias}
    inp = _inputs(batch * fin, batch, fin, fout, bias)
    x = torch.tensor(inp["x"], requires_grad=True)
    w = torch.tensor(inp["weight"], requires_grad=True)
    b = torch.tensor(inp["bias"], requires_grad=True) if bias else None
    y = torch.nn.functional.linear(x, w, b)
    grads = torch.autograd.grad(y, [x, w] + ([b] if bias else []), torch.tensor(inp["grad_output"]))
    got = {"y": y.detach().numpy(), "grad_input": grads[0].numpy(), "grad_weight": grads[1].numpy()}
    if bias:
        got["grad_bias"] = grads[2].numpy()
    ref = LINEAR.reference(inp, params, FP64)
    assert set(ref) == set(got)
    for name, arr in got.items():
        t = ref[name]
        err = np.abs(arr - t.value - (t.lo if t.lo is not None else 0))
        assert np.all(err <= t.bound()), name  # torch float64 is judged as an fp64 kernel


@pytest.mark.parametrize(("params", "match"), [
    ({"batch": 0, "in_features": 1, "out_features": 1}, "batch=0 must be a positive int"),
    ({"batch": 1, "in_features": 2.5, "out_features": 1}, "in_features=2.5"),
    ({"batch": 1, "in_features": 1, "out_features": True}, "out_features=True"),
    ({"batch": 1, "in_features": 1, "out_features": 1, "bias": "yes"}, "bias='yes'"),
    ({"batch": 1, "in_features": 1, "out_features": 1, "groups": 2}, "unknown parameters"),
])
def test_linear_rejects_bad_params(params: dict, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        LINEAR.validate(params)


def test_linear_rejects_wrong_input_shapes() -> None:
    params = LINEAR.validate({"batch": 2, "in_features": 3, "out_features": 4})
    inp = _inputs(0, 2, 3, 4)
    inp["weight"] = inp["weight"].T
    with pytest.raises(InvalidArgument, match="'weight' has shape \\(3, 4\\), expected \\(4, 3\\)"):
        LINEAR.reference(inp, params, FP64)


def test_matmul_batched_matches_torch() -> None:
    mm = get_op("matmul")
    params = mm.validate({"batch_shape": (2, 3), "m": 4, "k": 5, "n": 6})
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 3, 5, 6))
    t = mm.reference({"a": a, "b": b}, params, FP64)["out"]
    got = torch.matmul(torch.tensor(a), torch.tensor(b)).numpy()
    assert np.all(np.abs(got - t.value - t.lo) <= t.bound())
