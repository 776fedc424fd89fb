"""Bounds of convolution algorithms that are not summations: Winograd and FFT.

Libraries change algorithms with the problem size: cuDNN's engines include
implicit GEMM (a summation: the componentwise bound of
:func:`~numoracle.oracle.tracked.matmul` holds), Winograd ``F(m×m, r×r)`` and FFT
variants. A transform algorithm rounds in its transforms, so it keeps neither
the exact regime nor the componentwise ``γ_h(u)·S`` bound of a summation. A
precision model names the algorithm classes a kernel may use
(:attr:`~numoracle.oracle.precision.PrecisionModel.algorithms`); the conv2d
reference takes, per element, the largest of the bounds of the classes named
(:func:`widen_conv2d`), so a result is judged against what the library may
legitimately do.

Winograd (componentwise)
    A tile is ``Y = Aᵀ [Σ_c (G g_c Gᵀ) ⊙ (Bᵀ d_c B)] A`` (Lavin & Gray, "Fast
    Algorithms for Convolutional Neural Networks", CVPR 2016). The matrices are
    built here by the Toom–Cook construction in exact rational arithmetic
    (points 0, ±1, ±2, ±1/2, … and ∞; :func:`winograd_matrices`) and checked to
    compute the correlation exactly. Every stage is a product of small matrices,
    so the standard forward error bound of matrix products (Higham, *Accuracy
    and Stability of Numerical Algorithms*, 2nd ed., §3.5) composes to the
    componentwise bound

    ``|Ŷ − Y| ≤ ((1 + γ_h(u))(1 + u_in)² − 1) · |Aᵀ| [Σ_c (|G||g_c||Gᵀ|) ⊙ (|Bᵀ||d_c||B|)] |A|``

    with ``h = (2r + c_G) + (2α + c_B) + 1 + h_C + (2α + c_A)`` (``α = m + r − 1``;
    ``c_X = 2`` where a transform matrix has entries the arithmetic cannot hold
    exactly, as ``1/6`` of ``F(4, 3)``, else 0; ``h_C`` the height of the
    channel sum under the model's order) and ``u`` the unit roundoff of the
    coarser of the compute and accumulation formats (transforms may run in
    either). The magnitude grows quickly with the tile size ``m`` through the
    entries of ``A``, ``B`` and ``G``, as the published analyses find (Barabasz,
    Anderson, Soodhalter & Gregg, "Error analysis and improving the accuracy of
    Winograd convolution for deep neural networks", ACM TOMS 2020). Variants
    considered: ``F(2, 3)``, ``F(4, 3)``, ``F(6, 3)`` for 3×3 kernels and
    ``F(2, 5)``, ``F(4, 5)`` for 5×5, stride 1 and dilation 1 only (cuDNN's
    Winograd engines need them); the bound is the largest over the variants and
    over the orientations a kernel may tile in (along each axis, the transform of
    the reversed tile: it puts ``Aᵀ``'s large rows at the other end of the tile; a
    cuDNN filter gradient on an H100 was 0.96 of the bound of one orientation at a
    tile's corner, 0.30 of all four's).
    The filter gradient ``Σ_n x_nc ⋆ g_no`` is, tile by tile of ``g``, the same
    construction with the kernel as the output and the tile as the filter,
    ``F(k, r)``, the batch and the tiles summed as the channels are (cuDNN's
    nonfused Winograd wgrad ran ``F(5, 5)`` on 9×9 tiles for a 5×5 kernel on an
    H100, TF32 off and deterministic: ``benchmarks/results/h100/session5/``).

FFT (normwise)
    An output plane is ``z = Σ_j a_j ⋆ b_j`` (a correlation per channel pair),
    computed as ``F⁻¹(Σ_j F(a_j) ⊙ conj F(b_j))``. With Higham's bound for the
    radix-2 FFT (ASNA Thm 24.2: ``‖ŷ − y‖₂ ≤ ε ‖y‖₂``, ``ε = L η / (1 − L η)``,
    ``L = log₂ N``, ``η = μ + γ₄(√2 + μ)``, ``μ ≤ u`` the accuracy of the
    twiddle factors), ``‖F v‖₂ = √N ‖v‖₂``, ``‖F v‖_∞ ≤ ‖v‖₁`` and a complex
    product's error ``√2 γ₂``, the error of each pair is at most

    ``(1 + ε)[ε‖a‖₂‖b‖₁ + ε‖a‖₁‖b‖₂ + ε²√N‖a‖₂‖b‖₂ + √2γ₂(‖a‖₁ + ε√N‖a‖₂)(1 + ε)‖b‖₂] + ε‖a‖₁‖b‖₂``

    in the 2-norm of the plane, and the channel sum in the frequency domain
    adds ``(1 + ε)² γ_{h_C} Σ_j (‖a_j‖₁ + ε√N‖a_j‖₂)‖b_j‖₂``. The 2-norm bounds
    every element, so every element of a plane gets the plane's bound. ``N`` is
    the padded plane plus the dilated kernel's extent, rounded up to powers of
    two per axis (tiled FFTs use smaller ``N`` and stay inside). Its
    intermediates are at most ``N Σ_j ‖F(a_j)‖_∞ ‖b_j‖₁`` (an unnormalised inverse
    transform sums ``N`` spectral terms); where that may exceed the compute or
    accumulation format's range, an FFT may overflow where the result does not
    (cuDNN's FFT engine gave Inf for a finite fp32 output on an H200:
    ``benchmarks/results/findings/cudnn-fft-overflow/``), and the element is not
    judged under a model that allows an FFT. Any stride and
    dilation: a strided forward subsamples the stride-1 planes, and the
    gradients of a strided convolution are correlations with zeros inserted,
    which leave the norms as they are (cuDNN ran an FFT engine for the input
    gradient of a stride-2 layer on an H100:
    ``benchmarks/results/h100/session/``).

Both bounds come on top of the final rounding to the storage format.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction
from functools import cache
from typing import Any

import numpy as np

from .formats import Format
from .precision import PrecisionModel, gamma
from .tracked import Tracked
from .xp import array_module as _xp

__all__ = ["ALGORITHMS", "TRANSFORMS", "winograd_matrices", "winograd_variants",
           "winograd_wgrad_variants", "winograd_radius", "winograd_wgrad_radius", "fft_radius",
           "transform_radius", "widen_conv2d"]

#: the algorithm classes a precision model may name: summations (direct,
#: implicit GEMM, split-K: every order the model's ``order`` allows), Winograd
#: and FFT
ALGORITHMS = ("summation", "winograd", "fft")
#: the classes that are not summations
TRANSFORMS = ("winograd", "fft")

_POINTS = (Fraction(0), Fraction(1), Fraction(-1), Fraction(2), Fraction(-2), Fraction(1, 2),
           Fraction(-1, 2), Fraction(3), Fraction(-3), Fraction(1, 3), Fraction(-1, 3))


def _solve(rows: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction]:
    """A solution of the consistent system ``rows · x = rhs``, exactly."""
    aug = [list(r) + [b] for r, b in zip(rows, rhs, strict=True)]
    ncol, row, pivots = len(rows[0]), 0, []
    for col in range(ncol):
        p = next((i for i in range(row, len(aug)) if aug[i][col] != 0), None)
        if p is None:
            continue
        aug[row], aug[p] = aug[p], aug[row]
        aug[row] = [v / aug[row][col] for v in aug[row]]
        for i in range(len(aug)):
            if i != row and aug[i][col] != 0:
                f = aug[i][col]
                aug[i] = [a - f * b for a, b in zip(aug[i], aug[row], strict=True)]
        pivots.append(col)
        row += 1
    if any(aug[i][-1] != 0 for i in range(row, len(aug))):
        raise ArithmeticError("the Toom-Cook system has no solution")  # pragma: no cover
    x = [Fraction(0)] * ncol
    for i, col in enumerate(pivots):
        x[col] = aug[i][-1]
    return x


@cache
def winograd_matrices(m: int, r: int) -> tuple[tuple[tuple[Fraction, ...], ...], ...]:
    """``(Aᵀ, G, Bᵀ)`` of ``F(m, r)`` as exact fractions (``m × α``, ``α × r``,
    ``α × α``, ``α = m + r − 1``): ``y = Aᵀ[(G g) ⊙ (Bᵀ d)]`` is the correlation
    ``y_i = Σ_k d_{i+k} g_k`` exactly.

    Examples
    --------
    >>> at, g, bt = winograd_matrices(2, 3)
    >>> len(at), len(g), len(bt)
    (2, 4, 4)
    >>> [str(v) for v in g[1]], [str(v) for v in at[1]]
    (['1/2', '1/2', '1/2'], ['0', '1', '-1', '1'])
    """
    n = m + r - 1
    if n - 1 > len(_POINTS):
        raise ValueError(f"F({m}, {r}) needs more interpolation points than are defined")
    p = _POINTS[:n - 1]
    at = [[p[j] ** i for j in range(n - 1)] + [Fraction(int(i == m - 1))] for i in range(m)]
    g = []
    for j in range(n - 1):
        f = Fraction(1)
        for lj in range(n - 1):
            if lj != j:
                f *= p[j] - p[lj]
        g.append([p[j] ** k / f for k in range(r)])
    g.append([Fraction(int(k == r - 1)) for k in range(r)])
    system = [[at[i][j] * g[j][k] for j in range(n)] for i in range(m) for k in range(r)]
    bt = [[Fraction(0)] * n for _ in range(n)]
    for t in range(n):
        col = _solve(system, [Fraction(int(t == i + k)) for i in range(m) for k in range(r)])
        for j in range(n):
            bt[j][t] = col[j]
    return tuple(map(tuple, at)), tuple(map(tuple, g)), tuple(map(tuple, bt))


def winograd_variants(kernel: int) -> tuple[tuple[int, int], ...]:
    """The ``(m, r)`` tiles considered for a square ``kernel``; () where none applies."""
    return {3: ((2, 3), (4, 3), (6, 3)), 5: ((2, 5), (4, 5))}.get(kernel, ())


def winograd_wgrad_variants(kernel: int) -> tuple[tuple[int, int], ...]:
    """The ``(m, r)`` tiles considered for the filter gradient of a square
    ``kernel``: ``m`` is the kernel (the output), ``r`` the tile of the output
    gradient (the filter). cuDNN's nonfused Winograd wgrad ran 9×9 tiles for a
    5×5 kernel on an H100 (``winogradWgradDelta9x9_5x5``: ``F(5, 5)``); for 3×3
    the forward's tiles, 4×4 and 6×6, are taken. () where none applies."""
    return {3: ((3, 2), (3, 4)), 5: ((5, 5),)}.get(kernel, ())


