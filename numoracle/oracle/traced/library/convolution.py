"""Rules for ``aten.convolution`` (1-D, 2-D and 3-D; direct, transposed and grouped)
and ``aten.convolution_backward``.

2-D convolutions go through the hand-written conv2d reference
(:func:`~numoracle.oracle.ops.conv2d.conv2d_tracked`): one contraction per
output element with its own length, the exact regime, and the transform
algorithms (Winograd, FFT) the claimed model allows. A transposed convolution is
the input gradient of the convolution it transposes, and its weight gradient
the weight gradient of that convolution with the roles of input and upstream
gradient swapped, so both come from the same machinery. 1-D convolutions are
2-D ones over a height of 1.

3-D convolutions are one explicit contraction per output element over the
windows of the zero-padded input (:class:`._windows.Windows`); a transposed one
convolves the input with zeros inserted between its elements (stride) and
around it, with the flipped kernel. Padding and inserted zeros are exact zeros,
counted as terms, so the bound is that of the full window's length; their
backward is made of the same contractions (:func:`_backward_windows`).

A bias added after a transposed convolution may have been a term of its
contraction in the kernel: the bound then carries ``gamma_{n+1}(u) |bias|``
besides the addition's rounding. Under the per-op rounding claim the bias is
added to the convolution's result rounded to the storage format, as eager torch
does on CUDA (the convolution, then the bias added as an op of its own); a
kernel that adds it inside its accumulation is within that bound too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ...ops.conv2d import conv2d_tracked
from ...precision import gamma
from ...tracked import Tracked, add, exact, folded, matmul, sum_
from ...xp import array_module
from ..rules import NoRule, RuleContext, rule
from ._common import as_tracked, tmap_all
from ._windows import Windows

__all__ = ["convolution"]


def _ints(v: Sequence[int] | int, d: int) -> tuple[int, ...]:
    vals: list[Any] = list(v) if isinstance(v, (list, tuple)) else [v]
    return tuple(int(a) for a in (vals * d if len(vals) == 1 else vals))


def _params(x_shape: Sequence[int], w_shape: Sequence[int], stride: Any, padding: Any,
            dilation: Any, groups: int, bias: bool) -> dict[str, Any]:
    return {"kernel_size": tuple(int(k) for k in w_shape[2:]), "stride": _ints(stride, 2),
            "padding": _ints(padding, 2), "dilation": _ints(dilation, 2), "groups": int(groups),
            "bias": bias, "batch": int(x_shape[0]), "in_channels": int(x_shape[1]),
            "height": int(x_shape[2]), "width": int(x_shape[3])}


def _bias_as_term(ctx: RuleContext, y: Tracked, bias: Tracked, n: int) -> Tracked:
    """``y + bias`` (bias on axis 1), with ``gamma_{n+1}(u) |bias|`` for a kernel
    that adds the bias inside its contraction."""
    shape = (1, -1) + (1,) * (y.value.ndim - 2)
    b = tmap_all(folded(bias), lambda a: np.reshape(a, shape))
    out = add(y, b, ctx.model)
    extra = float(gamma(np.asarray(n + 1), ctx.model.acc_unit())) * (np.abs(b.value) + b.det)
    return replace(out, det=out.det + extra, prob=out.prob + extra)


def scattered(ctx: RuleContext, t: Tracked, parts: int) -> Tracked:
    """``t`` under the per-op claim where eager torch's CPU kernels sum it from
    ``parts`` partial results, each rounded to the storage format and added into
    an output tensor of the storage format: a transposed convolution and a
    convolution's input gradient (one partial per kernel tap, ``col2im``), a
    weight gradient (one partial per sample). That is ``2 parts`` roundings of
    at most ``u S`` each (``S`` the magnitudes of the element's terms)."""
    if not ctx.stores_per_op() or parts <= 1:
        return t
    extra = gamma(np.asarray(2 * parts), ctx.model.storage.unit_roundoff()) * (t.mag + t.det)
    return replace(t, det=t.det + extra, prob=t.prob + extra)


def _conv2d(ctx: RuleContext, x: Tracked, w: Tracked, bias: Tracked | None, stride: Any,
            padding: Any, dilation: Any, transposed: bool, output_padding: Any,
            groups: int) -> Tracked:
    m = ctx.model
    if not transposed:
        params = _params(x.shape, w.shape, stride, padding, dilation, groups, bias is not None)
        return conv2d_tracked(x, w, bias, params, m, outputs=("y",))["y"]
    s, p, dl, op = (_ints(v, 2) for v in (stride, padding, dilation, output_padding))
    k = w.shape[2:]
    n, cout = x.shape[0], w.shape[1] * groups
    out_hw = tuple((x.shape[2 + i] - 1) * s[i] - 2 * p[i] + dl[i] * (k[i] - 1) + op[i] + 1
                   for i in range(2))
    shadow = exact(np.zeros((n, cout) + out_hw))  # the convolution's input (shape only)
    params = _params(shadow.shape, w.shape, s, p, dl, groups, False)
    y = conv2d_tracked(shadow, w, None, params, m, grad_output=x,
                       outputs=("grad_input",))["grad_input"]
    if bias is None:
        return y
    return _bias_as_term(ctx, y, bias, int(np.max(y.n)))


def _as_2d(t: Tracked) -> Tracked:
    return tmap_all(t, lambda a: a[:, :, None, :])


def _from_2d(t: Tracked) -> Tracked:
    return tmap_all(t, lambda a: a[:, :, 0, :])


def _conv_windows(ctx: RuleContext, x: Tracked, w: Tracked, bias: Tracked | None,
                  stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                  groups: int) -> Tracked:
    """A direct convolution of any dimension as one contraction per output element."""
    d = x.value.ndim - 2
    n, c = x.shape[:2]
    o = w.shape[0]
    g = groups
    cg, og = c // g, o // g
    win = Windows(x.shape, d, w.shape[2:], stride, padding, dilation, False)
    p_out, k = int(np.prod(win.out)), win.taps

    def columns(a: np.ndarray) -> np.ndarray:  # (G, Cg*K, N*P)
        cols = win.gather(a, 0.0).reshape(n, g, cg, p_out, k)
        return cols.transpose(1, 2, 4, 0, 3).reshape(g, cg * k, n * p_out)
    cols = tmap_all(folded(x), columns)
    wmat = tmap_all(folded(w), lambda a: a.reshape(g, og, cg * k))
    b = None if bias is None else tmap_all(folded(bias), lambda a: a.reshape(g, og, 1))
    y = matmul(wmat, cols, ctx.model, bias=b)  # (G, Og, N*P)
    return tmap_all(y, lambda a: a.reshape(g, og, n, *win.out).swapaxes(0, 2).swapaxes(1, 2)
                    .reshape(n, o, *win.out))


def _conv_transposed_windows(ctx: RuleContext, x: Tracked, w: Tracked, bias: Tracked | None,
                             stride: Sequence[int], padding: Sequence[int],
                             dilation: Sequence[int], output_padding: Sequence[int],
                             groups: int) -> Tracked:
    """A transposed convolution of any dimension: zeros inserted and put around the
    input, convolved with the flipped kernel (channels swapped per group)."""
    d = x.value.ndim - 2
    s, p, dl, op = (_ints(v, d) for v in (stride, padding, dilation, output_padding))
    k = w.shape[2:]
    up = tuple((x.shape[2 + i] - 1) * s[i] + 1 for i in range(d))
    lo = [dl[i] * (k[i] - 1) - p[i] for i in range(d)]
    hi = [dl[i] * (k[i] - 1) - p[i] + op[i] for i in range(d)]

    def spread(a: np.ndarray) -> np.ndarray:
        out = array_module(a).zeros(a.shape[:2] + up)  # (where a is)
        out[(slice(None), slice(None), *(slice(None, None, s[i]) for i in range(d)))] = a
        crop = tuple(slice(max(-lo[i], 0), up[i] - max(-hi[i], 0)) for i in range(d))
        out = out[(slice(None), slice(None), *crop)]
        return np.pad(out, [(0, 0), (0, 0)] + [(max(lo[i], 0), max(hi[i], 0)) for i in range(d)])
    xs = tmap_all(folded(x), spread)
    cin, coutg = w.shape[0], w.shape[1]
    cing = cin // groups

    def flip(a: np.ndarray) -> np.ndarray:
        a = a.reshape(groups, cing, coutg, *k).swapaxes(1, 2)
        # (a reversed view on NumPy; torch's arrays take no negative step: a copy)
        a = array_module(a).flip(a, axis=tuple(range(-d, 0)))
        return a.reshape(groups * coutg, cing, *k)
    wf = tmap_all(folded(w), flip)
    y = _conv_windows(ctx, xs, wf, None, (1,) * d, (0,) * d, dl, groups)
    if bias is None:
        return y
    return _bias_as_term(ctx, y, bias, int(np.max(y.n)))


def convolution(ctx: RuleContext, x: Tracked, w: Tracked, bias: Tracked | None, stride: Any,
                padding: Any, dilation: Any, transposed: bool, output_padding: Any,
                groups: int) -> Tracked:
    """``aten.convolution`` (see the module docstring)."""
    d = x.value.ndim - 2
    if d == 2:
        return _conv2d(ctx, x, w, bias, stride, padding, dilation, transposed, output_padding,
                       groups)
    if d == 1:
        ones = (lambda v: (1, *_ints(v, 1)))  # noqa: E731
        zeros = (lambda v: (0, *_ints(v, 1)))  # noqa: E731
        y = _conv2d(ctx, _as_2d(x), _as_2d(w), bias, ones(stride), zeros(padding),
                    ones(dilation), transposed, zeros(output_padding), groups)
        return _from_2d(y)
    if d == 3:
        if transposed:
            return _conv_transposed_windows(ctx, x, w, bias, stride, padding, dilation,
                                            output_padding, groups)
        return _conv_windows(ctx, x, w, bias, _ints(stride, 3), _ints(padding, 3),
                             _ints(dilation, 3), groups)
    raise NoRule(f"no rule for aten.convolution with {d} spatial dimensions: rules exist for "
                 "1, 2 and 3")


@rule("aten.convolution.default")
def convolution_rule(ctx: RuleContext, x: Any, w: Any, bias: Any, stride: Any, padding: Any,
                     dilation: Any, transposed: bool, output_padding: Any,
                     groups: int) -> Tracked:
    m = ctx.model
    xt, wt = as_tracked(x, m), as_tracked(w, m)
    b = None if bias is None else as_tracked(bias, m)
    if ctx.stores_per_op() and (b is not None or transposed):
        y = convolution(ctx, xt, wt, None, stride, padding, dilation, transposed,
                        output_padding, groups)
        if transposed:
            y = scattered(ctx, y, int(np.prod(wt.shape[2:])))
        if b is None:
            return y
        y = ctx.kept(y)  # eager adds the bias as an op of its own
        return _bias_as_term(ctx, y, b, int(np.max(y.n)))
    return convolution(ctx, xt, wt, b, stride, padding, dilation, transposed, output_padding,
                       groups)


def _backward2d(ctx: RuleContext, g: Tracked, x: Tracked, w: Tracked, stride: Any,
                padding: Any, dilation: Any, transposed: bool, groups: int,
                mask: Sequence[bool]) -> list[Tracked | None]:
    m = ctx.model
    out: list[Tracked | None] = [None, None, None]
    if not transposed:
        params = _params(x.shape, w.shape, stride, padding, dilation, groups, False)
        want = tuple(name for name, on in zip(("grad_input", "grad_weight"), mask[:2],
                                              strict=True) if on)
        if want:
            res = conv2d_tracked(x, w, None, params, m, grad_output=g, outputs=want)
            out[0], out[1] = res.get("grad_input"), res.get("grad_weight")
    else:  # y = conv_transpose(x, w): x's gradient is conv(g, w), w's the swapped roles'
        params = _params(g.shape, w.shape, stride, padding, dilation, groups, False)
        if mask[0]:
            out[0] = conv2d_tracked(g, w, None, params, m, outputs=("y",))["y"]
        if mask[1]:
            out[1] = conv2d_tracked(g, w, None, params, m, grad_output=x,
                                    outputs=("grad_weight",))["grad_weight"]
    if mask[2]:
        gb = tmap_all(g, lambda a: np.moveaxis(a, 1, 0).reshape(a.shape[1], -1))
        out[2] = sum_(gb, axis=1, model=m)
    return out


@rule("aten.convolution_backward.default")
def convolution_backward_rule(ctx: RuleContext, grad: Any, x: Any, w: Any, bias_sizes: Any,
                              stride: Any, padding: Any, dilation: Any, transposed: bool,
                              output_padding: Any, groups: int, output_mask: Sequence[bool]
                              ) -> tuple[Tracked | None, ...]:
    m = ctx.model
    g, xt, wt = (folded(as_tracked(a, m)) for a in (grad, x, w))
    d = xt.value.ndim - 2
    if d == 2:
        res = _backward2d(ctx, g, xt, wt, stride, padding, dilation, transposed, groups,
                          output_mask)
    elif d == 1:
        ones = (1, *_ints(stride, 1)), (0, *_ints(padding, 1)), (1, *_ints(dilation, 1))
        res = _backward2d(ctx, _as_2d(g), _as_2d(xt), _as_2d(wt), *ones, transposed, groups,
                          output_mask)
        res = [r if r is None or i == 2 else _from_2d(r) for i, r in enumerate(res)]
    elif d == 3:
        res = _backward_windows(ctx, g, xt, wt, stride, padding, dilation, transposed,
                                groups, output_mask)
    else:
        raise NoRule(f"no rule for aten.convolution_backward with {d} spatial dimensions: "
                     "rules exist for 1, 2 and 3")
    if res[0] is not None and not transposed:  # the input gradient is a transposed conv
        res[0] = scattered(ctx, res[0], int(np.prod(wt.shape[2:])))
    if res[1] is not None:
        res[1] = scattered(ctx, res[1], int(xt.shape[0]))
    return tuple(res)


def _grad_weight_windows(ctx: RuleContext, x: Tracked, g: Tracked, k: Sequence[int],
                         stride: Sequence[int], padding: Sequence[int],
                         dilation: Sequence[int], groups: int) -> Tracked:
    """The weight gradient of the direct convolution of ``x`` whose upstream
    gradient is ``g``: per weight element, one contraction over samples and output
    positions of the taps it read."""
    d = x.value.ndim - 2
    n, c = x.shape[:2]
    o = g.shape[1]
    cg, og = c // groups, o // groups
    win = Windows(x.shape, d, k, stride, padding, dilation, False)
    p_out, taps = int(np.prod(win.out)), win.taps

    def columns(a: np.ndarray) -> np.ndarray:  # (G, Cg*K, N*P)
        cols = win.gather(a, 0.0).reshape(n, groups, cg, p_out, taps)
        return cols.transpose(1, 2, 4, 0, 3).reshape(groups, cg * taps, n * p_out)

    def rows(a: np.ndarray) -> np.ndarray:  # (G, N*P, Og)
        return a.reshape(n, groups, og, p_out).transpose(1, 0, 3, 2).reshape(
            groups, n * p_out, og)
    gw = matmul(tmap_all(x, columns), tmap_all(g, rows), ctx.model)  # (G, Cg*K, Og)
    return tmap_all(gw, lambda a: a.reshape(groups, cg, taps, og).transpose(0, 3, 1, 2)
                    .reshape(o, cg, *k))


def _backward_windows(ctx: RuleContext, g: Tracked, x: Tracked, w: Tracked, stride: Any,
                      padding: Any, dilation: Any, transposed: bool, groups: int,
                      mask: Sequence[bool]) -> list[Tracked | None]:
    """The backward of a convolution of any dimension through explicit contractions:
    a direct convolution's input gradient is the transposed convolution of ``g``
    (its output padding fitting ``x``), a transposed one's the direct convolution of
    ``g``; the weight gradient pairs the windows of the direct convolution's input
    with its upstream gradient (``x`` and ``g``, or ``g`` and ``x`` when transposed)."""
    d = x.value.ndim - 2
    s, p, dl = _ints(stride, d), _ints(padding, d), _ints(dilation, d)
    k = w.shape[2:]
    out: list[Tracked | None] = [None, None, None]
    if mask[0]:
        if transposed:
            out[0] = _conv_windows(ctx, g, w, None, s, p, dl, groups)
        else:
            op = tuple(x.shape[2 + i] - ((g.shape[2 + i] - 1) * s[i] - 2 * p[i]
                                         + dl[i] * (k[i] - 1) + 1) for i in range(d))
            out[0] = _conv_transposed_windows(ctx, g, w, None, s, p, dl, op, groups)
    if mask[1]:
        src, up = (g, x) if transposed else (x, g)
        out[1] = _grad_weight_windows(ctx, src, up, k, s, p, dl, groups)
    if mask[2]:
        gb = tmap_all(g, lambda a: np.moveaxis(a, 1, 0).reshape(a.shape[1], -1))
        out[2] = sum_(gb, axis=1, model=ctx.model)
    return out
