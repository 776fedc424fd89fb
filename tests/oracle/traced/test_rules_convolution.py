"""Convolution rules against torch float32 and mpmath (see traced_rulecheck); the
mpmath references are the definitions, looped over outputs (direct) or inputs
(transposed) with torch's index arithmetic."""

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

G = torch.Generator().manual_seed(11)


def rnd(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=G)


def _zero(shape):
    out = np.empty(shape, dtype=object)
    out[...] = mpmath.mpf(0)
    return out


def _ints(v, d):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return [int(a) for a in (v * d if len(v) == 1 else v)]


def mp_conv(x, w, b, s, p, dl, tr, op, g):
    d = x.ndim - 2
    s, p, dl, op = (_ints(v, d) for v in (s, p, dl, op))
    k = w.shape[2:]
    n, c = x.shape[:2]
    if not tr:
        o = w.shape[0]
        cg, og = c // g, o // g
        outs = [(x.shape[2 + i] + 2 * p[i] - dl[i] * (k[i] - 1) - 1) // s[i] + 1
                for i in range(d)]
        y = _zero((n, o, *outs))
        for ni, oi in itertools.product(range(n), range(o)):
            grp = oi // og
            for pos in itertools.product(*[range(v) for v in outs]):
                acc = []
                for ci in range(cg):
                    for t in itertools.product(*[range(v) for v in k]):
                        src = [pos[i] * s[i] - p[i] + t[i] * dl[i] for i in range(d)]
                        if all(0 <= src[i] < x.shape[2 + i] for i in range(d)):
                            acc.append(x[(ni, grp * cg + ci, *src)] * w[(oi, ci, *t)])
                y[(ni, oi, *pos)] = mpmath.fsum(acc) + (b[oi] if b is not None else 0)
        return y
    cin, coutg = w.shape[:2]
    cing = cin // g
    outs = [(x.shape[2 + i] - 1) * s[i] - 2 * p[i] + dl[i] * (k[i] - 1) + op[i] + 1
            for i in range(d)]
    y = _zero((n, coutg * g, *outs))
    for ni, ci in itertools.product(range(n), range(cin)):
        grp = ci // cing
        for pos in itertools.product(*[range(v) for v in x.shape[2:]]):
            for co in range(coutg):
                for t in itertools.product(*[range(v) for v in k]):
                    dst = [pos[i] * s[i] - p[i] + t[i] * dl[i] for i in range(d)]
                    if all(0 <= dst[i] < outs[i] for i in range(d)):
                        y[(ni, grp * coutg + co, *dst)] += x[(ni, ci, *pos)] * w[(ci, co, *t)]
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * d)
    return y


def mp_conv_backward(g, x, w, bias_sizes, s, p, dl, tr, op, groups, mask):
    """Each gradient as the derivative of <g, conv(x, w)>: linear in x and in w, so
    its component i is <g, conv(e_i, w)> (<g, conv(x, e_i)>)."""
    outs = []
    if mask[0]:
        gi = _zero(x.shape)
        for i in np.ndindex(x.shape):
            e = _zero(x.shape)
            e[i] = mpmath.mpf(1)
            gi[i] = mpmath.fsum(np.ravel(mp_conv(e, w, None, s, p, dl, tr, op, groups) * g))
        outs.append(gi)
    if mask[1]:
        gw = _zero(w.shape)
        for i in np.ndindex(w.shape):
            e = _zero(w.shape)
            e[i] = mpmath.mpf(1)
            gw[i] = mpmath.fsum(np.ravel(mp_conv(x, e, None, s, p, dl, tr, op, groups) * g))
        outs.append(gw)
    if mask[2]:
        outs.append(np.sum(np.moveaxis(g, 1, 0).reshape(g.shape[1], -1), axis=1))
    return tuple(outs)


def conv_case(x, w, b, s, p, dl, tr, op, g, id=""):
    return RuleCase("aten.convolution.default", (x, w, b, s, p, dl, tr, op, g), mp=mp_conv,
                    id=id)


def backward_case(x, w, s, p, dl, tr, op, g, mask=(True, True, True), id=""):
    y = torch.ops.aten.convolution(x, w, None, s, p, dl, tr, op, g)
    return RuleCase("aten.convolution_backward.default",
                    (rnd(*y.shape), x, w, [w.shape[1] * g if tr else w.shape[0]], s, p, dl, tr,
                     op, g, list(mask)), mp=mp_conv_backward, id=id)