def _winograd_factor(m: int, r: int, h_c: int, model: PrecisionModel) -> float:
    """The relative factor of ``F(m, r)``'s componentwise bound (module docstring)."""
    at, g, bt = winograd_matrices(m, r)
    alpha, fmt = m + r - 1, model.compute
    h_total = (2 * r + _constant_roundings(g, fmt)) + (2 * alpha + _constant_roundings(
        bt, fmt)) + 1 + h_c + (2 * alpha + _constant_roundings(at, fmt))
    return (1.0 + float(gamma(np.asarray(h_total), _unit(model)))) * (
        1.0 + model.input_unit()) ** 2 - 1.0


def _orientations(m: int, r: int, xp: Any) -> list[tuple[Any, ...]]:
    """``(|Aᵀ|, |G|, |Bᵀ|)`` of ``F(m, r)`` for rows and for columns, ``(at_r,
    at_c, g_r, g_c, bt_r, bt_c)``, in each of the four orientations a kernel may
    tile in: along either axis the transform may run on the reversed tile and
    filter (``F`` of reversed operands is the reversed correlation), which moves
    ``Aᵀ``'s large rows to the other end of the tile. The bound takes them all."""
    at, g, bt = (_abs(mat, xp) for mat in winograd_matrices(m, r))
    ways = ((at, g, bt), (at[::-1, :], g[:, ::-1], bt[:, ::-1]))
    return [(ar, ac, gr, gc, br, bc) for ar, gr, br in ways for ac, gc, bc in ways]


