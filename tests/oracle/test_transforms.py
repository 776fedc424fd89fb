"""Winograd and FFT bounds (numoracle.oracle.transforms): sound for float32
implementations of both algorithms, needed (a summation bound does not hold
them), and named by the diagnosis."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from numoracle.checking.verdict import compare, diagnose
from numoracle.errors import InvalidArgument
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model
from numoracle.oracle.transforms import winograd_matrices

torch = pytest.importorskip("torch")

CONV = get_op("conv2d")


@pytest.mark.parametrize(("m", "r"), [(2, 3), (4, 3), (6, 3), (2, 5), (4, 5)])
def test_winograd_matrices_compute_the_correlation_exactly(m: int, r: int) -> None:
    at, g, bt = winograd_matrices(m, r)
    rng = np.random.default_rng(m * 10 + r)
    d = [Fraction(int(v)) for v in rng.integers(-9, 9, m + r - 1)]
    w = [Fraction(int(v)) for v in rng.integers(-9, 9, r)]
    gw = [sum(g[j][k] * w[k] for k in range(r)) for j in range(m + r - 1)]
    bd = [sum(bt[j][t] * d[t] for t in range(m + r - 1)) for j in range(m + r - 1)]
    y = [sum(at[i][j] * gw[j] * bd[j] for j in range(m + r - 1)) for i in range(m)]
    assert y == [sum(d[i + k] * w[k] for k in range(r)) for i in range(m)]


def _winograd_fp32(x: np.ndarray, w: np.ndarray, pad: int, m: int) -> np.ndarray:
    """A float32 Winograd F(m×m, 3×3) convolution (stride 1, one group), every
    stage rounded to float32 as a GPU kernel computes it."""
    f32 = np.float32
    at, g, bt = (np.array([[float(v) for v in row] for row in mat], dtype=f32)
                 for mat in winograd_matrices(m, 3))
    n, c, h, wd = x.shape
    o = w.shape[0]
    ho, wo = h + 2 * pad - 2, wd + 2 * pad - 2
    th, tw = -(-ho // m), -(-wo // m)
    a = m + 2
    xp = np.zeros((n, c, (th - 1) * m + a, (tw - 1) * m + a), dtype=f32)
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    u = (g @ w.astype(f32) @ g.T).astype(f32)  # (O, C, a, a)
    y = np.zeros((n, o, th * m, tw * m), dtype=f32)
    for i in range(th):
        for j in range(tw):
            d = xp[:, :, i * m:i * m + a, j * m:j * m + a]
            v = (bt @ d @ bt.T).astype(f32)  # (N, C, a, a)
            mm = np.einsum("ncab,ocab->noab", v, u).astype(f32)
            y[:, :, i * m:(i + 1) * m, j * m:(j + 1) * m] = at @ mm @ at.T
    return y[:, :, :ho, :wo]


def _case(seed: int, *, c: int = 16, size: int = 10) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    params = CONV.validate({"batch": 2, "in_channels": c, "out_channels": 4, "height": size,
                            "width": size, "kernel_size": (3, 3), "stride": (1, 1),
                            "padding": (1, 1), "dilation": (1, 1), "groups": 1, "bias": False})
    inputs = {k: rng.standard_normal(s).astype(np.float32).astype(np.float64)
              for k, s in CONV.input_shapes(params).items()}
    return params, inputs


@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize("m", [2, 4, 6])
def test_a_float32_winograd_is_within_the_winograd_bound(m: int, flip: bool) -> None:
    """Tiling from either end of the map (``flip``: the reversed correlation of the
    reversed operands), a float32 Winograd stays within the bound."""
    worst_sum = worst_wino = 0.0
    hw = (2, 3) if flip else ()
    for seed in range(6):
        params, inputs = _case(seed)
        got = np.flip(_winograd_fp32(np.flip(inputs["x"], hw).astype(np.float32),
                                     np.flip(inputs["weight"], hw).astype(np.float32), 1, m), hw)
        wino = CONV.reference(inputs, params, get_model("fp32", algorithm="winograd"), ("y",))
        direct = CONV.reference(inputs, params, get_model("fp32"), ("y",))
        worst_wino = max(worst_wino, compare("y", got, wino["y"]).worst_ratio)
        worst_sum = max(worst_sum, compare("y", got, direct["y"]).worst_ratio)
    assert worst_wino < 1.0
    assert worst_sum < 1.0  # on random data, even F(6, 3) stays within fp32 in any order


def test_a_float32_fft_convolution_is_within_the_fft_bound() -> None:
    for seed in range(6):
        params, inputs = _case(seed, c=8, size=12)
        x = torch.nn.functional.pad(torch.tensor(inputs["x"], dtype=torch.float32), (1, 1, 1, 1))
        w = torch.tensor(inputs["weight"], dtype=torch.float32)
        shape = (16, 16)
        fx = torch.fft.rfft2(x, s=shape)[:, None]  # (N, 1, C, ...)
        fw = torch.fft.rfft2(w, s=shape)[None]  # (1, O, C, ...)
        full = torch.fft.irfft2((fx * fw.conj()).sum(2), s=shape)
        got = full[:, :, :12, :12].numpy()
        ref = CONV.reference(inputs, params, get_model("fp32", algorithm="fft"), ("y",))
        assert compare("y", got, ref["y"]).worst_ratio < 1.0


def test_the_exact_regime_holds_only_for_summations() -> None:
    params, inputs = _case(0)
    ints = {k: np.round(v * 4) for k, v in inputs.items()}
    assert CONV.reference(ints, params, get_model("fp32"), ("y",))["y"].is_exact
    assert not CONV.reference(ints, params, get_model("fp32", algorithm="any"), ("y",))[
        "y"].is_exact


@pytest.mark.parametrize("m", [4, 6])
def test_a_float32_winograd_exceeds_a_pairwise_summation_bound(m: int) -> None:
    params, inputs = _case(1)
    got = _winograd_fp32(inputs["x"].astype(np.float32), inputs["weight"].astype(np.float32),
                         1, m)
    pairwise = CONV.reference(inputs, params, get_model("fp32", order="pairwise"), ("y",))
    assert compare("y", got, pairwise["y"]).worst_ratio > 1.0


def _perturbed(claimed_name: str, share: float, algorithm: str = "any"
               ) -> tuple[np.ndarray, dict, dict]:
    """The exact result moved by ``share`` of the transform bound (signs random)."""
    params, inputs = _case(3)
    ref = CONV.reference(inputs, params, get_model(claimed_name, algorithm=algorithm),
                         ("y",))["y"]
    signs = np.random.default_rng(0).choice([-1.0, 1.0], ref.value.shape)
    return ref.value + share * signs * ref.det, params, inputs


@pytest.mark.parametrize(("algorithm", "words"), [("winograd", "a Winograd algorithm (ratio"),
                                                  ("fft", "an FFT algorithm (ratio")])
def test_the_diagnosis_names_the_transform_algorithm(algorithm: str, words: str) -> None:
    """A result half-way to one algorithm's bound, beyond every summation: the
    diagnosis names that algorithm, with its ratio."""
    got, params, inputs = _perturbed("fp64", 0.5, algorithm)
    model = get_model("fp64")
    out = compare("y", got, CONV.reference(inputs, params, model, ("y",))["y"])
    assert not out.passed
    diagnose(out, got, model, lambda m: CONV.reference(inputs, params, m, ("y",))["y"])
    assert str(out.diagnosis).startswith("exceeds fp64; consistent with")
    assert words in out.diagnosis


def test_the_diagnosis_says_which_formats_explain_before_naming_transforms() -> None:
    got, params, inputs = _perturbed("fp32", 0.5)
    model = get_model("fp32")
    out = compare("y", got, CONV.reference(inputs, params, model, ("y",))["y"])
    assert not out.passed
    diagnose(out, got, model, lambda m: CONV.reference(inputs, params, m, ("y",))["y"])
    assert out.diagnosis.kind == "precision"  # coarser formats explain it first
    assert "Winograd or FFT" in out.diagnosis


@pytest.mark.parametrize("m", [4, 6])
def test_a_passing_result_beyond_the_summation_bound_names_the_algorithm(m: int) -> None:
    """Under a claim that allows transforms, a float32 Winograd result that
    exceeds the claimed summation bound passes, and the diagnosis says which
    algorithm explains it."""
    params, inputs = _case(1)
    got = _winograd_fp32(inputs["x"].astype(np.float32), inputs["weight"].astype(np.float32),
                         1, m)
    model = get_model("fp32", order="pairwise").with_(algorithms=("summation", "winograd",
                                                                  "fft"))
    out = compare("y", got, CONV.reference(inputs, params, model, ("y",))["y"])
    assert out.passed
    diagnose(out, got, model, lambda m_: CONV.reference(inputs, params, m_, ("y",))["y"])
    assert str(out.diagnosis).startswith("within")
    assert "beyond its summation bound" in out.diagnosis
    assert "a Winograd algorithm (ratio" in out.diagnosis
    direct = CONV.reference(inputs, params, model.with_(algorithms=("summation",)), ("y",))
    assert out.per_model[f"{model.name} summation only"] == compare(
        "y", got, direct["y"]).worst_ratio > 1.0


def test_beyond_the_transform_bound_is_a_logic_bug() -> None:
    got, params, inputs = _perturbed("fp64", 3.0)
    model = get_model("fp64")
    out = compare("y", got, CONV.reference(inputs, params, model, ("y",))["y"])
    diagnose(out, got, model, lambda m: CONV.reference(inputs, params, m, ("y",))["y"])
    assert "logic bug" in out.diagnosis


@pytest.mark.parametrize(("kw", "match"), [
    ({"algorithm": "strassen"}, "algorithm must be one of"),
    ({"algorithms": ("summation", "magic")}, "must be a non-empty tuple"),
    ({"algorithms": "fft"}, "must be a non-empty tuple"),
])
def test_invalid_algorithms_are_rejected(kw: dict, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        get_model("fp32", **kw)


def test_a_strided_input_gradient_by_fft_is_within_the_fft_bound() -> None:
    """cuDNN computes the input gradient of a stride-2 layer with an FFT engine:
    zeros inserted in grad_output, a full correlation with the flipped weight."""
    for seed in range(4):
        rng = np.random.default_rng(seed)
        params = CONV.validate({"batch": 2, "in_channels": 4, "out_channels": 6, "height": 11,
                                "width": 11, "kernel_size": (3, 3), "stride": (2, 2),
                                "padding": (1, 1), "dilation": (1, 1), "groups": 1,
                                "bias": False})
        inputs = {k: rng.standard_normal(s).astype(np.float32).astype(np.float64)
                  for k, s in CONV.input_shapes(params).items()}
        g = torch.tensor(inputs["grad_output"], dtype=torch.float32)  # (N, O, 6, 6)
        w = torch.tensor(inputs["weight"], dtype=torch.float32)  # (O, C, 3, 3)
        gd = torch.zeros((2, 6, 11, 11), dtype=torch.float32)
        gd[:, :, ::2, ::2] = g  # zeros between the rows and columns
        gp = torch.nn.functional.pad(gd, (1, 1, 1, 1))  # k - 1 - p = 1
        wf = torch.flip(w, dims=(2, 3)).transpose(0, 1)  # (C, O, 3, 3)
        shape = (16, 16)
        fg = torch.fft.rfft2(gp, s=shape)[:, None]  # (N, 1, O, ...)
        fw = torch.fft.rfft2(wf, s=shape)[None]  # (1, C, O, ...)
        got = torch.fft.irfft2((fg * fw.conj()).sum(2), s=shape)[:, :, :11, :11].numpy()
        assert np.allclose(got, torch.nn.grad.conv2d_input(
            (2, 4, 11, 11), w, g, stride=2, padding=1).numpy(), atol=1e-4)
        ref = CONV.reference(inputs, params, get_model("fp32", algorithm="fft"),
                             ("grad_input",))
        assert compare("grad_input", got, ref["grad_input"]).worst_ratio < 1.0


def test_an_fft_overflowing_where_the_result_does_not_is_not_judged_under_an_fft_claim(
) -> None:
    """cuDNN (TF32 off, channels-last, an FFT engine, on an H200) gave Inf in 68
    elements of a finite fp32 forward: two inputs of 1.3e36 give flat spectra whose
    unnormalised inverse transform sums 1,024 terms past the float32 range. Under a
    claim that allows an FFT those elements are not judged (the others still are);
    a claim of summation alone fails them."""
    import json
    from pathlib import Path

    from numoracle.cases.case import Case
    from numoracle.checking.check import judge

    data = Path(__file__).resolve().parents[1] / "data" / "cudnn-fft-overflow"
    meta = json.loads((data / "case.json").read_text())
    case = Case.from_dict(meta["case"])
    with np.load(data / "y.npz") as z:
        got = {"y": z["y"]}
    assert np.isinf(got["y"]).sum() == 68
    inputs = case.inputs()
    fft = get_model("fp32").with_(algorithms=("summation", "winograd", "fft"))
    ref = get_op("conv2d").reference(inputs, case.params, fft, outputs=("y",))["y"]
    assert np.all(np.isfinite(ref.value))
    unjudged = np.isnan(ref.det)
    assert unjudged[np.isinf(got["y"])].all() and not unjudged.all()
    assert judge(case, fft, inputs, got)["y"].passed
    direct = fft.with_(algorithms=("summation",))
    assert not judge(case, direct, inputs, got)["y"].passed


def _winograd_wgrad(x: np.ndarray, g: np.ndarray, pad: int, m: int, r: int,
                    dtype: type) -> np.ndarray:
    """The filter gradient ``(O, C, m, m)`` by Winograd ``F(m, r)`` over ``r × r``
    tiles of ``g``, every stage rounded to ``dtype`` as a GPU kernel computes it
    (the tiles' products summed over the batch and the tiles in order)."""
    at, gm, bt = (np.array([[float(v) for v in row] for row in mat], dtype=dtype)
                  for mat in winograd_matrices(m, r))
    n, c, h, wd = x.shape
    o, ho, wo = g.shape[1:]
    a = m + r - 1
    th, tw = -(-ho // r), -(-wo // r)
    gp = np.zeros((n, o, th * r, tw * r), dtype=dtype)
    gp[:, :, :ho, :wo] = g
    xp = np.zeros((n, c, (th - 1) * r + a, (tw - 1) * r + a), dtype=dtype)
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    acc = np.zeros((o, c, a, a), dtype=dtype)
    for i in range(th):
        for j in range(tw):
            v = (bt @ xp[:, :, i * r:i * r + a, j * r:j * r + a] @ bt.T).astype(dtype)
            u = (gm @ gp[:, :, i * r:(i + 1) * r, j * r:(j + 1) * r] @ gm.T).astype(dtype)
            acc = (acc + np.einsum("ncab,noab->ocab", v, u)).astype(dtype)
    return (at @ acc @ at.T).astype(dtype)


@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize(("k", "r"), [(3, 2), (3, 4), (5, 5)])
def test_a_float32_winograd_filter_gradient_is_within_the_winograd_bound(k: int, r: int,
                                                                          flip: bool) -> None:
    """cuDNN's nonfused Winograd wgrad (``F(5, 5)`` on 9×9 tiles for a 5×5 kernel
    on an H100) is emulated in float32, tiling from either end of the maps
    (``flip``); it stays within the Winograd bound of the filter gradient, and
    F(5, 5)'s transforms exceed what a summation may err."""
    worst_wino = worst_sum = 0.0
    for seed in range(4):
        rng = np.random.default_rng(seed)
        params = CONV.validate({"batch": 2, "in_channels": 3, "out_channels": 4, "height": 11,
                                "width": 11, "kernel_size": (k, k), "padding": (k // 2, k // 2),
                                "bias": False})
        inputs = {name: rng.standard_normal(s).astype(np.float32).astype(np.float64)
                  for name, s in CONV.input_shapes(params).items()}
        x, g = inputs["x"], inputs["grad_output"]
        exact = CONV.reference(inputs, params, get_model("fp64"), ("grad_weight",))
        assert np.allclose(_winograd_wgrad(x, g, k // 2, k, r, np.float64),
                           exact["grad_weight"].value, rtol=1e-9, atol=1e-9)
        hw = (2, 3) if flip else ()
        got = np.flip(_winograd_wgrad(np.flip(x, hw).astype(np.float32),
                                      np.flip(g, hw).astype(np.float32), k // 2, k, r,
                                      np.float32), hw)
        wino = CONV.reference(inputs, params, get_model("fp32", algorithm="winograd"),
                              ("grad_weight",))
        direct = CONV.reference(inputs, params, get_model("fp32"), ("grad_weight",))
        worst_wino = max(worst_wino, compare("grad_weight", got, wino["grad_weight"]).worst_ratio)
        worst_sum = max(worst_sum, compare("grad_weight", got, direct["grad_weight"]).worst_ratio)
    assert worst_wino < 1.0
    if (k, r) == (5, 5):
        assert worst_sum > 1.0


@pytest.mark.parametrize(("k", "r"), [(3, 4), (5, 5)])
def test_a_winograd_filter_gradient_a_thousand_times_less_accurate_fails(k: int, r: int) -> None:
    """The Winograd bound follows the transformed values of the case, not the
    worst case of the matrices: a filter gradient whose error is a thousand
    times a float32 Winograd's fails a Winograd claim, while the float32 one
    passes it."""
    rng = np.random.default_rng(7)
    params = CONV.validate({"batch": 4, "in_channels": 8, "out_channels": 4, "height": 12,
                            "width": 12, "kernel_size": (k, k), "padding": (k // 2, k // 2),
                            "bias": False})
    inputs = {name: rng.standard_normal(s).astype(np.float32).astype(np.float64)
              for name, s in CONV.input_shapes(params).items()}
    got = _winograd_wgrad(inputs["x"].astype(np.float32), inputs["grad_output"].astype(
        np.float32), k // 2, k, r, np.float32).astype(np.float64)
    wino = CONV.reference(inputs, params, get_model("fp32", algorithm="winograd"),
                          ("grad_weight",))["grad_weight"]
    assert compare("grad_weight", got, wino).passed
    worse = wino.value + 1000.0 * (got - wino.value)
    assert not compare("grad_weight", worse, wino).passed

