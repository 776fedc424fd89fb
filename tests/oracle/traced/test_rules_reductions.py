"""Reduction, contraction, softmax and normalisation rules against torch float32
and mpmath (see traced_rulecheck)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
import pytest
import torch
from traced_rulecheck import RuleCase, check, mpmap

from numoracle.oracle.precision import get_model
from numoracle.oracle.traced import Claims, RuleContext, lookup
from numoracle.oracle.tracked import exact

G = torch.Generator().manual_seed(131)


def rnd(*shape: int, scale: float = 2.0, shift: float = 0.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=G) * scale + shift).float()


def along(f: Callable[[list[Any]], Any], x: Any, axis: int, keep: bool = True) -> Any:
    """``f`` over each lane of ``axis`` of an object array: ``f(lane)`` returns a
    list (same length: kept in place) or a number (the axis reduced)."""
    moved = np.moveaxis(x, axis, -1)
    outs = {}
    for i in np.ndindex(moved.shape[:-1]):
        outs[i] = f(list(moved[i]))
    first = next(iter(outs.values()))
    if isinstance(first, list):
        out = np.empty(moved.shape, dtype=object)
        for i, v in outs.items():
            out[i] = np.array(v + [None], dtype=object)[:-1]
        return np.moveaxis(out, -1, axis)
    out = np.empty(moved.shape[:-1], dtype=object)
    for i, v in outs.items():
        out[i] = v
    return np.expand_dims(out, axis) if keep else out


def mp_softmax(lane: list[Any]) -> list[Any]:
    e = [mpmath.exp(v) for v in lane]
    s = mpmath.fsum(e)
    return [v / s for v in e]


def mp_logsumexp(lane: list[Any]) -> Any:
    return mpmath.log(mpmath.fsum(mpmath.exp(v) for v in lane))


def mp_moments(lane: list[Any], corr: int = 0) -> tuple[Any, Any]:
    n = len(lane)
    mean = mpmath.fsum(lane) / n
    return mean, mpmath.fsum((v - mean) ** 2 for v in lane) / (n - corr)


def mp_layer_norm(x, shape, w, b, eps):
    lead = x.shape[: x.ndim - len(shape)]
    flat = x.reshape(lead + (-1,))
    out, means, rstds = np.empty(flat.shape, object), np.empty(lead, object), np.empty(lead, object)
    for i in np.ndindex(lead):
        mean, var = mp_moments(list(flat[i]))
        r = 1 / mpmath.sqrt(var + mpmath.mpf(eps))
        out[i] = np.array([(v - mean) * r for v in flat[i]] + [None], dtype=object)[:-1]
        means[i], rstds[i] = mean, r
    out = out.reshape(x.shape)
    if w is not None:
        out = out * w
    if b is not None:
        out = out + b
    kept = lead + (1,) * len(shape)
    return out, means.reshape(kept), rstds.reshape(kept)


def mp_group_norm(x, w, b, n, c, hxw, group, eps):
    out, mean, rstd = mp_layer_norm(x.reshape(n, group, -1), (c // group * hxw,), None, None, eps)
    out = out.reshape(n, c, -1) * w.reshape(1, c, 1) + b.reshape(1, c, 1)
    return out.reshape(x.shape), mean.reshape(n, group), rstd.reshape(n, group)


def mp_batch_norm(x, w, b, rm, rv, training, momentum, eps):
    c = x.shape[1]
    lanes = np.moveaxis(x, 1, 0).reshape(c, -1)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if training:
        stats = [mp_moments(list(lanes[i])) for i in range(c)]
        mean = np.array([s[0] for s in stats] + [None], dtype=object)[:-1]
        var = np.array([s[1] for s in stats] + [None], dtype=object)[:-1]
    else:
        mean, var = rm, rv
    rstd = np.array([1 / mpmath.sqrt(v + mpmath.mpf(eps)) for v in var] + [None],
                    dtype=object)[:-1]
    out = (x - mean.reshape(shape)) * rstd.reshape(shape) * w.reshape(shape) + b.reshape(shape)
    if not training:
        return out, np.empty((0,), object), np.empty((0,), object)
    return out, mean, rstd


def mm_mp(a, b):
    return np.matmul(a, b)


a = rnd(6, 9)
x3 = rnd(3, 4, 5)
big_mean = rnd(4, 32, scale=1.0, shift=50.0)
CASES = [
    RuleCase("aten.sum.dim_IntList", (x3, [1]), mp=lambda x, d: np.sum(x, axis=1)),
    RuleCase("aten.sum.dim_IntList", (x3, [0, 2], True),
             mp=lambda x, d, k: np.sum(x, axis=(0, 2), keepdims=True), id="keepdim"),
    RuleCase("aten.sum.default", (x3,), mp=lambda x: np.sum(x)),
    RuleCase("aten.mean.dim", (x3, [-1]), mp=lambda x, d: np.sum(x, axis=-1) / 5),
    RuleCase("aten.mean.default", (x3,), mp=lambda x: np.sum(x) / 60),
    RuleCase("aten.amax.default", (x3, [1])),
    RuleCase("aten.amin.default", (x3, [0, 2], True)),
    RuleCase("aten.max.default", (x3,)),
    RuleCase("aten.min.default", (x3,)),
    RuleCase("aten.max.dim", (x3, 2)),
    RuleCase("aten.min.dim", (x3, 1, True)),
    RuleCase("aten.argmax.default", (x3, 1)),
    RuleCase("aten.argmin.default", (x3,)),
    RuleCase("aten.argmax.default", (torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]), 1),
             id="ties"),
    RuleCase("aten.cumsum.default", (x3, 2),
             mp=lambda x, d: along(lambda ln: [mpmath.fsum(ln[:i + 1]) for i in range(len(ln))],
                                   x, 2)),
    RuleCase("aten.cumprod.default", (x3, 1),
             mp=lambda x, d: along(lambda ln: [mpmath.fprod(ln[:i + 1]) for i in range(len(ln))],
                                   x, 1)),
    RuleCase("aten.linalg_vector_norm.default", (x3, 2, [2]),
             mp=lambda x, o, d: along(lambda ln: mpmath.sqrt(mpmath.fsum(v * v for v in ln)),
                                      x, 2, keep=False)),
    RuleCase("aten.linalg_vector_norm.default", (x3, 1, [1], True),
             mp=lambda x, o, d, k: along(lambda ln: mpmath.fsum(abs(v) for v in ln), x, 1),
             id="l1"),
    RuleCase("aten.var.correction", (x3, [2]), {"correction": 1},
             mp=lambda x, d, correction: along(lambda ln: mp_moments(ln, 1)[1], x, 2, False)),
    RuleCase("aten.std.correction", (big_mean, [1]), {"correction": 0, "keepdim": True},
             mp=lambda x, d, correction, keepdim: along(
                 lambda ln: mpmath.sqrt(mp_moments(ln)[1]), x, 1)),
    RuleCase("aten.var.dim", (x3, [2], False, True),
             mp=lambda x, d, u, k: along(lambda ln: mp_moments(ln, 0)[1], x, 2)),
    RuleCase("aten.std.dim", (x3, [0, 1]),
             mp=lambda x, d: np.array([mpmath.sqrt(mp_moments(list(x[:, :, i].ravel()), 1)[1])
                                       for i in range(5)] + [None], dtype=object)[:-1]),
    RuleCase("aten.any.dim", (x3 > 2.5, 1)),
    RuleCase("aten.any.default", (x3 > 2.5,)),
    RuleCase("aten.any.dims", (x3 > 2.5, [0, 1])),
    RuleCase("aten.mm.default", (a, rnd(9, 4)), mp=mm_mp),
    RuleCase("aten.bmm.default", (rnd(2, 3, 5), rnd(2, 5, 4)), mp=mm_mp),
    RuleCase("aten.addmm.default", (rnd(4), a, rnd(9, 4)), mp=lambda c, a, b: c + np.matmul(a, b)),
    RuleCase("aten.addmm.default", (rnd(6, 4), a, rnd(9, 4)), {"beta": 0.5, "alpha": 3.0},
             mp=lambda c, a, b, beta, alpha: c * mpmath.mpf(beta) + np.matmul(a, b) * 3,
             id="scaled"),
    RuleCase("aten.baddbmm.default", (rnd(2, 3, 4), rnd(2, 3, 5), rnd(2, 5, 4)),
             mp=lambda c, a, b: c + np.matmul(a, b)),
    RuleCase("aten.dot.default", (rnd(7), rnd(7)), mp=lambda a, b: np.dot(a, b)),
    RuleCase("aten.mv.default", (a, rnd(9)), mp=lambda a, b: np.matmul(a, b)),
    RuleCase("aten._softmax.default", (x3, 1, False),
             mp=lambda x, d, h: along(mp_softmax, x, d)),
    RuleCase("aten._softmax.default", (rnd(3, 8, scale=40.0), -1, False),
             mp=lambda x, d, h: along(mp_softmax, x, -1), id="large"),
    RuleCase("aten._log_softmax.default", (x3, 2, False),
             mp=lambda x, d, h: along(lambda ln: [v - mp_logsumexp(ln) for v in ln], x, d)),
    RuleCase("aten.logsumexp.default", (x3, [1]),
             mp=lambda x, d: along(mp_logsumexp, x, 1, keep=False)),
    RuleCase("aten.logsumexp.default", (rnd(3, 8, scale=40.0), [0, 1], True),
             mp=lambda x, d, k: np.array(mp_logsumexp(list(x.ravel())), dtype=object).reshape(
                 1, 1), id="keepdim"),
    RuleCase("aten._softmax_backward_data.default",
             (rnd(3, 6), torch.softmax(rnd(3, 6), 1), 1, torch.float32),
             mp=lambda g, y, d, t: y * (g - np.sum(g * y, axis=1, keepdims=True))),
    RuleCase("aten._log_softmax_backward_data.default",
             (rnd(3, 6), torch.log_softmax(rnd(3, 6), 1), 1, torch.float32),
             mp=lambda g, y, d, t: g - mpmap(mpmath.exp, y) * np.sum(g, axis=1, keepdims=True)),
    RuleCase("aten._log_softmax_backward_data.default",
             (-torch.eye(6)[[4, 0, 5]] * rnd(3, 1), torch.log_softmax(rnd(3, 6, scale=8.0), 1),
              1, torch.float32),
             mp=lambda g, y, d, t: g - mpmap(mpmath.exp, y) * np.sum(g, axis=1, keepdims=True),
             id="one-hot"),
    RuleCase("aten.native_layer_norm.default", (rnd(4, 16), [16], rnd(16), rnd(16), 1e-5),
             mp=mp_layer_norm),
    RuleCase("aten.native_layer_norm.default", (big_mean, [32], None, None, 1e-5),
             mp=mp_layer_norm, id="large-mean"),
    RuleCase("aten.native_layer_norm.default", (rnd(4, 16, shift=1.0), [16], rnd(16), None,
                                                1e-5),
             mp=mp_layer_norm, claims=Claims(variance="one-pass"), id="one-pass"),
    RuleCase("aten.native_group_norm.default", (rnd(2, 6, 3, 3), rnd(6), rnd(6), 2, 6, 9, 3,
                                                1e-5), mp=mp_group_norm),
    RuleCase("aten.native_batch_norm.default", (rnd(4, 3, 5), rnd(3), rnd(3), None, None, True,
                                                0.1, 1e-5), mp=mp_batch_norm),
    RuleCase("aten._native_batch_norm_legit.default", (rnd(4, 3, 5), rnd(3), rnd(3), rnd(3),
                                                       rnd(3).abs(), True, 0.1, 1e-5),
             mp=mp_batch_norm),
    RuleCase("aten._native_batch_norm_legit.no_stats", (rnd(4, 3, 2, 2), rnd(3), rnd(3), True,
                                                        0.1, 1e-5),
             mp=lambda x, w, b, t, m, e: mp_batch_norm(x, w, b, None, None, True, m, e)),
    RuleCase("aten._native_batch_norm_legit_no_training.default",
             (rnd(4, 3, 5), rnd(3), rnd(3), rnd(3), rnd(3).abs() + 0.5, 0.1, 1e-5),
             mp=lambda x, w, b, rm, rv, m, e: mp_batch_norm(x, w, b, rm, rv, False, m, e)),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_rule(case: RuleCase) -> None:
    check(case)


def test_batch_norm_functional_running_stats() -> None:
    """The functional training form updates the running statistics (the variance
    unbiased); checked against mpmath and torch."""
    x, w, b, rm, rv = rnd(4, 3, 5), rnd(3), rnd(3), rnd(3), rnd(3).abs() + 0.5

    def mp(x, w, b, rm, rv, training, momentum, eps):
        out, mean, rstd = mp_batch_norm(x, w, b, rm, rv, True, momentum, eps)
        lanes = np.moveaxis(x, 1, 0).reshape(3, -1)
        unb = np.array([mp_moments(list(lanes[i]), 1)[1] for i in range(3)] + [None],
                       dtype=object)[:-1]
        mo = mpmath.mpf(momentum)
        return out, mean, rstd, rm * (1 - mo) + mean * mo, rv * (1 - mo) + unb * mo
    check(RuleCase("aten._native_batch_norm_legit_functional.default",
                   (x, w, b, rm, rv, True, 0.1, 1e-5), mp=mp))


def test_ties_are_set_valued() -> None:
    ctx = RuleContext(get_model("fp32"))
    _, idx = lookup("aten.max.dim")(ctx, exact(np.array([[1.0, 3.0, 3.0]])), 1)
    assert idx.admits(np.array([1])).all() and idx.admits(np.array([2])).all()
    assert not idx.admits(np.array([0])).any()


def test_dropped_tail_is_caught() -> None:
    """A sum that drops its last term is outside the bound (the exact regime)."""
    x = torch.arange(1, 65, dtype=torch.float32).reshape(4, 16)
    ctx = RuleContext(get_model("fp32"))
    r = lookup("aten.sum.dim_IntList")(ctx, exact(x.double().numpy()), [1])
    wrong = x[:, :-1].sum(1).double().numpy()
    assert r.is_exact and (np.abs(wrong - r.value) > r.det + r.ref_err).all()


def test_one_pass_claim_is_looser_where_it_cancels() -> None:
    ctx2 = RuleContext(get_model("fp32"))
    ctx1 = RuleContext(get_model("fp32"), Claims(variance="one-pass"))
    xt = exact(big_mean.double().numpy())
    two = lookup("aten.native_layer_norm.default")(ctx2, xt, [32], None, None, 1e-5)[0]
    one = lookup("aten.native_layer_norm.default")(ctx1, xt, [32], None, None, 1e-5)[0]
    assert np.median(one.det) > 10 * np.median(two.det)


#: rules whose mpmath check is a test of its own above
ALSO_TESTED = ("aten._native_batch_norm_legit_functional.default",)


def mp_nll(x, t, w, reduction, ignore):
    n = x.shape[0]
    picks, weights = [], []
    for i in range(n):
        ti = int(t[i])
        wi = mpmath.mpf(0) if ti == ignore else (mpmath.mpf(1) if w is None else w[ti])
        picks.append(-x[i, ti] * wi if ti != ignore else mpmath.mpf(0))
        weights.append(wi)
    total = mpmath.fsum(weights)
    if reduction == 0:
        return np.array(picks + [None], dtype=object)[:-1], mpmath.mpf(0)
    s = mpmath.fsum(picks)
    return (s if reduction == 2 else s / total), total


def mp_nll_backward(g, x, t, w, reduction, ignore, total):
    out = np.empty(x.shape, dtype=object)
    out[...] = mpmath.mpf(0)
    for i in range(x.shape[0]):
        ti = int(t[i])
        if ti == ignore:
            continue
        wi = mpmath.mpf(1) if w is None else w[ti]
        gi = g[i] if reduction == 0 else g[()]
        out[i, ti] = -gi * wi / (total[()] if reduction == 1 else 1)
    return out


_logp = torch.log_softmax(rnd(6, 5), 1)
_t = torch.tensor([0, 4, 2, 2, 1, 3])
_w = rnd(5).abs() + 0.5
CASES += [
    RuleCase("aten.nll_loss_forward.default", (_logp, _t, None, 1, -100), mp=mp_nll),
    RuleCase("aten.nll_loss_forward.default", (_logp, _t, _w, 1, 2), mp=mp_nll,
             id="weighted-ignore"),
    RuleCase("aten.nll_loss_forward.default", (_logp, _t, _w, 0, -100), mp=mp_nll, id="none"),
    RuleCase("aten.nll_loss_forward.default", (_logp, _t, None, 2, -100), mp=mp_nll, id="sum"),
    RuleCase("aten.nll_loss_backward.default", (torch.tensor(0.7), _logp, _t, _w, 1, 2,
                                                 _w[[0, 4, 1, 3]].sum()),
             mp=mp_nll_backward),
    RuleCase("aten.nll_loss_backward.default", (rnd(6), _logp, _t, None, 0, -100,
                                                 torch.tensor(6.0)),
             mp=mp_nll_backward, id="none"),
]


def mp_nll2d(x, t, w, reduction, ignore):
    flat_x = np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])
    out = mp_nll(flat_x, t.reshape(-1), w, reduction, ignore)
    if reduction == 0:
        return out[0].reshape(t.shape), out[1]
    return out


_logp2 = torch.log_softmax(rnd(2, 4, 3, 3), 1)
_t2 = torch.randint(0, 4, (2, 3, 3), generator=G)
CASES += [
    RuleCase("aten.nll_loss2d_forward.default", (_logp2, _t2, None, 1, -100), mp=mp_nll2d),
    RuleCase("aten.nll_loss2d_backward.default", (torch.tensor(1.3), _logp2, _t2, None, 2, -100,
                                                   torch.tensor(18.0)),
             mp=lambda g, x, t, w, r, i, tw: np.moveaxis(mp_nll_backward(
                 g, np.moveaxis(x, 1, -1).reshape(-1, 4), t.reshape(-1), w, r, i, tw).reshape(
                 2, 3, 3, 4), -1, 1)),
]


def mp_layer_norm_backward(g, x, shape, mean, rstd, w, b, mask):
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    lead = tuple(range(x.ndim - len(shape)))
    k = int(np.prod(shape))
    mu, rs = mean, rstd  # the op takes the saved statistics as given
    xhat = (x - mu) * rs
    gx = g * w
    gi = rs * (gx - np.sum(gx, axis=axes, keepdims=True) / k
               - xhat * np.sum(gx * xhat, axis=axes, keepdims=True) / k)
    return gi, np.sum(g * xhat, axis=lead), np.sum(g, axis=lead)


def _ln_backward_case() -> RuleCase:
    x, w, b = rnd(3, 8), rnd(8), rnd(8)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [8], w, b, 1e-5)
    return RuleCase("aten.native_layer_norm_backward.default",
                    (rnd(3, 8), x, [8], mean, rstd, w, b, [True, True, True]),
                    mp=mp_layer_norm_backward)


def _gn_backward_case() -> RuleCase:
    x, w, b = rnd(2, 4, 3), rnd(4), rnd(4)
    _, mean, rstd = torch.ops.aten.native_group_norm(x, w, b, 2, 4, 3, 2, 1e-5)

    def mp(g, x, mean, rstd, w, n, c, hxw, grp, mask):
        mu, rs = mean.reshape(n, grp, 1), rstd.reshape(n, grp, 1)
        gi, _, _ = mp_layer_norm_backward(
            g.reshape(n, grp, -1), x.reshape(n, grp, -1), (c // grp * hxw,), mu, rs,
            np.repeat(w, hxw).reshape(1, grp, -1), None, mask)
        xhat = ((x.reshape(n, grp, -1) - mu) * rs).reshape(n, c, hxw)
        return (gi.reshape(x.shape), np.sum(g * xhat, axis=(0, 2)), np.sum(g, axis=(0, 2)))
    return RuleCase("aten.native_group_norm_backward.default",
                    (rnd(2, 4, 3), x, mean, rstd, w, 2, 4, 3, 2, [True, True, True]), mp=mp)


def _bn_backward_case(train: bool) -> RuleCase:
    x, w, b = rnd(4, 3, 2), rnd(3), rnd(3)
    rm, rv = rnd(3), rnd(3).abs() + 0.5
    _, sm, si = torch.ops.aten.native_batch_norm(x, w, b, rm.clone(), rv.clone(), train, 0.1,
                                                 1e-5)

    def mp(g, x, w, rm, rv, sm, si, train, eps, mask):
        xt = np.moveaxis(x, 1, -1).reshape(-1, 3)  # (N*L, C): statistics over axis 0
        gt = np.moveaxis(g, 1, -1).reshape(-1, 3)
        if train:
            gi_t, _, _ = mp_layer_norm_backward(gt.T, xt.T, (xt.shape[0],), sm.reshape(3, 1),
                                                si.reshape(3, 1), w.reshape(3, 1), None, mask)
            gi = np.moveaxis(gi_t.T.reshape(4, 2, 3), -1, 1)
            xhat = (xt - sm) * si
            gw, gb = np.sum(gt * xhat, axis=0), np.sum(gt, axis=0)
        else:
            rs = mpmap(lambda v: 1 / mpmath.sqrt(v + mpmath.mpf(eps)), rv)
            gi = g * (w * rs).reshape(1, 3, 1)
            xhat = (xt - rm) * rs
            gw, gb = np.sum(gt * xhat, axis=0), np.sum(gt, axis=0)
        return gi, gw, gb
    return RuleCase("aten.native_batch_norm_backward.default",
                    (rnd(4, 3, 2), x, w, rm, rv, sm if train else None,
                     si if train else None, train, 1e-5, [True, True, True]), mp=mp,
                    id="train" if train else "eval")


CASES += [_ln_backward_case(), _gn_backward_case(), _bn_backward_case(True),
          _bn_backward_case(False)]


def test_tied_argmax_is_judged_set_valued() -> None:
    """A reference returning an argmax: a kernel that breaks a tie the other way
    passes, one that picks a smaller value fails."""
    from numoracle.oracle.traced.library._common import as_judged

    ctx = RuleContext(get_model("fp32"))
    idx = lookup("aten.argmax.default")(ctx, exact(np.array([[1.0, 3.0, 3.0, 0.0]])), 1)
    judged = as_judged(idx)
    bound = judged.det + judged.ref_err
    assert (np.abs(np.array([2.0]) - judged.value) <= bound).all()
    assert not (np.abs(np.array([3.0]) - judged.value) <= bound).all()


def test_lanes_without_a_tie_bring_no_admissible_positions_to_the_host() -> None:
    """``ties_only``: the admissible positions come back only where some lane admits
    two; the argmax of distinct values is a plain index array, the same as without."""
    from numoracle.oracle.traced.library.reductions import arg_lanes

    v = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    r = np.full_like(v, 1e-3)
    idx, allowed = arg_lanes(v, r, ties_only=True)
    assert allowed is None and idx.tolist() == [1, 0]
    assert arg_lanes(v, r)[1].sum() == 2  # one admissible position per lane
    idx, allowed = arg_lanes(v, np.full_like(v, 3.0), ties_only=True)  # wide: ties
    assert allowed is not None and allowed.sum(axis=-1).tolist() == [3, 2]
    ctx = RuleContext(get_model("fp32"))
    got = lookup("aten.argmax.default")(ctx, exact(v), 1)
    assert type(got) is np.ndarray and got.tolist() == [1, 0]