CASES = [
    conv_case(rnd(2, 3, 6, 5), rnd(4, 3, 3, 3), rnd(4), [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
              "2d"),
    conv_case(rnd(1, 4, 7, 7), rnd(4, 2, 3, 2), None, [2, 1], [0, 1], [1, 2], False, [0, 0], 2,
              "2d-grouped-strided"),
    conv_case(rnd(2, 3, 9), rnd(2, 3, 3), rnd(2), [2], [1], [1], False, [0], 1, "1d"),
    conv_case(rnd(1, 2, 4, 5, 4), rnd(3, 2, 2, 3, 2), rnd(3), [1, 2, 1], [1, 1, 0], [1, 1, 1],
              False, [0, 0, 0], 1, "3d"),
    conv_case(rnd(1, 4, 4, 3, 4), rnd(2, 2, 2, 2, 2), None, [1, 1, 1], [0, 0, 0], [2, 1, 1],
              False, [0, 0, 0], 2, "3d-grouped-dilated"),
    conv_case(rnd(2, 3, 4, 5), rnd(3, 2, 3, 3), rnd(2), [2, 2], [1, 0], [1, 1], True, [1, 0], 1,
              "2d-transposed"),
    conv_case(rnd(1, 4, 3, 3), rnd(4, 1, 2, 3), None, [1, 2], [0, 1], [2, 1], True, [0, 1], 2,
              "2d-transposed-grouped"),
    conv_case(rnd(2, 2, 5), rnd(2, 3, 3), rnd(3), [2], [1], [1], True, [1], 1, "1d-transposed"),
    conv_case(rnd(1, 2, 3, 2, 3), rnd(2, 2, 2, 3, 2), rnd(2), [2, 1, 2], [0, 1, 1], [1, 1, 1],
              True, [1, 0, 0], 1, "3d-transposed"),
    backward_case(rnd(2, 2, 5, 4), rnd(3, 2, 3, 2), [1, 2], [1, 0], [1, 1], False, [0, 0], 1,
                  id="2d"),
    backward_case(rnd(1, 4, 4, 4), rnd(2, 2, 2, 2), [2, 1], [0, 1], [1, 1], False, [0, 0], 2,
                  mask=(True, True, False), id="2d-grouped"),
    backward_case(rnd(1, 2, 3, 3), rnd(2, 3, 2, 2), [2, 2], [1, 0], [1, 1], True, [1, 0], 1,
                  id="2d-transposed"),
    backward_case(rnd(2, 2, 6), rnd(3, 2, 3), [2], [1], [1], False, [0], 1, id="1d"),
    backward_case(rnd(1, 2, 3, 4, 3), rnd(2, 1, 2, 2, 2), [1, 2, 1], [1, 0, 0], [1, 1, 1],
                  False, [0, 0, 0], 2, id="3d-grouped"),
    backward_case(rnd(1, 2, 2, 3, 2), rnd(2, 2, 2, 1, 2), [2, 1, 2], [0, 0, 1], [1, 1, 1],
                  True, [1, 0, 0], 1, id="3d-transposed"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_rule(case: RuleCase) -> None:
    check(case)


def test_wrong_output_padding_is_caught() -> None:
    """Integer data: a transposed convolution is exact; one computed with another
    output padding (the element past the edge dropped) fails the bound."""
    x = torch.arange(2 * 3 * 3, dtype=torch.float32).reshape(1, 2, 3, 3) - 8
    w = torch.arange(2 * 2 * 3 * 3, dtype=torch.float32).reshape(2, 2, 3, 3) % 5 - 2
    ctx = RuleContext(get_model("fp32"))
    r = lookup("aten.convolution.default")(ctx, exact(x.double().numpy()),
                                           exact(w.double().numpy()), None, [2, 2], [1, 1],
                                           [1, 1], True, [1, 1], 1)
    assert r.is_exact
    wrong = torch.ops.aten.convolution(x, w, None, [2, 2], [1, 1], [1, 1], True, [0, 0], 1)
    wrong = torch.nn.functional.pad(wrong, (0, 1, 0, 1)).double().numpy()
    assert (np.abs(wrong - r.value) > r.det + r.ref_err).any()
