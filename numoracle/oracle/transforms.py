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
    compute the correlation exactly. Every stage is a product of small matrices
    whose rounding errors are bounded by the standard forward error bound of
    matrix products (Higham, *Accuracy and Stability of Numerical Algorithms*,
    2nd ed., §3.5), relative to the magnitudes of the stage's operands. The
    bound follows the data of the case: where a stage's result enters a later
    stage, its actual magnitude (``|G g Gᵀ|``, ``|Bᵀ d B|``, ``|M|`` with
    ``M = Σ_c U_c ⊙ V_c``, computed in float64 with their own error counted) is
    used, not the worst case ``|G||g||Gᵀ|`` of the matrices' magnitudes. With
    ``P = |G||g||Gᵀ|`` and ``Q = |Bᵀ||d||B|`` (what each transform's rounding
    is relative to), ``U = G g Gᵀ`` and ``V = Bᵀ d B``:

    ``|M̂ − M| ≤ R = (1 + g_C)[e_U Σ_c P|V| + e_V Σ_c |U|Q + e_U e_V Σ_c PQ] + g_C Σ_c |U||V|``

    ``|Ŷ − Y| ≤ (1 + g_A)|Aᵀ| R |A| + g_A |Aᵀ||M||A|``

    with ``e_U = (1 + γ(2r + c_G))(1 + u_in) − 1``, ``e_V = (1 + γ(2α + c_B))(1 +
    u_in) − 1`` (``α = m + r − 1``; ``c_X = 2`` where a transform matrix has
    entries the arithmetic cannot hold exactly, as ``1/6`` of ``F(4, 3)``, else
    0; ``u_in`` the rounding of the inputs to the compute format), ``g_C =
    γ(1 + h_C)`` (the products and the channel sum, ``h_C`` its height under the
    model's order) and ``g_A = γ(2α + c_A)``, ``γ`` at the unit roundoff of the
    coarser of the compute and accumulation formats (transforms may run in
    either). Where the operands carry radii (a composed computation), ``|U|``
    and ``|V|`` grow by the transforms of the radii and ``|M|`` is taken as
    ``Σ_c |U||V|`` (no cancellation counted on). The magnitudes grow quickly
    with the tile size ``m`` through the entries of ``A``, ``B`` and ``G``, as
    the published analyses find (Barabasz, Anderson, Soodhalter & Gregg, "Error
    analysis and improving the accuracy of Winograd convolution for deep neural
    networks", ACM TOMS 2020). Variants
    considered: ``F(2, 3)``, ``F(4, 3)``, ``F(6, 3)`` for 3×3 kernels and
    ``F(2, 5)``, ``F(4, 5)`` for 5×5, stride 1 and dilation 1 only (cuDNN's
    Winograd engines need them); the bound is the largest over the variants and
    over the orientations a kernel may tile in (along each axis, the transform of
    the reversed tile: it puts ``Aᵀ``'s large rows at the other end of the tile; a
    kernel tiling the other way can come close to the bound of one orientation at a
    tile's corner).
    The filter gradient ``Σ_n x_nc ⋆ g_no`` is, tile by tile of ``g``, the same
    construction with the kernel as the output and the tile as the filter,
    ``F(k, r)``, the batch and the tiles summed as the channels are (cuDNN's
    nonfused Winograd wgrad runs ``F(5, 5)`` on 9×9 tiles for a 5×5 kernel with
    TF32 off and deterministic algorithms).

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
    (cuDNN's FFT engine can give Inf for a finite fp32 output, a finding with a
    repro: ``benchmarks/results/findings/cudnn-fft-overflow/``), and the element is not
    judged under a model that allows an FFT. Any stride and
    dilation: a strided forward subsamples the stride-1 planes, and the
    gradients of a strided convolution are correlations with zeros inserted,
    which leave the norms as they are (cuDNN may run an FFT engine for the input
    gradient of a stride-2 layer).

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
    gradient (the filter). cuDNN's nonfused Winograd wgrad runs 9×9 tiles for a
    5×5 kernel (``winogradWgradDelta9x9_5x5``: ``F(5, 5)``); for 3×3
    the forward's tiles, 4×4 and 6×6, are taken. () where none applies."""
    return {3: ((3, 2), (3, 4)), 5: ((5, 5),)}.get(kernel, ())


#: unit roundoff of the oracle's own float64 arithmetic (its transforms of the data)
_U64 = 2.0 ** -53


def _winograd_units(m: int, r: int, h_c: Any, model: PrecisionModel) -> tuple[float, ...]:
    """``(e_U, e_V, g_C, g_A)`` of ``F(m, r)`` under ``model`` (module docstring):
    the relative errors of the filter and data transforms (inputs rounded to the
    compute format included), of the products and their sum of height ``h_c``, and
    of the output transform."""
    at, g, bt = winograd_matrices(m, r)
    alpha, fmt, u = m + r - 1, model.compute, _unit(model)
    u_in = model.input_unit()

    def gam(h: Any) -> float:
        return float(gamma(np.asarray(h), u))
    e_u = (1.0 + gam(2 * r + _constant_roundings(g, fmt))) * (1.0 + u_in) - 1.0
    e_v = (1.0 + gam(2 * alpha + _constant_roundings(bt, fmt))) * (1.0 + u_in) - 1.0
    return e_u, e_v, gam(1 + int(h_c)), gam(2 * alpha + _constant_roundings(at, fmt))


def _orientations(m: int, r: int, xp: Any) -> list[tuple[Any, ...]]:
    """``(Aᵀ, G, Bᵀ)`` of ``F(m, r)`` for rows and for columns, ``(at_r, at_c,
    g_r, g_c, bt_r, bt_c)``, in each of the four orientations a kernel may tile
    in: along either axis the transform may run on the reversed tile and filter
    (``F`` of reversed operands is the reversed correlation), which moves
    ``Aᵀ``'s large rows to the other end of the tile. The bound takes them all."""
    at, g, bt = (_signed(mat, xp) for mat in winograd_matrices(m, r))
    ways = ((at, g, bt), (at[::-1, :], g[:, ::-1], bt[:, ::-1]))
    return [(ar, ac, gr, gc, br, bc) for ar, gr, br in ways for ac, gc, bc in ways]


def _transformed(mat_r: Any, mat_c: Any, t: Any, rad: Any | None, slack: float
                 ) -> tuple[Any, Any, Any]:
    """``(T, |T|⁺, Q)`` of the transform ``T = mat_r · t · mat_cᵀ`` of tiles ``t``:
    ``T`` in float64, ``|T|⁺`` an upper bound of ``|T|`` for any operand within
    ``rad`` of ``t`` (the float64 error ``slack · Q`` included) and ``Q = |mat_r|
    (|t| + rad) |mat_c|ᵀ``, what the transform's rounding errors are relative to."""
    xp = _xp(t)
    ar, ac = xp.abs(mat_r), xp.abs(mat_c)
    val = mat_r @ t @ mat_c.T
    mag = xp.abs(t) if rad is None else xp.abs(t) + rad
    q = ar @ mag @ ac.T
    up = xp.abs(val) + slack * q
    if rad is not None:
        up = up + ar @ rad @ ac.T
    return val, up, q


def _winograd_tile_bound(d: Any, d_rad: Any | None, f: Any, f_rad: Any | None,
                         mats: tuple[Any, ...], contract: str, terms: int,
                         units: tuple[float, ...], m: int, r: int) -> Any:
    """The data-following bound of one orientation ``mats`` of ``F(m, r)``, per
    element of ``Aᵀ M Aᵀ`` (module docstring): data tiles ``d`` (``α × α``),
    filter tiles ``f`` (``r × r``), radii ``*_rad`` (None: exact), ``contract``
    the einsum that forms ``M`` from the transformed data and filter (summing
    ``terms`` products per element)."""
    xp = _xp(d)
    at_r, at_c, g_r, g_c, bt_r, bt_c = mats
    alpha = m + r - 1
    e_u, e_v, g_c_, g_a = units
    s_u = float(gamma(np.asarray(2 * r + 2), _U64))
    s_v = float(gamma(np.asarray(2 * alpha + 2), _U64))
    v, v_up, q = _transformed(bt_r, bt_c, d, d_rad, s_v)
    u, u_up, p = _transformed(g_r, g_c, f, f_rad, s_u)
    del d
    s_pv = xp.einsum(contract, v_up, p, optimize=True)
    s_uq = xp.einsum(contract, q, u_up, optimize=True)
    s_pq = xp.einsum(contract, q, p, optimize=True)
    s_uv = xp.einsum(contract, v_up, u_up, optimize=True)
    if d_rad is None and f_rad is None:
        # the exact M = Σ U ⊙ V, computed from float64 U and V by a float64 sum
        g64 = float(gamma(np.asarray(terms), _U64))
        s_m = (1.0 + s_u) * (1.0 + s_v) * (1.0 + g64) - 1.0
        m_up = xp.minimum(xp.abs(xp.einsum(contract, v, u, optimize=True)) + s_m * s_pq, s_uv)
    else:  # operands anywhere within their radii: no cancellation counted on
        m_up = s_uv
    r_m = (1.0 + g_c_) * (e_u * s_pv + e_v * s_uq + e_u * e_v * s_pq) + g_c_ * s_uv
    aa_r, aa_c = xp.abs(at_r), xp.abs(at_c)
    out = (1.0 + g_a) * (aa_r @ r_m @ aa_c.T) + g_a * (aa_r @ m_up @ aa_c.T)
    # the sums above are of non-negative float64 terms: their own rounding
    return out * (1.0 + float(gamma(np.asarray(terms + 4 * alpha + 2 * r + 8), _U64)))


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


def winograd_wgrad_radius(x: Any, g: Any, padding: tuple[int, int], model: PrecisionModel,
                          x_rad: Any | None = None, g_rad: Any | None = None) -> Any | None:
    """Per element of the filter gradient ``(O, C, k, k)`` of a stride-1,
    one-group convolution, the Winograd bound (largest over
    :func:`winograd_wgrad_variants`): ``grad_weight[o, c] = Σ_n x_nc ⋆ g_no`` is,
    tile by tile of ``g`` (``r × r``), the correlation of an ``α × α`` tile of the
    padded ``x`` with it, ``F(k, r)``; the tiles and the batch are the sum that
    the forward's channels are (``h_C`` its height). ``x`` and ``g`` are the
    operands' values, ``x_rad`` and ``g_rad`` their radii (None: exact). None
    where no variant applies."""
    xp = _xp(x)
    n, c, h, wd = x.shape
    _, o, ho, wo = g.shape
    k = h + 2 * padding[0] - ho + 1
    variants = winograd_wgrad_variants(k) if k == wd + 2 * padding[1] - wo + 1 else ()
    if not variants:
        return None
    out = xp.zeros((o, c, k, k), dtype=xp.float64)
    for m, r in variants:
        alpha = m + r - 1
        th, tw = -(-ho // r), -(-wo // r)

        def gtiles(a: Any, _th: int = th, _tw: int = tw, _r: int = r) -> Any:
            return _tiles(_embed(a, (_th * _r, _tw * _r), (0, 0)), _r, _r, (_th, _tw))

        def xtiles(a: Any, _th: int = th, _tw: int = tw, _r: int = r, _a: int = alpha) -> Any:
            return _tiles(_embed(a, ((_th - 1) * _r + _a, (_tw - 1) * _r + _a), padding),
                          _a, _r, (_th, _tw))
        xt, gt = xtiles(x), gtiles(g)
        xr = None if x_rad is None else xtiles(x_rad)
        gr = None if g_rad is None else gtiles(g_rad)
        terms = n * th * tw
        units = _winograd_units(m, r, model.order.height(terms), model)
        for mats in _orientations(m, r, xp):
            y = _winograd_tile_bound(xt, xr, gt, gr, mats, "nctsab,notsab->ocab", terms,
                                     units, m, r)
            out = xp.maximum(out, y)
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


def _signed(mat: tuple[tuple[Fraction, ...], ...], xp: Any) -> Any:
    return xp.asarray([[float(v) for v in row] for row in mat], dtype=xp.float64)


def winograd_radius(x: Any, w: Any, padding: tuple[int, int], model: PrecisionModel,
                    groups: int = 1, x_rad: Any | None = None,
                    w_rad: Any | None = None) -> Any | None:
    """Per output element, the Winograd bound (largest over the variants) of the
    stride-1 correlation of ``x`` ``(N, C, H, W)`` with ``w`` ``(O, C/groups, r,
    r)`` (values; ``x_rad`` and ``w_rad`` their radii, None: exact); None where
    no variant applies (kernel not 3×3 or 5×5)."""
    xp = _xp(x)
    o, cg, kh, kw = w.shape
    variants = winograd_variants(kh) if kh == kw else ()
    if not variants:
        return None
    n, _, h, wd = x.shape
    ph, pw = padding
    ho, wo = h + 2 * ph - kh + 1, wd + 2 * pw - kw + 1
    units_h = model.order.height(cg)
    out = xp.zeros((n, o, ho, wo), dtype=xp.float64)
    og = o // groups
    for m, r in variants:
        alpha = m + r - 1
        units = _winograd_units(m, r, units_h, model)
        th, tw = -(-ho // m), -(-wo // m)

        def tiles(a: Any, _th: int = th, _tw: int = tw, _m: int = m, _a: int = alpha) -> Any:
            return _tiles(_embed(a, ((_th - 1) * _m + _a, (_tw - 1) * _m + _a), (ph, pw)),
                          _a, _m, (_th, _tw))
        xt = tiles(x)
        xr = None if x_rad is None else tiles(x_rad)
        for mats in _orientations(m, r, xp):
            for grp in range(groups):
                cs, os_ = slice(grp * cg, (grp + 1) * cg), slice(grp * og, (grp + 1) * og)
                y = _winograd_tile_bound(xt[:, cs], None if xr is None else xr[:, cs], w[os_],
                                         None if w_rad is None else w_rad[os_], mats,
                                         "nctsab,ocab->notsab", cg, units, m, r)
                y = y.transpose(0, 1, 2, 4, 3, 5).reshape(n, og, th * m, tw * m)[:, :, :ho, :wo]
                out[:, os_] = xp.maximum(out[:, os_], y)
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
                     model: PrecisionModel, shape: tuple[int, ...],
                     radii: Mapping[str, Any] | None = None) -> Any | None:
    """The largest transform bound the model's algorithms allow for one conv2d
    output of ``shape`` (before the store), per element; None where none applies
    (the model names only summations, the geometry rules transforms out, or the
    output is ``grad_bias``).

    ``inputs`` are the operands' values (``x``, ``weight``, ``grad_output``),
    ``radii`` their radii where they carry some (None, or a name left out:
    exact). The Winograd bound follows the transformed values of the case; the
    FFT bound takes the norms of the magnitudes ``|value| + radius``."""
    algos = set(model.algorithms) & set(TRANSFORMS)
    if not algos or output == "grad_bias":
        return None
    xp = _xp(inputs["x"])
    rad = {k: xp.asarray(v, dtype=xp.float64) for k, v in (radii or {}).items()
           if v is not None}
    x = xp.asarray(inputs["x"], dtype=xp.float64)
    w = xp.asarray(inputs["weight"], dtype=xp.float64)
    x_r, w_r = rad.get("x"), rad.get("weight")
    x_m = xp.abs(x) if x_r is None else xp.abs(x) + x_r
    w_m = xp.abs(w) if w_r is None else xp.abs(w) + w_r
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
                merge(winograd_radius(x, w, (ph, pw), model, grp, x_r, w_r))
            if "fft" in algos:  # a strided forward subsamples the stride-1 planes
                r = fft_radius(x_m, w_m, plane, model, grp)
                merge(xp.broadcast_to(r[:, :, None, None], shape))
            return out
        g = xp.asarray(inputs["grad_output"], dtype=xp.float64)
        g_r = rad.get("grad_output")
        g_m = xp.abs(g) if g_r is None else xp.abs(g) + g_r
        if output == "grad_input":
            # a correlation of grad_output (zeros inserted between its rows and
            # columns where strided), padded by k - 1 - p, with the flipped weight,
            # channels swapped (per group): zeros add nothing to the norms
            def flipped(a: Any) -> Any:
                a = a[:, :, ::-1, ::-1].reshape(grp, o // grp, cg, kh, kw)
                return a.transpose(0, 2, 1, 3, 4).reshape(c, o // grp, kh, kw)
            wf, wf_r = flipped(w), None if w_r is None else flipped(w_r)
            if "winograd" in algos and one and kh - 1 >= ph and kw - 1 >= pw:
                merge(winograd_radius(g, wf, (kh - 1 - ph, kw - 1 - pw), model, grp, g_r, wf_r))
            if "fft" in algos:
                r = fft_radius(g_m, flipped(w_m), plane, model, grp)
                merge(xp.broadcast_to(r[:, :, None, None], (n, c, h, wd)))
            return out
        if output == "grad_weight" and "winograd" in algos and one and grp == 1:
            merge(winograd_wgrad_radius(x, g, (ph, pw), model, x_r, g_r))
        if output == "grad_weight" and "fft" in algos:
            # grad_weight[o, c] = Σ_n x[n, c] ⋆ g[n, o] (g dilated by the stride):
            # planes (o, c), sums over the batch
            og = o // grp
            res = xp.zeros((o, cg), dtype=xp.float64)
            for gi in range(grp):
                gg = g_m[:, gi * og:(gi + 1) * og].transpose(1, 0, 2, 3)  # (O/G, N, Ho, Wo)
                xg = x_m[:, gi * cg:(gi + 1) * cg].transpose(1, 0, 2, 3)  # (C/G, N, H, W)
                res[gi * og:(gi + 1) * og] = fft_radius(gg, xg, plane, model)
            merge(xp.broadcast_to(res[:, :, None, None], (o, cg, kh, kw)))
    return out


def widen_conv2d(res: Mapping[str, Tracked], inputs: Mapping[str, Any],
                 params: Mapping[str, Any], model: PrecisionModel, *,
                 add: bool = False, radii: Mapping[str, Any] | None = None
                 ) -> dict[str, Tracked]:
    """The conv2d outputs ``res`` (summation bounds) with each element's radius
    raised to the transform bound plus the final store where the model's
    algorithms allow a transform (:func:`transform_radius`); unchanged otherwise.
    Unjudged elements (NaN radius) stay unjudged.

    ``inputs`` are the operands' values (``x``, ``weight``, ``grad_output``),
    ``radii`` their radii where they carry some (None: exact). With ``add``
    (operands that carry radii of their own, in a composed computation) the
    transform bound is added to the summation radius, which holds the propagated
    radii, instead of replacing it where larger."""
    out = dict(res)
    u_out = model.storage.unit_roundoff("rne")
    for name, t in res.items():
        r = transform_radius(name, inputs, params, model, t.shape, radii)
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