def _embed(a: Any, plane: tuple[int, int], at: tuple[int, int]) -> Any:
    """``a`` (``(..., H, W)``) placed at offset ``at`` in zeros of ``plane`` per
    sample: the padded map a tiling reads (the tiles cover the whole map, so the
    plane always holds it)."""
    xp = _xp(a)
    out = xp.zeros(a.shape[:-2] + plane, dtype=xp.float64)
    out[..., at[0]:at[0] + a.shape[-2], at[1]:at[1] + a.shape[-1]] = a
    return out


def _tiles(a: Any, size: int, step: int, count: tuple[int, int]) -> Any:
    """``a[..., i*step : i*step + size, j*step : j*step + size]`` for the tile grid
    ``count``: ``(..., th, tw, size, size)`` (``a`` zero-padded far enough)."""
    xp = _xp(a)
    ri = (np.arange(count[0]) * step)[:, None] + np.arange(size)[None, :]
    ci = (np.arange(count[1]) * step)[:, None] + np.arange(size)[None, :]
    return a[..., xp.asarray(ri)[:, None, :, None], xp.asarray(ci)[None, :, None, :]]


def winograd_wgrad_radius(x_abs: Any, g_abs: Any, padding: tuple[int, int],
                          model: PrecisionModel) -> Any | None:
    """Per element of the filter gradient ``(O, C, k, k)`` of a stride-1,
    one-group convolution, the Winograd bound (largest over
    :func:`winograd_wgrad_variants`): ``grad_weight[o, c] = Σ_n x_nc ⋆ g_no`` is,
    tile by tile of ``g`` (``r × r``), the correlation of an ``α × α`` tile of the
    padded ``x`` with it, ``F(k, r)``; the tiles and the batch are the sum that
    the forward's channels are (``h_C`` its height). None where no variant applies."""
    xp = _xp(x_abs)
    n, c, h, wd = x_abs.shape
    _, o, ho, wo = g_abs.shape
    k = h + 2 * padding[0] - ho + 1
    variants = winograd_wgrad_variants(k) if k == wd + 2 * padding[1] - wo + 1 else ()
    if not variants:
        return None
    out = xp.zeros((o, c, k, k), dtype=xp.float64)
    for m, r in variants:
        alpha = m + r - 1
        th, tw = -(-ho // r), -(-wo // r)
        gpad = _embed(g_abs, (th * r, tw * r), (0, 0))
        xpad = _embed(x_abs, ((th - 1) * r + alpha, (tw - 1) * r + alpha), padding)
        xt, gt = _tiles(xpad, alpha, r, (th, tw)), _tiles(gpad, r, r, (th, tw))
        factor = _winograd_factor(m, r, int(model.order.height(n * th * tw)), model)
        for at_r, at_c, g_r, g_c, bt_r, bt_c in _orientations(m, r, xp):
            v = bt_r @ xt @ bt_c.T  # (N, C, th, tw, α, α)
            u = g_r @ gt @ g_c.T  # (N, O, th, tw, α, α)
            mm = xp.einsum("nctsab,notsab->ocab", v, u, optimize=True)
            out = xp.maximum(out, factor * (at_r @ mm @ at_c.T))
    return out


def _constant_roundings(mat: tuple[tuple[Fraction, ...], ...], fmt: Format) -> int:
    """2 where some entry is not exactly a ``fmt`` number (the matrix is applied
    twice, each with its rounded entries), else 0."""
    for row in mat:
        for v in row:
            if v == 0:
                continue
            # exact in a binary format with t bits: denominator a power of two and
            # numerator with at most t significant bits
            if v.denominator & (v.denominator - 1):
                return 2
            num = abs(v.numerator)
            while num % 2 == 0:
                num //= 2
            if num.bit_length() > fmt.t:
                return 2
    return 0


def _unit(model: PrecisionModel) -> float:
    """Unit roundoff of a transform's arithmetic: the coarser of compute and
    accumulation formats."""
    return max(model.acc_unit(), model.compute.unit_roundoff("rne"))


def _abs(mat: tuple[tuple[Fraction, ...], ...], xp: Any) -> Any:
    return xp.asarray([[abs(float(v)) for v in row] for row in mat], dtype=xp.float64)


def winograd_radius(x_abs: Any, w_abs: Any, padding: tuple[int, int], model: PrecisionModel,
                    groups: int = 1) -> Any | None:
    """Per output element, the Winograd bound (largest over the variants) of the
    stride-1 correlation of ``|x|`` ``(N, C, H, W)`` with ``|w|`` ``(O, C/groups,
    r, r)``; None where no variant applies (kernel not 3×3 or 5×5)."""
    xp = _xp(x_abs)
    o, cg, kh, kw = w_abs.shape
    variants = winograd_variants(kh) if kh == kw else ()
    if not variants:
        return None
    n, _, h, wd = x_abs.shape
    ph, pw = padding
    ho, wo = h + 2 * ph - kh + 1, wd + 2 * pw - kw + 1
    h_c = int(model.order.height(cg))
    out = xp.zeros((n, o, ho, wo), dtype=xp.float64)
    og = o // groups
    for m, r in variants:
        alpha = m + r - 1
        factor = _winograd_factor(m, r, h_c, model)
        th, tw = -(-ho // m), -(-wo // m)
        xpad = _embed(x_abs, ((th - 1) * m + alpha, (tw - 1) * m + alpha), (ph, pw))
        tiles = _tiles(xpad, alpha, m, (th, tw))
        for at_r, at_c, g_r, g_c, bt_r, bt_c in _orientations(m, r, xp):
            v = bt_r @ tiles @ bt_c.T  # (N, C, th, tw, α, α)
            uu = g_r @ w_abs @ g_c.T  # (O, C/G, α, α)
            for grp in range(groups):
                vg = v[:, grp * cg:(grp + 1) * cg]
                ug = uu[grp * og:(grp + 1) * og]
                mm = xp.einsum("nctsab,ocab->notsab", vg, ug, optimize=True)  # a batched GEMM
                y = at_r @ mm @ at_c.T  # (N, O/G, th, tw, m, m)
                y = y.transpose(0, 1, 2, 4, 3, 5).reshape(n, og, th * m, tw * m)[:, :, :ho, :wo]
                out[:, grp * og:(grp + 1) * og] = xp.maximum(out[:, grp * og:(grp + 1) * og],
                                                             factor * y)
    return out


def _fft_len(length: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(length, 1))))


