"""The KAN reference's values against mpmath at 60 digits (bases, ``y`` and
``grad_input`` of a small layer, orders 1-5, inputs on knots and off them):
each within the reference's own error ``ref_err``; and a 2-layer chain's
every output against torch float64 autograd, within the float64 bound."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.oracle.bspline import bases_mp, derivative_mp, tracked_levels, uniform_grid
from numoracle.oracle.ops import get_op
from numoracle.oracle.ops.kan import kan_layer
from numoracle.oracle.precision import get_model
from numoracle.oracle.tracked import exact

DPS = 60
MODEL = get_model("fp32")


def _layer(order: int, seed: int) -> dict[str, np.ndarray]:
    """A 3 -> 2 layer, batch 4: row 0 on knots, row 1 off them, row 2 one float32
    rounding above a knot, row 3 outside the grid."""
    rng = np.random.default_rng(seed)
    grid = uniform_grid(3, 4, order)
    knots = grid[0]
    x = np.stack([knots[[order, order + 2, order + 4]],
                  rng.uniform(-0.9, 0.9, 3),
                  np.nextafter(knots[[order + 1, order + 3, order]].astype(np.float32),
                               np.float32(np.inf)).astype(np.float64),
                  np.array([-9.0, 7.5, 12.0])])
    c = 4 + order
    return {"x": x, "grid": grid, "coef": rng.normal(size=(2, 3, c)),
            "base_weight": rng.normal(size=(2, 3)), "spline_weight": rng.normal(size=(2, 3)),
            "grad_output": rng.normal(size=(4, 2))}


def _mp_layer(a: dict[str, np.ndarray], order: int) -> tuple[np.ndarray, np.ndarray]:
    """``y`` and ``grad_input`` in mpmath (closed-form derivative)."""
    x, grid, coef = a["x"], a["grid"], a["coef"]
    bw, sw, g = a["base_weight"], a["spline_weight"], a["grad_output"]
    bsz, n_in = x.shape
    n_out = coef.shape[0]
    y = np.zeros((bsz, n_out))
    gi = np.zeros((bsz, n_in))
    for b in range(bsz):
        ys = [mpmath.mpf(0)] * n_out
        for i in range(n_in):
            xv = mpmath.mpf(x[b, i])
            s = 1 / (1 + mpmath.exp(-xv))
            silu, dsilu = xv * s, s * (1 + xv * (1 - s))
            bases = bases_mp(xv, grid[i], order)
            ders = derivative_mp(xv, grid[i], order)
            acc = mpmath.mpf(0)
            for j in range(n_out):
                sp = mpmath.fsum(mpmath.mpf(coef[j, i, cc]) * bases[cc] for cc in range(len(bases)))
                dsp = mpmath.fsum(mpmath.mpf(coef[j, i, cc]) * ders[cc] for cc in range(len(ders)))
                ys[j] += mpmath.mpf(bw[j, i]) * silu + mpmath.mpf(sw[j, i]) * sp
                acc += mpmath.mpf(g[b, j]) * (mpmath.mpf(bw[j, i]) * dsilu
                                               + mpmath.mpf(sw[j, i]) * dsp)
            gi[b, i] = float(acc)
        y[b] = [float(v) for v in ys]
    return y, gi


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
def test_bases_agree_with_mpmath_within_ref_err(order: int) -> None:
    a = _layer(order, seed=order)
    bases = tracked_levels(a["x"], a["grid"], order, MODEL).bases[-1]
    with mpmath.workdps(DPS):
        for (b, i), xv in np.ndenumerate(a["x"]):
            want = bases_mp(mpmath.mpf(xv), a["grid"][i], order)
            for c, w in enumerate(want):
                err = abs(mpmath.mpf(bases.value[b, i, c]) - w)
                assert err <= bases.ref_err[b, i, c], (b, i, c)
    assert np.any(bases.value[0] != 0) and np.all(bases.value[3, :, :] == 0)


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
def test_layer_agrees_with_mpmath_within_ref_err(order: int) -> None:
    a = _layer(order, seed=10 + order)
    ins = {k: exact(v) for k, v in a.items() if k != "grid"}
    res = kan_layer(ins["x"], a["grid"], ins["coef"], ins["base_weight"], ins["spline_weight"],
                    order, MODEL, g=ins["grad_output"], outputs=("y", "grad_input"))
    with mpmath.workdps(DPS):
        y, gi = _mp_layer(a, order)
    for name, want in (("y", y), ("grad_input", gi)):
        t = res[name]
        # the mpmath values are rounded once to float64: half an ulp more
        slack = t.ref_err + np.spacing(np.abs(want)) / 2
        assert np.all(np.abs(t.value - want) <= slack), name
        assert np.all(t.ref_err < 1e-12 * (1 + np.abs(want))), name  # float64: small


def test_two_layer_chain_agrees_with_torch_float64_autograd() -> None:
    torch = pytest.importorskip("torch")
    from numoracle.kernels.torch_kan import kan_chain_forward_backward

    case = Case("kan_chain", {"layers": 2, "widths": (3, 4, 2), "batch": 5, "grid_size": 4,
                              "spline_order": 3}, storage="fp64", family="normal", seed=7)
    inputs = case.inputs()
    model = get_model("fp64")
    ref = get_op("kan_chain").reference(inputs, case.params, model)
    got = kan_chain_forward_backward({k: torch.from_numpy(v) for k, v in inputs.items()})
    assert set(got) == set(ref)
    for name, t in ref.items():
        g = got[name].numpy()
        bound = t.bound()
        assert np.all(np.abs(g - t.value) <= bound), name
        # the float64 bound is tight: below sqrt(u) of the output's largest magnitude
        assert bound.max() <= 2.0**-26 * np.abs(t.value).max(), name
    assert np.any(ref["grad_input_0"].value != 0)
