"""The logic automaton's reference against mpmath: the final grid, the loss, and the
gradients of the initial grid and of every gate logit by central differences at 60
digits (step 1e-30), for both boundaries; invalid parameters."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.errors import InvalidArgument
from numoracle.oracle.logic_gates import COEF
from numoracle.oracle.ops import get_op
from numoracle.oracle.ops.logic_ca import OFFSETS, PERCEPTION_WIDTHS
from numoracle.oracle.precision import get_model


def _softmax(row):
    e = [mpmath.exp(v) for v in row]
    s = mpmath.fsum(e)
    return [v / s for v in e]


def _layer(x, ia, ib, p):
    out = []
    for j in range(len(ia)):
        a, b = x[int(ia[j])], x[int(ib[j])]
        mono = (1, a, b, a * b)
        out.append(mpmath.fsum(p[j][g] * mpmath.fsum(COEF[g, m] * mono[m] for m in range(4))
                               for g in range(16)))
    return out


def _loss(grid, wp, wu, inp, params):
    """The automaton in mpmath: grid[y][x][c], logits as nested lists."""
    h, w, c = params["height"], params["width"], params["channels"]
    k_count, u = params["kernels"], params["hidden"]
    pidx, uidx = inp["perception_idx"], inp["update_idx"]
    pp = [[_softmax(r) for r in wp[k]] for k in range(k_count)]
    pu = [_softmax(r) for r in wu]
    x = grid
    for _ in range(params["steps"]):
        new = [[None] * w for _ in range(h)]
        for yy in range(h):
            for xx in range(w):
                feats = list(x[yy][xx])
                per = []
                for k in range(k_count):
                    for ch in range(c):
                        nb = []
                        for dy, dx in OFFSETS:
                            ny, nx = yy + dy, xx + dx
                            if params["periodic"]:
                                nb.append(x[ny % h][nx % w][ch])
                            elif 0 <= ny < h and 0 <= nx < w:
                                nb.append(x[ny][nx][ch])
                            else:
                                nb.append(mpmath.mpf(0))
                        z, off = nb, 0
                        for width in PERCEPTION_WIDTHS:
                            z = _layer(z, pidx[k, off:off + width, 0], pidx[k, off:off + width, 1],
                                       pp[k][off:off + width])
                            off += width
                        per.append(z[0])
                feats += per
                z = _layer(feats, uidx[:u, 0], uidx[:u, 1], pu[:u])
                new[yy][xx] = _layer(z, uidx[u:, 0], uidx[u:, 1], pu[u:])
        x = new
    t = inp["target"]
    n = h * w * c
    return mpmath.fsum((x[i][j][ch] - t[i, j, ch]) ** 2 for i in range(h) for j in range(w)
                       for ch in range(c)) / n


@pytest.mark.parametrize("periodic", [True, False])
def test_ca_gradients_against_mpmath(periodic: bool) -> None:
    params = {"height": 1, "width": 2, "channels": 1, "steps": 2, "kernels": 1, "hidden": 1,
              "periodic": periodic}
    case = Case(op="logic_ca", params=params, storage="fp32", family="normal", seed=4)
    inp = case.inputs()
    ref = get_op("logic_ca").reference(inp, params, get_model("fp32"))
    with mpmath.workdps(60):
        mp = np.vectorize(mpmath.mpf, otypes=[object])
        grid = mp(inp["grid"]).tolist()
        wp, wu = mp(inp["perception"]).tolist(), mp(inp["update"]).tolist()
        step = mpmath.mpf(10) ** -30
        loss = _loss(grid, wp, wu, inp, params)
        assert abs(float(loss) - ref["loss"].value[0]) <= ref["loss"].ref_err[0] + 1e-25

        def fd(arr, index):
            *head, last = index
            holder = arr
            for i in head:
                holder = holder[i]
            holder[last] += step
            hi = _loss(grid, wp, wu, inp, params)
            holder[last] -= 2 * step
            lo = _loss(grid, wp, wu, inp, params)
            holder[last] += step
            return float((hi - lo) / (2 * step))

        checks = [("grad_grid", grid, (0, j, 0)) for j in range(2)]
        checks += [("grad_update", wu, (j, g)) for j in range(2) for g in (0, 6, 9, 15)]
        checks += [("grad_perception", wp, (0, j, g)) for j in (0, 4, 6) for g in (1, 6, 14)]
        for name, arr, index in checks:
            exact = fd(arr, index)
            t = ref[name]
            assert abs(t.value[index] - exact) <= t.ref_err[index] + 1e-25, (name, index)


def test_binary_grid_stays_binary_under_hard_gates() -> None:
    """Logits that pick one gate per neuron and a binary grid: every state stays binary."""
    params = {"height": 2, "width": 2, "channels": 1, "steps": 2, "kernels": 1, "hidden": 2,
              "periodic": True}
    case = Case(op="logic_ca", params=params, storage="fp64", family="normal", seed=1)
    inp = case.inputs()
    inp["grid"] = np.array([[[0.0], [1.0]], [[1.0], [1.0]]])
    rng = np.random.default_rng(0)
    for name in ("perception", "update"):
        pick = rng.integers(0, 16, inp[name].shape[:-1])
        inp[name] = np.where(np.arange(16) == pick[..., None], 40.0, -40.0)
    ref = get_op("logic_ca").reference(inp, params, get_model("fp64"), ("y",))
    y = ref["y"].value
    assert np.all(np.minimum(np.abs(y), np.abs(y - 1)) < 1e-15)


@pytest.mark.parametrize(("params", "match"), [
    ({"height": 0}, "height"), ({"steps": 33}, "steps"), ({"periodic": "yes"}, "periodic"),
    ({"channels": 1.5}, "channels"), ({"colour": 1}, "unknown"),
])
def test_invalid_parameters(params: dict, match: str) -> None:
    base = {"height": 2, "width": 2, "channels": 1, "steps": 1, "kernels": 1, "hidden": 1,
            "periodic": True}
    with pytest.raises(InvalidArgument, match=match):
        get_op("logic_ca").validate({**base, **params})
