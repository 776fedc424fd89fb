"""Pooling rules against torch float32 and mpmath (see traced_rulecheck); the mpmath
references loop over windows with torch's index arithmetic, written out here."""

from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest
import torch
from traced_rulecheck import RuleCase, check

from numoracle.oracle.precision import get_model
from numoracle.oracle.traced import RuleContext, lookup
from numoracle.oracle.tracked import exact

G = torch.Generator().manual_seed(5)


def rnd(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=G)


def _params(d, k, s, p, dl):
    def per(v, default):
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        if not v:
            return list(default)
        return v * d if len(v) == 1 else v
    k = per(k, ())
    return k, per(s, k), per(p, [0] * d), per(dl, [1] * d)


def _out(size, k, s, p, dl, ceil):
    span = size + 2 * p - dl * (k - 1) - 1
    o = (-(-span // s) if ceil else span // s) + 1
    if ceil and (o - 1) * s >= size + p:
        o -= 1
    return o


def mp_pool(x, d, k, s, p, dl, ceil, mode, cip=True, dov=None):
    k, s, p, dl = _params(d, k, s, p, dl)
    sp = x.shape[-d:]
    outs = [_out(sp[i], k[i], s[i], p[i], dl[i], ceil) for i in range(d)]
    lead = x.shape[:-d]
    out = np.empty(lead + tuple(outs), dtype=object)
    for li in np.ndindex(lead):
        for o in itertools.product(*[range(n) for n in outs]):
            taps = []
            for t in itertools.product(*[range(kk) for kk in k]):
                pos = [o[i] * s[i] - p[i] + t[i] * dl[i] for i in range(d)]
                if all(0 <= pos[i] < sp[i] for i in range(d)):
                    taps.append(x[li + tuple(pos)])
            if mode == "max":
                out[li + o] = max(taps)
            else:
                size, real = 1, 1
                for i in range(d):
                    start = o[i] * s[i] - p[i]
                    end = min(start + k[i], sp[i] + p[i])
                    size *= end - start
                    real *= min(end, sp[i]) - max(start, 0)
                div = dov if dov else (size if cip else real)
                out[li + o] = mpmath.fsum(taps) / div
    return out


def mp_max_backward(g, x, k, s, p, dl, ceil, idx):
    d = len(k) if isinstance(k, (list, tuple)) else 2
    lead = x.shape[:-d]
    out = np.empty(x.shape, dtype=object)
    out[...] = mpmath.mpf(0)
    plane = out.reshape(lead + (-1,))
    for i in np.ndindex(idx.shape):
        plane[i[: len(lead)] + (int(idx[i]),)] += g[i]
    return out


CASES = [
    RuleCase("aten.max_pool2d_with_indices.default", (rnd(2, 3, 7, 6), [2, 2]),
             mp=lambda x, k: mp_pool(x, 2, k, [], 0, 1, False, "max")),
    RuleCase("aten.max_pool2d_with_indices.default", (rnd(1, 2, 9, 8), [3, 2], [2, 1], [1, 1],
                                                      [2, 1], True),
             mp=lambda x, k, s, p, dl, c: mp_pool(x, 2, k, s, p, dl, c, "max"), id="ceil-dil"),
    RuleCase("aten.max_pool3d_with_indices.default", (rnd(1, 2, 4, 5, 4), [2, 2, 2], [2, 2, 2],
                                                      [1, 0, 1]),
             mp=lambda x, k, s, p: mp_pool(x, 3, k, s, p, 1, False, "max")),
    RuleCase("aten.avg_pool2d.default", (rnd(2, 3, 7, 6), [3, 3], [2, 2], [1, 1]),
             mp=lambda x, k, s, p: mp_pool(x, 2, k, s, p, 1, False, "avg")),
    RuleCase("aten.avg_pool2d.default", (rnd(1, 2, 7, 6), [3, 2], [2, 2], [1, 1], True, False),
             mp=lambda x, k, s, p, c, cip: mp_pool(x, 2, k, s, p, 1, c, "avg", cip),
             id="ceil-nopad"),
    RuleCase("aten.avg_pool2d.default", (rnd(1, 2, 5, 5), [2, 2], [2, 2], [0, 0], True, True, 3),
             mp=lambda x, k, s, p, c, cip, dov: mp_pool(x, 2, k, s, p, 1, c, "avg", cip, dov),
             id="divisor"),
    RuleCase("aten.avg_pool3d.default", (rnd(1, 2, 4, 5, 4), [2, 3, 2], [1, 2, 2], [1, 1, 0]),
             mp=lambda x, k, s, p: mp_pool(x, 3, k, s, p, 1, False, "avg")),
]


def _max_backward_case(d: int, shape: tuple[int, ...], k: list[int], s: list[int],
                       p: list[int]) -> RuleCase:
    x = rnd(*shape)
    fwd = torch.ops.aten.max_pool2d_with_indices if d == 2 else \
        torch.ops.aten.max_pool3d_with_indices
    out, idx = fwd(x, k, s, p)
    name = f"aten.max_pool{d}d_with_indices_backward.default"
    return RuleCase(name, (rnd(*out.shape), x, k, s, p, [1] * d, False, idx),
                    mp=lambda g, x, k, s, p, dl, c, i: mp_max_backward(g, x, k, s, p, dl, c, i))


def _avg_backward_case(d: int, shape: tuple[int, ...], k: list[int], s: list[int],
                       p: list[int], cip: bool) -> RuleCase:
    x = rnd(*shape)
    fwd = torch.ops.aten.avg_pool2d if d == 2 else torch.ops.aten.avg_pool3d
    out = fwd(x, k, s, p, False, cip)
    g = rnd(*out.shape)

    def mp(g, x, k, s, p, c, cip, dov):
        # the transpose of the forward: <g, pool(e_i)> for each input position
        res = np.empty(x.shape, dtype=object)
        for i in np.ndindex(x.shape):
            e = np.empty(x.shape, dtype=object)
            e[...] = mpmath.mpf(0)
            e[i] = mpmath.mpf(1)
            res[i] = mpmath.fsum(np.ravel(mp_pool(e, d, k, s, p, 1, c, "avg", cip, dov) * g))
        return res
    name = f"aten.avg_pool{d}d_backward.default"
    return RuleCase(name, (g, x, k, s, p, False, cip, None), mp=mp)


CASES += [
    _max_backward_case(2, (1, 2, 6, 5), [2, 2], [1, 1], [0, 0]),
    _max_backward_case(3, (1, 1, 4, 4, 3), [2, 2, 2], [1, 2, 1], [1, 0, 0]),
    _avg_backward_case(2, (1, 2, 5, 4), [3, 2], [2, 1], [1, 0], True),
    _avg_backward_case(3, (1, 1, 3, 4, 3), [2, 2, 2], [1, 2, 1], [0, 1, 0], False),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_rule(case: RuleCase) -> None:
    check(case)


def test_window_off_by_one_is_caught() -> None:
    """Integer inputs: average pooling is exact or nearly; a 2x2 window read as 3x3
    (clipped) leaves the bound."""
    x = torch.arange(64, dtype=torch.float32).reshape(1, 1, 8, 8)
    ctx = RuleContext(get_model("fp32"))
    r = lookup("aten.avg_pool2d.default")(ctx, exact(x.double().numpy()), [2, 2], [2, 2])
    wrong = torch.nn.functional.avg_pool2d(x, 3, 2, 1).double().numpy()[..., :4, :4]
    assert (np.abs(wrong - r.value) > r.det + r.ref_err).any()


def test_max_pool_ties_admit_either_index() -> None:
    ctx = RuleContext(get_model("fp32"))
    x = exact(np.array([[[[1.0, 1.0], [0.0, 1.0]]]]))
    _, idx = lookup("aten.max_pool2d_with_indices.default")(ctx, x, [2, 2])
    assert idx.admits(np.array([[[[0]]]])).all() and idx.admits(np.array([[[[3]]]])).all()
    assert not idx.admits(np.array([[[[2]]]])).any()


def mp_adaptive(x, out):
    d = len(out)
    sp = x.shape[-d:]
    lead = x.shape[:-d]
    res = np.empty(lead + tuple(out), dtype=object)
    for li in np.ndindex(lead):
        for o in itertools.product(*[range(v) for v in out]):
            ranges = [range((o[i] * sp[i]) // out[i], -((-(o[i] + 1) * sp[i]) // out[i]))
                      for i in range(d)]
            taps = [x[li + t] for t in itertools.product(*ranges)]
            res[li + o] = mpmath.fsum(taps) / len(taps)
    return res


def _adaptive_backward_case() -> RuleCase:
    x = rnd(1, 2, 7, 5)
    g = rnd(1, 2, 3, 4)

    def mp(g, x):
        res = np.empty(x.shape, dtype=object)
        for i in np.ndindex(x.shape):
            e = np.empty(x.shape, dtype=object)
            e[...] = mpmath.mpf(0)
            e[i] = mpmath.mpf(1)
            res[i] = mpmath.fsum(np.ravel(mp_adaptive(e, (3, 4)) * g))
        return res
    return RuleCase("aten._adaptive_avg_pool2d_backward.default", (g, x), mp=mp)


CASES += [
    RuleCase("aten.avg_pool1d.default", (rnd(2, 3, 9), [3], [2], [1]),
             mp=lambda x, k, s, p: mp_pool(x, 1, k, s, p, 1, False, "avg")),
    RuleCase("aten._adaptive_avg_pool2d.default", (rnd(2, 3, 7, 5), [3, 4]),
             mp=lambda x, o: mp_adaptive(x, o)),
    RuleCase("aten._adaptive_avg_pool2d.default", (rnd(1, 2, 6, 6), [1, 1]),
             mp=lambda x, o: mp_adaptive(x, o), id="global"),
    RuleCase("aten.adaptive_avg_pool1d.default", (rnd(2, 3, 10), [4]),
             mp=lambda x, o: mp_adaptive(x, o)),
    _adaptive_backward_case(),
]
