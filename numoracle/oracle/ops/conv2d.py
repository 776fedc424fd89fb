"""``conv2d``: 2-D cross-correlation (torch's ``F.conv2d``) and its gradients.

Inputs ``x`` (N, C, H, W), ``weight`` (O, C/groups, kH, kW), ``bias`` (O,)
when ``bias=True``, and ``grad_output`` (N, O, Ho, Wo) for the backward
outputs, with ``Ho = (H + 2 ph - dh (kH - 1) - 1) // sh + 1`` (``Wo`` alike).
Outputs ``y`` (N, O, Ho, Wo), ``grad_input`` (N, C, H, W), ``grad_weight``
(O, C/groups, kH, kW) and ``grad_bias`` (O,).

Every output is one contraction per element over im2col views (per group),
computed by :func:`~numoracle.oracle.tracked.matmul`, so each gets the bound of
its own reduction. The views are strided windows copied once into contraction
columns, a block of samples (``y``, ``grad_input``) or of input channels
(``grad_weight``) at a time, so that the reference of a real layer never holds
the ``kH * kW``-fold im2col of the whole batch:

* ``y``: ``C/groups * kH * kW`` terms (+1 with the bias); padding taps count
  as terms (a kernel may add their zeros);
* ``grad_input``: the taps that really reach the element (stride, padding and
  dilation aware), times ``O/groups``: the zeros a transposed convolution
  inserts between and around ``grad_output`` are structural, add nothing and
  are not terms;
* ``grad_weight`` and ``grad_bias``: ``N * Ho * Wo`` terms.

Where a structural zero (padding, inserted zero) meets an infinite partner,
a kernel may produce NaN (it multiplied the zero) or the infinite result (it
skipped it): such elements are left unjudged.

Targets are called with ``params`` (the case's validated parameters: pairs
as tuples) besides the inputs. Axes are named (``input_axes``,
``output_axes``): activations ``NCHW``, weights ``OIHW``, so a target may
take and return ``NHWC`` / ``HWIO`` arrays (see :mod:`numoracle.cases.layouts`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np

from ...errors import InvalidArgument
from ..precision import PrecisionModel
from ..tracked import (
    Tracked,
    add,
    any_nonzero,
    concat,
    exact,
    folded,
    matmul,
    store,
    sum_,
    tmap,
    unjudged,
)
from ..transforms import widen_conv2d
from ..xp import array_module as _xp
from ..xp import filled, like
from .base import Op, Product, check_positive_int, with_bias_gradient
from .plan import Choice, Derived, Dim, Flag, Multiple
from .plan import Pair as IntPair

__all__ = ["Conv2d", "conv2d_tracked", "conv_output_size", "tap_counts"]

def _kernel_cap(params: Mapping[str, Any], axis: int) -> int:
    """Largest kernel extent whose dilated window fits the padded input."""
    size = params["height" if axis == 0 else "width"]
    p, d = params["padding"][axis], params["dilation"][axis]
    return (size + 2 * p - 1) // d + 1


MAX_DIM = 1 << 16
Pair = tuple[int, int]


def conv_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """Output length of one spatial axis (may be < 1 for invalid parameters)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _taps(size: int, out: int, kernel: int, stride: int, padding: int,
          dilation: int) -> tuple[np.ndarray, np.ndarray]:
    """For each input position and kernel tap: the output position it feeds
    (0 where none) and whether it feeds one, shapes ``(size, kernel)``."""
    pos = np.arange(size)[:, None] + padding - np.arange(kernel)[None, :] * dilation
    valid = (pos >= 0) & (pos % stride == 0) & (pos // stride < out)
    return np.where(valid, pos // stride, 0), valid


def tap_counts(size: int, kernel: int, stride: int, padding: int, dilation: int) -> np.ndarray:
    """Number of kernel taps that connect each input position of one spatial
    axis to an output position (the per-axis factor of grad_input's terms)."""
    out = conv_output_size(size, kernel, stride, padding, dilation)
    return _taps(size, out, kernel, stride, padding, dilation)[1].sum(axis=1)


def _pair(name: str, value: Any, *, minimum: int) -> Pair:
    vals = (value, value) if isinstance(value, (int, np.integer)) and not isinstance(
        value, bool) else value
    if not isinstance(vals, (tuple, list)) or len(vals) != 2 or any(
            isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum
            or v > MAX_DIM for v in vals):
        what = "positive" if minimum > 0 else "non-negative"
        raise InvalidArgument(
            f"{name}={value!r} must be a {what} int or a pair of {what} ints (at most "
            f"{MAX_DIM}), e.g. {name}={max(minimum, 1)} or {name}=({max(minimum, 1)}, "
            f"{max(minimum, 1)})"
        )
    return int(vals[0]), int(vals[1])


class Conv2d(Op):
    name = "conv2d"
    # groups first, channels as multiples of it (in_channels == groups: depthwise);
    # spatial sizes before the kernel, which must fit the padded input
    plan = (Flag("bias"), Dim("batch", 8, is_batch=True), Dim("groups", 16),
            Multiple("in_channels", "groups", 16), Multiple("out_channels", "groups", 16),
            Dim("height", 32), Dim("width", 32), IntPair("padding", 0, 2),
            IntPair("dilation", 1, 2), IntPair("kernel_size", 1, 5, _kernel_cap),
            IntPair("stride", 1, 3))
    #: the layers of real CNNs (ResNet, VGG, UNet): square maps 7-224, channels
    #: 3-512, kernels 1/3/5/7 with "same" padding, stride 1 or 2, batch 1-128
    realistic_plan = (Flag("bias"), Dim("batch", 128, is_batch=True), Choice("groups", (1,)),
                      Choice("in_channels", (3, 16, 32, 64, 128, 256, 512)),
                      Choice("out_channels", (16, 32, 64, 128, 256, 512)),
                      Choice("height", (7, 14, 28, 56, 112, 224)),
                      Derived("width", lambda p: p["height"]),
                      Choice("kernel_size", ((1, 1), (3, 3), (5, 5), (7, 7))),
                      Derived("padding", lambda p: (p["kernel_size"][0] // 2,) * 2),
                      Choice("dilation", ((1, 1),)), Choice("stride", ((1, 1), (2, 2))))
    param_names = ("batch", "in_channels", "out_channels", "height", "width", "kernel_size",
                   "stride", "padding", "dilation", "groups", "bias")
    input_axes = MappingProxyType({"x": "NCHW", "weight": "OIHW", "grad_output": "NCHW"})
    output_axes = MappingProxyType({"y": "NCHW", "grad_input": "NCHW", "grad_weight": "OIHW"})
    passes_params = True
    parameters = ("weight", "bias")

    def validate(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self._reject_unknown(params)
        out: dict[str, Any] = {k: check_positive_int(k, params.get(k), upper=MAX_DIM)
                               for k in ("batch", "in_channels", "out_channels", "height",
                                         "width")}
        out["kernel_size"] = _pair("kernel_size", params.get("kernel_size"), minimum=1)
        out["stride"] = _pair("stride", params.get("stride", 1), minimum=1)
        out["padding"] = _pair("padding", params.get("padding", 0), minimum=0)
        out["dilation"] = _pair("dilation", params.get("dilation", 1), minimum=1)
        groups = check_positive_int("groups", params.get("groups", 1), upper=MAX_DIM)
        for name in ("in_channels", "out_channels"):
            if out[name] % groups:
                raise InvalidArgument(
                    f"{name}={out[name]} must be divisible by groups={groups}; use groups "
                    f"that divide both channel counts (groups=in_channels=out_channels/k "
                    "for a depthwise convolution)"
                )
        out["groups"] = groups
        for axis, size in (("height", out["height"]), ("width", out["width"])):
            i = 0 if axis == "height" else 1
            k, s, p, d = (out[n][i] for n in ("kernel_size", "stride", "padding", "dilation"))
            if conv_output_size(size, k, s, p, d) < 1:
                raise InvalidArgument(
                    f"conv2d: {axis}={size} padded to {size + 2 * p} is smaller than the "
                    f"dilated kernel {d * (k - 1) + 1} (kernel_size={k}, dilation={d}): the "
                    f"output would be empty; use a larger {axis}, more padding, or a smaller "
                    "kernel or dilation"
                )
        bias = params.get("bias", True)
        if not isinstance(bias, (bool, np.bool_)):
            raise InvalidArgument(f"{bias=} must be True or False")
        out["bias"] = bool(bias)
        return out

    # -- shapes ------------------------------------------------------------
    @staticmethod
    def _out_hw(params: Mapping[str, Any]) -> Pair:
        ks, st, pd, dl = (params[n] for n in ("kernel_size", "stride", "padding", "dilation"))
        return (conv_output_size(params["height"], ks[0], st[0], pd[0], dl[0]),
                conv_output_size(params["width"], ks[1], st[1], pd[1], dl[1]))

    def input_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        n, c, o, g = (params[k] for k in ("batch", "in_channels", "out_channels", "groups"))
        kh, kw = params["kernel_size"]
        ho, wo = self._out_hw(params)
        shapes: dict[str, tuple[int, ...]] = {
            "x": (n, c, params["height"], params["width"]), "weight": (o, c // g, kh, kw),
            "grad_output": (n, o, ho, wo)}
        if params["bias"]:
            shapes["bias"] = (o,)
        return shapes

    def outputs(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        return with_bias_gradient(params)

    def output_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        ins = self.input_shapes(params)
        shapes = {"y": ins["grad_output"], "grad_input": ins["x"], "grad_weight": ins["weight"]}
        if params["bias"]:
            shapes["grad_bias"] = (params["out_channels"],)
        return shapes

    def grad_input_terms(self, params: Mapping[str, Any]) -> np.ndarray:
        """Terms of each grad_input element, shape ``(H, W)`` (the same for every
        sample and channel): contributing taps times ``out_channels / groups``."""
        ks, st, pd, dl = (params[n] for n in ("kernel_size", "stride", "padding", "dilation"))
        th = tap_counts(params["height"], ks[0], st[0], pd[0], dl[0])
        tw = tap_counts(params["width"], ks[1], st[1], pd[1], dl[1])
        return (params["out_channels"] // params["groups"]) * th[:, None] * tw[None, :]

    def reductions(self, params: Mapping[str, Any]) -> dict[str, int]:
        kh, kw = params["kernel_size"]
        ho, wo = self._out_hw(params)
        cg = params["in_channels"] // params["groups"]
        r = {"y": cg * kh * kw + int(params["bias"]),
             "grad_input": int(self.grad_input_terms(params).max()),
             "grad_weight": params["batch"] * ho * wo}
        if params["bias"]:
            r["grad_bias"] = params["batch"] * ho * wo
        return r

    def products(self, params: Mapping[str, Any]) -> tuple[Product, ...]:
        r = self.reductions(params)
        return (Product("x", "weight", r["y"]), Product("grad_output", "weight", r["grad_input"]),
                Product("grad_output", "x", r["grad_weight"]))

    # -- reference ----------------------------------------------------------
    def reference(
        self,
        inputs: Mapping[str, np.ndarray],
        params: Mapping[str, Any],
        model: PrecisionModel,
        outputs: tuple[str, ...] = (),
    ) -> dict[str, Tracked]:
        self._check_inputs(inputs, params)
        want = outputs or self.outputs(params)
        x = inputs["x"]
        xp = _xp(x)

        def ex(a: Any) -> Tracked:
            return exact(xp.asarray(a, dtype=xp.float64))

        bias = ex(inputs["bias"]) if params["bias"] else None
        return conv2d_tracked(ex(x), ex(inputs["weight"]), bias, params, model,
                              grad_output=ex(inputs["grad_output"]), outputs=want)


def conv2d_tracked(
    x: Tracked,
    weight: Tracked,
    bias: Tracked | None,
    params: Mapping[str, Any],
    model: PrecisionModel,
    *,
    grad_output: Tracked | None = None,
    outputs: tuple[str, ...] = ("y",),
) -> dict[str, Tracked]:
    """The conv2d reference on tracked operands, so that radii flow through.

    Parameters
    ----------
    x, weight, bias : Tracked
        ``(N, C, H, W)``, ``(O, C/groups, kH, kW)`` and ``(O,)`` (``bias`` None
        for none); exact (:func:`~numoracle.oracle.tracked.exact`) or carrying
        radii from an earlier computation (a loss gradient, say).
    params : mapping
        Validated :class:`Conv2d` parameters (``stride``, ``padding``,
        ``dilation`` and ``groups`` are read).
    model : PrecisionModel
        The kernel's precision model.
    grad_output : Tracked, optional
        ``(N, O, Ho, Wo)``; needed for ``grad_input``, ``grad_weight`` and ``grad_bias``.
    outputs : tuple of str
        Which of ``y``, ``grad_input``, ``grad_weight``, ``grad_bias`` to compute.

    Returns
    -------
    dict of str to Tracked
        Each output rounded to the storage format
        (:func:`~numoracle.oracle.tracked.store`). Every element is one
        :func:`~numoracle.oracle.tracked.matmul` contraction (the bound of the
        module docstring), whose propagated term ``|a| r_b + r_a |b| + r_a r_b``
        carries the operands' radii. Where the model allows a transform
        algorithm, the radius is at least its bound
        (:func:`~numoracle.oracle.transforms.widen_conv2d`; added to the
        summation's radius where the operands carry radii of their own).
    """
    want = outputs
    x, weight = folded(x), folded(weight)
    xp = _xp(x.value)
    n, c, h, wd = x.shape
    o, cg, kh, kw = weight.shape
    grp = params["groups"]
    og = o // grp
    ho, wo = Conv2d._out_hw({**params, "height": h, "width": wd})
    (sh, sw), (ph, pw), (dh, dw) = params["stride"], params["padding"], params["dilation"]
    needs_g = [k for k in want if k != "y"]
    if needs_g and grad_output is None:
        raise InvalidArgument(f"conv2d_tracked: outputs {needs_g} need grad_output; give the "
                              f"upstream gradient of shape {(n, o, ho, wo)}")
    g = folded(grad_output) if grad_output is not None else None
    res: dict[str, Tracked] = {}

    x_exact, g_exact = _is_exact(x), g is None or _is_exact(g)
    pad_mask: Any = None
    xpad: Any = None  # x with its padding, for y and grad_weight
    if "y" in want or "grad_weight" in want:
        # padded-x index of each output position and tap, per axis
        rows = (np.arange(ho) * sh)[:, None] + (np.arange(kh) * dh)[None, :]  # (Ho, kH)
        cidx = (np.arange(wo) * sw)[:, None] + (np.arange(kw) * dw)[None, :]  # (Wo, kW)
        ri, ci = rows[:, None, :, None], cidx[None, :, None, :]
        inside = np.zeros((h + 2 * ph, wd + 2 * pw), dtype=bool)
        inside[ph:ph + h, pw:pw + wd] = True
        pad = ~inside[ri, ci]  # (Ho, Wo, kH, kW): taps that read padding
        pad_mask = pad if bool(pad.any()) else None
        xpad = _map(x, lambda v: xp.pad(v, ((0, 0), (0, 0), (ph, ph), (pw, pw))), x_exact)

    x_cols = None  # y's im2col of the whole batch, when one block held it: grad_weight's too
    if "y" in want:
        # im2col of the padded x, (G, C/G*kH*kW, N*Ho*Wo), a block of samples at a time;
        # y comes out as (G, O/G, N*Ho*Wo)
        def im2col(v: Any) -> Any:
            return _group_columns(_windows(v, (0, 0), (sh, sw), (dh, dw), (ho, wo), (kh, kw)),
                                  grp)  # (G, C/G*kH*kW, n*Ho*Wo)
        wmat = _map(weight, lambda v: v.reshape(grp, og, cg * kh * kw))
        b = None
        if bias is not None:
            b = _map(folded(bias), lambda v: v.reshape(grp, og, 1))
        pad_inf = None  # per position of one sample: a padding tap meets an infinite weight
        if pad_mask is not None and bool(xp.isinf(wmat.value).any()):
            za = _structural_columns(pad_mask, cg, wmat.value)  # (1, C/G*kH*kW, Ho*Wo)
            pad_inf = (xp.isinf(wmat.value) * 1.0) @ za > 0
        blocks = []
        y_blocks = _sample_blocks(n, c * ho * wo * kh * kw, xp)
        for n0, n1 in y_blocks:
            cols = _map(xpad, _on_samples(im2col, n0, n1), x_exact)
            if b is not None and model.bias_after_store:
                t = store(add(matmul(wmat, cols, model, stored=True), b, model), model)
            else:
                t = matmul(wmat, cols, model, bias=b, stored=True)
            if pad_inf is not None:
                t = unjudged(t, xp.tile(pad_inf, (1, 1, n1 - n0)))
            blocks.append(_rearrange(t, partial(_ungroup, shape=(n1 - n0, o, ho, wo), grp=grp)))
            if len(y_blocks) == 1:
                x_cols = cols
        res["y"] = concat(blocks, axis=0)

    if "grad_input" in want:
        assert g is not None
        _, vh = _taps(h, ho, kh, sh, ph, dh)
        _, vw = _taps(wd, wo, kw, sw, pw, dw)
        valid = vh[:, None, :, None] & vw[None, :, None, :]  # (H, W, kH, kW)
        # grad_output with the transposed convolution's zeros put in: (s - 1) between
        # neighbours, and around it what the taps reach past either end
        span_h, span_w = sh * (ho - 1) + 1, sw * (wo - 1) + 1
        lh, lw = max(0, dh * (kh - 1) - ph), max(0, dw * (kw - 1) - pw)
        rh, rw = max(0, h + ph - span_h), max(0, wd + pw - span_w)

        def gather(v: Any) -> Any:
            nb = v.shape[0]
            # (made where v is: v's namespace, on its device)
            dil = filled(_xp(v), (nb, o, lh + span_h + rh, lw + span_w + rw), 0.0, like=v)
            dil[:, :, lh:lh + span_h:sh, lw:lw + span_w:sw] = v  # inserted zeros: exact 0
            # tap (i, j) reads dil[hi + ph + lh - i dh]: from the last tap up, then reversed
            win = xp.flip(_windows(dil, (ph + lh - (kh - 1) * dh, pw + lw - (kw - 1) * dw),
                                   (1, 1), (dh, dw), (h, wd), (kh, kw)), axis=(-2, -1))
            return _group_columns(win, grp)  # (G, O/G*kH*kW, n*H*W)
        wmat = _map(weight, lambda v: v.reshape(grp, og, cg, kh, kw)
                    .transpose(0, 2, 1, 3, 4).reshape(grp, cg, og * kh * kw))
        terms1 = Conv2d().grad_input_terms({**params, "height": h, "width": wd,
                                            "out_channels": o})  # (H, W)
        zero_inf = None  # per position of one sample: an inserted zero meets an infinite weight
        if not bool(valid.all()) and bool(xp.isinf(wmat.value).any()):
            z = _structural_columns(~valid, og, wmat.value)  # (1, O/G*kH*kW, H*W)
            zero_inf = (xp.isinf(wmat.value) * 1.0) @ z > 0
        blocks = []
        for n0, n1 in _sample_blocks(n, o * h * wd * kh * kw, xp):
            a = _map(g, _on_samples(gather, n0, n1), g_exact)
            terms = np.broadcast_to(terms1[None], (n1 - n0, h, wd)).reshape(1, 1, -1)
            t = matmul(wmat, a, model, terms=terms, stored=True)  # (G, C/G, n*H*W)
            if zero_inf is not None:
                t = unjudged(t, xp.tile(zero_inf, (1, 1, n1 - n0)))
            blocks.append(_rearrange(t, partial(_ungroup, shape=(n1 - n0, c, h, wd), grp=grp)))
        res["grad_input"] = concat(blocks, axis=0)

    if "grad_weight" in want:
        # the strided views of the padded x that the taps read against grad_output, as
        # many input channels (all their taps) at once as fit a block
        # ((G, C/G*kH*kW, N*Ho*Wo) @ (G, N*Ho*Wo, O/G), a block of C/G at a time)
        assert g is not None
        gmat = _map(g, lambda v: v.reshape(n, grp, og, ho * wo).transpose(1, 0, 3, 2)
                    .reshape(grp, n * ho * wo, og), g_exact)
        inf_g = xp.isinf(gmat.value) if pad_mask is not None else None

        def tap_columns(v: Any, c0: int, c1: int) -> Any:  # channels c0..c1-1 of each group
            hw = v.shape[2:]
            part = v.reshape(n, grp, cg, *hw)[:, :, c0:c1].reshape(n, grp * (c1 - c0), *hw)
            win = _windows(part, (0, 0), (sh, sw), (dh, dw), (ho, wo), (kh, kw))
            return _group_columns(win, grp)  # (G, (c1-c0)*kH*kW, N*Ho*Wo)
        bad = None  # per tap: a padding tap meets an infinite grad_output, (G, O/G, 1, kH*kW)
        if pad_mask is not None and inf_g is not None and bool(inf_g.any()):
            reads_pad = np.tile(pad_mask.reshape(ho * wo, kh * kw).T, (1, n)) * 1.0
            bad = (like(reads_pad, inf_g) @ (inf_g * 1.0) > 0).transpose(0, 2, 1)[:, :, None, :]
        per_block = []
        for c0, c1 in _sample_blocks(cg, grp * n * ho * wo * kh * kw, xp):  # channel blocks
            cols = x_cols if x_cols is not None and (c0, c1) == (0, cg) else _map(
                xpad, partial(tap_columns, c0=c0, c1=c1), x_exact)
            t = _rearrange(matmul(cols, gmat, model, stored=True),
                           partial(_split_taps, cg=c1 - c0))
            per_block.append(t if bad is None else unjudged(t, bad))
        res["grad_weight"] = _rearrange(concat(per_block, axis=2),  # (G, O/G, C/G, kH*kW)
                                        lambda v: v.reshape(o, cg, kh, kw))

    if "grad_bias" in want:
        assert g is not None
        gb = _map(g, lambda v: v.transpose(1, 0, 2, 3).reshape(o, n * ho * wo))
        res["grad_bias"] = store(sum_(gb, axis=1, model=model), model)
    # res holds each output rounded to its format (a contraction in its own pass)
    if not set(model.algorithms) - {"summation"}:
        return res
    # a transform algorithm (Winograd, FFT) the model allows widens the bound; its
    # bound is taken over the operands' magnitudes, radii included
    ops = {"x": x, "weight": weight} if g is None else {"x": x, "weight": weight,
                                                          "grad_output": g}
    radii = {k: _radius(t) for k, t in ops.items()}
    exact_operands = all(not bool((t.det != 0).any()) for t in ops.values())
    return widen_conv2d(res, {k: t.value for k, t in ops.items()}, params, model,
                        add=not exact_operands, radii=radii)


def _radius(t: Tracked) -> Any:
    """How far a kernel's own operand may be from ``t``'s value (None: exact)."""
    if _is_exact(t):
        return None
    return _xp(t.value).broadcast_to(t.det + t.ref_err, t.value.shape)




def _is_exact(t: Tracked) -> bool:
    """No radius at all: an exact operand (zero-stride radii are not scanned)."""
    return not (any_nonzero(t.det) or any_nonzero(t.prob) or any_nonzero(t.ref_err))


def _map(t: Tracked, fn: Callable[[Any], Any], is_exact: bool | None = None) -> Tracked:
    """``fn`` (a gather, pad, reshape: no arithmetic) applied to the value and
    radii of an operand; an exact operand stays exact without touching its zeros
    (``is_exact``: already known, so not checked again)."""
    if _is_exact(t) if is_exact is None else is_exact:
        return exact(fn(t.value))
    return tmap(t, fn)


#: elements of the contraction operands built at once on the host (the im2col
#: patches of a block of samples): bounds the reference's temporaries at real layer
#: sizes. 32 MiB of float64: glibc's largest mmap threshold, so that the blocks'
#: temporaries come back from the heap instead of fresh pages (larger blocks take
#: fresh pages for every block)
BLOCK_ELEMENTS = 1 << 22
#: the same on a GPU (CuPy): larger blocks, fewer launches and synchronisations
DEVICE_BLOCK_ELEMENTS = 1 << 26


def _on_samples(fn: Callable[[Any], Any], n0: int, n1: int) -> Callable[[Any], Any]:
    """``fn`` of samples ``[n0, n1)`` of an ``(N, ...)`` array."""
    return lambda v: fn(v[n0:n1])


def _ungroup(v: Any, shape: tuple[int, int, int, int], grp: int) -> Any:
    """Contraction results ``(G, C/G, n*P1*P2)`` back as ``(n, C, P1, P2)``."""
    nb, ch, p1, p2 = shape
    return v.reshape(grp, ch // grp, nb, p1, p2).transpose(2, 0, 1, 3, 4).reshape(shape)


def _sample_blocks(n: int, per_sample: int, xp: Any) -> list[tuple[int, int]]:
    """``[n0, n1)`` ranges of ``n`` samples (or kernel taps) whose rows hold about
    :data:`BLOCK_ELEMENTS` (:data:`DEVICE_BLOCK_ELEMENTS` on a GPU) elements, at
    least one sample each."""
    budget = BLOCK_ELEMENTS if xp is np else DEVICE_BLOCK_ELEMENTS
    step = max(1, budget // max(per_sample, 1))
    return [(i, min(n, i + step)) for i in range(0, n, step)]


def _windows(v: Any, start: Pair, step: Pair, tap_step: Pair, out: Pair, k: Pair) -> Any:
    """The view ``(n, C, out_h, out_w, k_h, k_w)`` of ``v`` (``(n, C, H', W')``,
    C-contiguous) whose element ``[.., p, q, i, j]`` is
    ``v[.., start_h + step_h p + tap_step_h i, start_w + step_w q + tap_step_w j]``:
    every kernel tap's strided window, no copy and no index arrays."""
    base = v[:, :, start[0]:, start[1]:]  # its first element is the windows' first
    s_n, s_c, s_h, s_w = base.strides
    shape = (v.shape[0], v.shape[1], out[0], out[1], k[0], k[1])
    strides = (s_n, s_c, step[0] * s_h, step[1] * s_w, tap_step[0] * s_h, tap_step[1] * s_w)
    return _xp(v).lib.stride_tricks.as_strided(base, shape=shape, strides=strides)


def _group_columns(win: Any, grp: int) -> Any:
    """Windows ``(n, G*cpg, P1, P2, T1, T2)`` as contraction columns
    ``(G, cpg*T1*T2, n*P1*P2)``, in one copy (whole rows of each window: the
    faster copy, and the faster GEMM, than positions as rows)."""
    n, ch, p1, p2, t1, t2 = win.shape
    w = win.reshape(n, grp, ch // grp, p1, p2, t1, t2).transpose(1, 2, 5, 6, 0, 3, 4)
    return _xp(win).ascontiguousarray(w).reshape(grp, ch // grp * t1 * t2, n * p1 * p2)


def _split_taps(v: Any, cg: int) -> Any:
    """``(G, C/G*t, O/G)`` grad_weight columns as ``(G, O/G, C/G, t)``."""
    return v.transpose(0, 2, 1).reshape(v.shape[0], v.shape[2], cg, -1)


def _structural_columns(mask: np.ndarray, cpg: int, ref: Any) -> Any:
    """A mask of structural zeros per position and tap, ``(P1, P2, kH, kW)`` (made
    of the shapes alone, on the host), as the matching 1.0 entries of one sample's
    contraction columns of :func:`_group_columns`, ``(1, cpg*kH*kW, P1*P2)``: the
    same for every sample and channel; an array of ``ref``'s namespace, on its
    device."""
    p1, p2, kh, kw = mask.shape
    m = np.broadcast_to(mask.reshape(p1 * p2, kh * kw).T[None], (cpg, kh * kw, p1 * p2))
    return like(m.reshape(1, cpg * kh * kw, p1 * p2) * 1.0, ref)


def _rearrange(t: Tracked, fn: Callable[[Any], Any]) -> Tracked:
    """``fn`` (a reshape / transpose) applied to every array of ``t``."""
    n = fn(np.broadcast_to(t.n, t.value.shape)) if np.ndim(t.n) else t.n
    return replace(t, value=fn(t.value), ref_err=fn(t.ref_err), det=fn(t.det), prob=fn(t.prob),
                   mag=fn(t.mag), lo=None if t.lo is None else fn(t.lo), n=n)