def fft_radius(a: Any, b: Any, plane: tuple[int, int], model: PrecisionModel,
               groups: int = 1) -> Any:
    """Per output plane ``(P, Q)``, the FFT bound of ``z_pq = Σ_j a_pj ⋆ b_qj``.

    ``a`` is ``(P, J, ...)`` and ``b`` ``(Q, J/groups, ...)`` (the trailing axes
    are the plane's samples: their norms are what matters); ``plane`` the padded
    plane's extent, rounded up to powers of two per axis for ``N``. Returns
    ``(P, Q)``.
    """
    xp = _xp(a)
    nfft = _fft_len(plane[0]) * _fft_len(plane[1])
    u = _unit(model)
    lg = math.log2(nfft) if nfft > 1 else 1.0
    eta = u + float(gamma(np.asarray(4), u)) * (math.sqrt(2.0) + u)
    eps = lg * eta / (1.0 - lg * eta)
    uc = math.sqrt(2.0) * float(gamma(np.asarray(2), u))
    rn = math.sqrt(nfft)
    fmax = min(model.compute.max, model.accumulate.max)
    p_, j_ = a.shape[:2]
    q_, jg = b.shape[:2]
    a1 = xp.abs(a).reshape(p_, j_, -1).sum(axis=2)
    a2 = xp.sqrt((a * a).reshape(p_, j_, -1).sum(axis=2))
    b1 = xp.abs(b).reshape(q_, jg, -1).sum(axis=2)
    b2 = xp.sqrt((b * b).reshape(q_, jg, -1).sum(axis=2))
    h_c = float(gamma(np.asarray(int(model.order.height(jg))), u))
    out = xp.zeros((p_, q_), dtype=xp.float64)
    qg = q_ // groups
    for grp in range(groups):
        sl = slice(grp * jg, (grp + 1) * jg)
        pa1, pa2 = a1[:, sl], a2[:, sl]
        qb1, qb2 = b1[grp * qg:(grp + 1) * qg], b2[grp * qg:(grp + 1) * qg]
        a_hat = pa1 + eps * rn * pa2  # ‖F(a)‖_∞ bound of the computed transform
        pair = ((1.0 + eps) * (eps * (pa2 @ qb1.T) + eps * (pa1 @ qb2.T)
                               + eps * eps * rn * (pa2 @ qb2.T)
                               + uc * (1.0 + eps) * (a_hat @ qb2.T))
                + eps * (pa1 @ qb2.T))
        chan = (1.0 + eps) ** 2 * h_c * (a_hat @ qb2.T)
        # every intermediate is at most N sum_j ||F(a_j)||_inf ||F(b_j)||_inf (the spectra,
        # their products and channel sum, an unnormalised inverse transform): where
        # that may pass the format's range, the algorithm may overflow (not judged)
        peak = (1.0 + eps) ** 2 * nfft * (a_hat @ (qb1 + eps * rn * qb2).T)
        out[:, grp * qg:(grp + 1) * qg] = xp.where(peak < fmax, pair + chan, xp.nan)
    return out


def transform_radius(output: str, inputs: Mapping[str, Any], params: Mapping[str, Any],
                     model: PrecisionModel, shape: tuple[int, ...]) -> Any | None:
    """The largest transform bound the model's algorithms allow for one conv2d
    output of ``shape`` (before the store), per element; None where none applies
    (the model names only summations, the geometry rules transforms out, or the
    output is ``grad_bias``)."""
    algos = set(model.algorithms) & set(TRANSFORMS)
    if not algos or output == "grad_bias":
        return None
    xp = _xp(inputs["x"])
    x = xp.asarray(inputs["x"], dtype=xp.float64)
    w = xp.asarray(inputs["weight"], dtype=xp.float64)
    grp = params["groups"]
    ph, pw = params["padding"]
    o, cg, kh, kw = w.shape
    n, c, h, wd = x.shape
    out: Any = None

    def merge(r: Any) -> None:
        nonlocal out
        if r is not None:
            out = r if out is None else xp.maximum(out, r)

    one = tuple(params["stride"]) == (1, 1) and tuple(params["dilation"]) == (1, 1)
    # an FFT pads every plane to a transform size that holds the full linear
    # correlation: the padded map plus the dilated kernel's extent, per axis
    ext = [params["dilation"][i] * (k - 1) + 1 for i, k in enumerate((kh, kw))]
    plane = (h + 2 * ph + ext[0] - 1, wd + 2 * pw + ext[1] - 1)
    with np.errstate(all="ignore"):  # non-finite operands give an unjudged (NaN) radius
        if output == "y":
            if "winograd" in algos and one:
                merge(winograd_radius(xp.abs(x), xp.abs(w), (ph, pw), model, grp))
            if "fft" in algos:  # a strided forward subsamples the stride-1 planes
                r = fft_radius(x, w, plane, model, grp)
                merge(xp.broadcast_to(r[:, :, None, None], shape))
            return out
        g = xp.asarray(inputs["grad_output"], dtype=xp.float64)
        if output == "grad_input":
            # a correlation of grad_output (zeros inserted between its rows and
            # columns where strided), padded by k - 1 - p, with the flipped weight,
            # channels swapped (per group): zeros add nothing to the norms
            wf = w[:, :, ::-1, ::-1].reshape(grp, o // grp, cg, kh, kw).transpose(0, 2, 1, 3, 4)
            wf = wf.reshape(c, o // grp, kh, kw)
            if "winograd" in algos and one and kh - 1 >= ph and kw - 1 >= pw:
                merge(winograd_radius(xp.abs(g), xp.abs(wf), (kh - 1 - ph, kw - 1 - pw),
                                      model, grp))
            if "fft" in algos:
                r = fft_radius(g, wf, plane, model, grp)
                merge(xp.broadcast_to(r[:, :, None, None], (n, c, h, wd)))
            return out
        if output == "grad_weight" and "winograd" in algos and one and grp == 1:
            merge(winograd_wgrad_radius(xp.abs(x), xp.abs(g), (ph, pw), model))
        if output == "grad_weight" and "fft" in algos:
            # grad_weight[o, c] = Σ_n x[n, c] ⋆ g[n, o] (g dilated by the stride):
            # planes (o, c), sums over the batch
            og = o // grp
            res = xp.zeros((o, cg), dtype=xp.float64)
            for gi in range(grp):
                gg = g[:, gi * og:(gi + 1) * og].transpose(1, 0, 2, 3)  # (O/G, N, Ho, Wo)
                xg = x[:, gi * cg:(gi + 1) * cg].transpose(1, 0, 2, 3)  # (C/G, N, H, W)
                res[gi * og:(gi + 1) * og] = fft_radius(gg, xg, plane, model)
            merge(xp.broadcast_to(res[:, :, None, None], (o, cg, kh, kw)))
    return out


def widen_conv2d(res: Mapping[str, Tracked], inputs: Mapping[str, Any],
                 params: Mapping[str, Any], model: PrecisionModel, *,
                 add: bool = False) -> dict[str, Tracked]:
    """The conv2d outputs ``res`` (summation bounds) with each element's radius
    raised to the transform bound plus the final store where the model's
    algorithms allow a transform (:func:`transform_radius`); unchanged otherwise.
    Unjudged elements (NaN radius) stay unjudged.

    ``inputs`` are the operands' magnitudes (``|x|``, ``|weight|``,
    ``|grad_output|``, radii included). With ``add`` (operands that carry radii
    of their own, in a composed computation) the transform bound is added to the
    summation radius, which holds the propagated radii, instead of replacing it
    where larger."""
    out = dict(res)
    u_out = model.storage.unit_roundoff("rne")
    for name, t in res.items():
        r = transform_radius(name, inputs, params, model, t.shape)
        if r is None:
            continue
        xp = _xp(t.value)
        total = xp.asarray(r) * (1.0 + u_out) + u_out * xp.abs(t.value)
        join = xp.add if add else xp.maximum
        with np.errstate(invalid="ignore"):
            det = xp.where(xp.isnan(t.det), t.det, join(t.det, total))
            prob = xp.where(xp.isnan(t.prob), t.prob, join(t.prob, total))
        out[name] = replace(t, det=det, prob=prob)
    return out
