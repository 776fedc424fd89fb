"""conv2d GPU targets (CuPy direct kernels, torch cuDNN) against float64 torch CPU.

The error measure is ``max |got - ref| / S`` with ``S`` an element's sum of
the absolute values of its terms (the same convolution of ``|x|``, ``|w|``,
``|g|``): below 1e-4 for fp32 and 1e-2 for TF32, loose sanity limits (the
oracle judges for real). Small-integer inputs make every sum exact, so any
indexing slip shows as a nonzero error. The GPU tests skip without CuPy or
CUDA; the geometry tests at the end run anywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from numoracle.errors import InvalidArgument
from numoracle.kernels.cupy_conv2d import ConvGeometry, resolve_geometry
from numoracle.oracle.formats import quantize
from numoracle.oracle.precision import gamma

gpu = pytest.mark.gpu

TOL = {"fp32": 1e-4, "tf32": 1e-2}
U32 = 2.0**-24

#: (N, C, O, H, W, kernel, stride, padding, dilation, groups, bias)
GEOMETRIES = [
    (1, 1, 1, 1, 1, 1, 1, 0, 1, 1, True),
    (3, 3, 5, 7, 9, 3, 1, 1, 1, 1, True),
    (1, 4, 6, 11, 13, 3, 2, 1, 1, 2, True),
    (3, 5, 7, 9, 8, (3, 2), (2, 1), (1, 0), 1, 1, False),
    (3, 6, 6, 10, 7, 3, 1, 2, 2, 6, True),  # depthwise, dilation 2
    (1, 8, 16, 15, 15, 5, 2, 2, 1, 8, True),  # depthwise, multiplier 2, stride 2
    (3, 3, 4, 17, 5, (1, 3), 3, (0, 1), (1, 2), 1, True),
    (1, 2, 3, 2, 2, 3, 1, 1, 1, 1, True),  # corner taps only ever see padding
    (3, 16, 8, 13, 11, 3, 2, 1, 3, 4, True),
    (2, 32, 32, 9, 9, 1, 1, 0, 1, 1, True),  # 1x1
    (3, 4, 4, 33, 33, 3, 1, 1, 1, 1, True),  # 3267 positions: several det runs
    (1, 1, 1, 301, 1, (7, 1), 1, (3, 0), 1, 1, False),
]
IDS = [f"g{i}" for i in range(len(GEOMETRIES))]


def pick(*indices: int) -> list[Any]:
    return [pytest.param(GEOMETRIES[i], id=IDS[i]) for i in indices]

CUPY_VARIANTS = [("NCHW", False), ("NCHW", True), ("NHWC", False), ("NHWC", True)]
#: canonical order -> the NHWC target's order, per array
NHWC_ORDER = {"x": ("NCHW", "NHWC"), "grad_output": ("NCHW", "NHWC"),
              "weight": ("OIHW", "OHWI"), "y": ("NCHW", "NHWC"),
              "grad_input": ("NCHW", "NHWC"), "grad_weight": ("OIHW", "OHWI")}


def conv_kw(geo: tuple) -> dict[str, Any]:
    _, _, _, _, _, _, stride, padding, dilation, groups, _ = geo
    return {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}


def make_host(geo: tuple, seed: int, integers: bool = False) -> dict[str, np.ndarray]:
    """Canonical-order float64 inputs, exact in fp32."""
    n, c, o, h, w, kernel, *_, groups, bias = geo
    g = ConvGeometry.from_shapes((n, c, h, w), (o, c // groups) + _pair(kernel), **conv_kw(geo))
    shapes = {"x": g.shape("x"), "weight": g.shape("weight"), "grad_output": g.shape("y")}
    if bias:
        shapes["bias"] = (o,)
    rng = np.random.default_rng(seed)
    if integers:
        return {k: rng.integers(-2, 3, s).astype(np.float64) for k, s in shapes.items()}
    return {k: quantize(rng.standard_normal(s), "fp32") for k, s in shapes.items()}


def _pair(v: Any) -> tuple[int, int]:
    return tuple(v) if isinstance(v, tuple) else (v, v)  # type: ignore[return-value]


def reference(host: dict[str, np.ndarray], geo: tuple) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each output's float64 value and S, by torch CPU float64 and autograd."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    def run(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [k for k in ("x", "weight", "bias") if k in arrays]
        leaves = [torch.tensor(arrays[k], dtype=torch.float64, requires_grad=True) for k in names]
        y = F.conv2d(leaves[0], leaves[1], leaves[2] if len(leaves) == 3 else None,
                     **conv_kw(geo))
        g = torch.tensor(arrays["grad_output"], dtype=torch.float64)
        grads = torch.autograd.grad(y, leaves, grad_outputs=g)
        out = {"y": y, "grad_input": grads[0], "grad_weight": grads[1]}
        if len(grads) == 3:
            out["grad_bias"] = grads[2]
        return {k: v.detach().numpy() for k, v in out.items()}

    val, s = run(host), run({k: np.abs(v) for k, v in host.items()})
    return {k: (val[k], s[k]) for k in val}


def perm(src: str, dst: str) -> tuple[int, ...]:
    return tuple(src.index(a) for a in dst)


def run_cupy(cp: Any, host: dict, geo: tuple, layout: str, det: bool) -> dict[str, np.ndarray]:
    """The CuPy kernels on ``host`` in ``layout``; outputs back in canonical order."""
    from numoracle.kernels.cupy_conv2d import conv2d

    dev = {}
    for k, v in host.items():
        if layout == "NHWC" and k in NHWC_ORDER:
            v = v.transpose(perm(*NHWC_ORDER[k]))
        dev[k] = cp.asarray(np.ascontiguousarray(v, dtype=np.float32))
    out = conv2d(**dev, **conv_kw(geo), layout=layout, deterministic=det)
    got = {}
    for k, v in out.items():
        assert isinstance(v, cp.ndarray) and v.dtype == np.float32, k
        a = cp.asnumpy(v).astype(np.float64)
        if layout == "NHWC" and k in NHWC_ORDER:
            src, dst = NHWC_ORDER[k]
            a = a.transpose(perm(dst, src))
        got[k] = a
    return got


def assert_close(got: dict, ref: dict, tol: float, what: str) -> None:
    assert set(got) == set(ref), (what, sorted(got), sorted(ref))
    for k, (val, s) in ref.items():
        assert got[k].shape == val.shape, (what, k, got[k].shape, val.shape)
        assert np.isfinite(got[k]).all(), f"{what} {k}: unwritten (NaN) or non-finite elements"
        ratio = np.abs(got[k] - val) / np.where(s > 0, s, 1.0)
        assert float(ratio.max()) < tol, (what, k, float(ratio.max()))


# -- CuPy kernels -------------------------------------------------------------


@gpu
@pytest.mark.parametrize("geo", GEOMETRIES, ids=IDS)
@pytest.mark.parametrize(("layout", "det"), CUPY_VARIANTS)
def test_cupy_matches_float64(cupy: Any, layout: str, det: bool, geo: tuple) -> None:
    host = make_host(geo, seed=GEOMETRIES.index(geo))
    got = run_cupy(cupy, host, geo, layout, det)
    assert_close(got, reference(host, geo), TOL["fp32"], f"{layout} det={det} {geo}")


@gpu
@pytest.mark.parametrize("geo", GEOMETRIES, ids=IDS)
@pytest.mark.parametrize(("layout", "det"), CUPY_VARIANTS)
def test_cupy_exact_on_small_integers(cupy: Any, layout: str, det: bool, geo: tuple) -> None:
    """Every sum is exact (in any order): any indexing slip is a nonzero error."""
    host = make_host(geo, seed=7, integers=True)
    got = run_cupy(cupy, host, geo, layout, det)
    for k, (val, _) in reference(host, geo).items():
        np.testing.assert_array_equal(got[k], val, err_msg=f"{layout} det={det} {k} {geo}")


@gpu
@pytest.mark.parametrize("geo", pick(2, 5, 8, 10))
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_cupy_det_is_bit_identical(cupy: Any, layout: str, geo: tuple) -> None:
    host = make_host(geo, seed=11)
    a, b = run_cupy(cupy, host, geo, layout, True), run_cupy(cupy, host, geo, layout, True)
    for k in a:
        assert a[k].tobytes() == b[k].tobytes(), k


@gpu
@pytest.mark.parametrize("geo", pick(1, 8, 10, 11))
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_cupy_atomic_within_two_order_yardstick(cupy: Any, layout: str, geo: tuple) -> None:
    """Two summation orders of the same n products each lie within gamma_n(u) S
    of the exact sum, so they differ by at most 2 gamma_n(u) S: the atomic
    grad_weight against the fixed-order one, and against itself on a rerun."""
    host = make_host(geo, seed=13)
    g = ConvGeometry.from_shapes(host["x"].shape, host["weight"].shape, **conv_kw(geo))
    _, s = reference(host, geo)["grad_weight"]
    limit = 2 * float(gamma(g.positions, U32)) * s
    det = run_cupy(cupy, host, geo, layout, True)["grad_weight"]
    for _ in range(2):
        atomic = run_cupy(cupy, host, geo, layout, False)["grad_weight"]
        excess = np.abs(atomic - det) - limit
        assert float(excess.max()) <= 0.0, (layout, geo, float(excess.max()))


@gpu
def test_cupy_targets_run_through_their_declared_layouts(cupy: Any) -> None:
    """Each target's fn, fed arrays in the axis orders it declares, gives back
    outputs in the orders it declares (what the runner relies on)."""
    from numoracle.kernels.cupy_conv2d import TARGETS

    assert sorted(t.name for t in TARGETS) == [
        "cupy-fp32-nchw", "cupy-fp32-nchw-det", "cupy-fp32-nhwc", "cupy-fp32-nhwc-det"]
    geo = GEOMETRIES[2]
    host = make_host(geo, seed=3)
    ref = reference(host, geo)
    canon = {"x": "NCHW", "grad_output": "NCHW", "weight": "OIHW", "y": "NCHW",
             "grad_input": "NCHW", "grad_weight": "OIHW"}
    for t in TARGETS:
        assert t.op == "conv2d" and t.backend == "cupy"
        assert t.precision.flush_subnormal_inputs
        assert t.precision.deterministic_runs == t.name.endswith("-det")
        dev = {}
        for k, v in host.items():
            (lay,) = t.layouts[k]
            if k in canon:
                v = v.transpose(perm(canon[k], lay))
            dev[k] = cupy.asarray(np.ascontiguousarray(v, dtype=np.float32))
        out = t.fn(**dev, **conv_kw(geo))
        got = {}
        for k, v in out.items():
            a = cupy.asnumpy(v).astype(np.float64)
            if k in t.output_layouts:
                a = a.transpose(perm(t.output_layouts[k], canon[k]))
            got[k] = a
        assert_close(got, ref, TOL["fp32"], t.name)


@gpu
def test_cupy_refuses_bad_inputs(cupy: Any) -> None:
    from numoracle.kernels.cupy_conv2d import conv2d

    x = cupy.zeros((1, 2, 5, 5), dtype=np.float32)
    w = cupy.zeros((3, 2, 3, 3), dtype=np.float32)
    g = cupy.zeros((1, 3, 3, 3), dtype=np.float32)
    with pytest.raises(InvalidArgument, match="float32 cupy array"):
        conv2d(x.astype(np.float64), w, g)
    with pytest.raises(InvalidArgument, match=r"grad_output\.shape"):
        conv2d(x, w, g, padding=1)
    with pytest.raises(InvalidArgument, match="out_channels"):
        conv2d(x, w, g, out_channels=4)
    with pytest.raises(InvalidArgument, match="unknown parameter"):
        conv2d(x, w, g, strides=2)
    with pytest.raises(InvalidArgument, match="bias=True"):
        conv2d(x, w, g, params={"bias": True})


@gpu
@pytest.mark.parametrize("geo", pick(2, 4, 6, 10))
@pytest.mark.parametrize("module", ["cupy_conv2d", "torch_conv2d_cuda"])
def test_targets_pass_the_oracle(cupy: Any, torch_cuda: Any, module: str, geo: tuple) -> None:
    """End to end: the runner hands each target its declared layouts and params
    and the oracle judges every output (the case's own layouts vary too)."""
    import importlib

    from numoracle.cases.case import Case
    from numoracle.checking.check import check_case

    targets = importlib.import_module(f"numoracle.kernels.{module}").TARGETS
    for layouts in ({}, {"x": "NHWC", "weight": "OHWI", "grad_output": "NHWC"},
                    {"x": "NCHW:F", "weight": "OIHW:F", "grad_output": "S", "bias": "S"}):
        case = Case("conv2d", op_params(geo), seed=GEOMETRIES.index(geo), layouts=layouts)
        for t in targets:
            verdict = check_case(case, t)
            assert verdict.error is None, (t.name, verdict.error)
            assert verdict.passed, (t.name, {k: v.passed for k, v in verdict.outputs.items()})


# -- torch cuDNN ----------------------------------------------------------------


def run_torch(torch: Any, target: Any, host: dict, geo: tuple) -> dict[str, np.ndarray]:
    dev = {k: torch.tensor(v, dtype=torch.float32, device="cuda") for k, v in host.items()}
    out = target.fn(**dev, **conv_kw(geo))
    for k, v in out.items():
        assert v.dtype == torch.float32 and v.device.type == "cuda", k
    return {k: v.detach().cpu().double().numpy() for k, v in out.items()}


@gpu
@pytest.mark.parametrize("geo", pick(1, 2, 3, 4, 6, 8, 10))
def test_torch_cudnn_targets_match_float64(torch_cuda: Any, geo: tuple) -> None:
    from numoracle.kernels.torch_conv2d_cuda import TARGETS

    assert len({t.name for t in TARGETS}) == 8
    host = make_host(geo, seed=5)
    ref = reference(host, geo)
    cudnn = torch_cuda.backends.cudnn
    before = (cudnn.deterministic, cudnn.benchmark, cudnn.enabled)
    for t in TARGETS:
        tol = TOL[t.precision.compute.name]
        assert_close(run_torch(torch_cuda, t, host, geo), ref, tol, t.name)
        assert (cudnn.deterministic, cudnn.benchmark, cudnn.enabled) == before, t.name


@gpu
@pytest.mark.parametrize("geo", pick(8, 10))
def test_torch_cudnn_det_targets_are_bit_identical(torch_cuda: Any, geo: tuple) -> None:
    from numoracle.kernels.torch_conv2d_cuda import TARGETS

    host = make_host(geo, seed=17)
    for t in TARGETS:
        if not t.name.endswith("-det"):
            continue
        a, b = run_torch(torch_cuda, t, host, geo), run_torch(torch_cuda, t, host, geo)
        for k in a:
            assert a[k].tobytes() == b[k].tobytes(), (t.name, k)


# -- geometry (no GPU needed) ---------------------------------------------------


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "kw", "shape_y"),
    [
        ((2, 4, 9, 8), (6, 2, 3, 3), {"stride": 2, "padding": 1}, (2, 6, 5, 4)),
        ((1, 3, 7, 7), (3, 1, 3, 3), {"dilation": 3}, (1, 3, 1, 1)),
        ((1, 9, 8, 3), (6, 3, 2, 3), {"layout": "NHWC", "stride": (2, 1)}, (1, 4, 7, 6)),
        ((3, 2, 5, 1), (4, 2, 5, 1), {"padding": (2, 0)}, (3, 4, 5, 1)),
    ],
)
def test_geometry_shapes(x_shape: tuple, w_shape: tuple, kw: dict, shape_y: tuple) -> None:
    g = ConvGeometry.from_shapes(x_shape, w_shape, **kw)
    assert g.shape("y") == shape_y
    assert g.shape("x") == x_shape and g.shape("weight") == w_shape


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "kw", "match"),
    [
        ((1, 4, 5, 5), (2, 3, 3, 3), {}, "not a multiple"),
        ((1, 4, 5, 5), (3, 2, 3, 3), {}, "O a multiple of groups"),
        ((1, 4, 5, 5), (4, 2, 3, 3), {"groups": 3}, "groups"),
        ((1, 4, 5, 5), (4, 4, 7, 3), {}, "larger than the padded input"),
        ((1, 4, 5, 5), (4, 4, 3, 3), {"dilation": 3}, "larger than the padded input"),
        ((1, 4, 5, 5), (4, 4, 3, 3), {"stride": 0}, "stride=0"),
        ((1, 4, 5, 5), (4, 4, 3, 3), {"padding": -1}, "padding=-1"),
        ((1, 4, 5, 5), (4, 4, 3, 3), {"stride": (1, 2, 3)}, "pair"),
        ((1, 4, 5, 5), (4, 4, 3, 3), {"stride": True}, "stride=True"),
        ((1, 4, 5, 5), (4, 4, 3, 3), {"layout": "CHWN"}, "layout='CHWN'"),
        ((4, 5, 5), (4, 4, 3, 3), {}, "4-D"),
        ((1, 0, 5, 5), (4, 4, 3, 3), {}, "C=0"),
    ],
)
def test_geometry_refuses(x_shape: tuple, w_shape: tuple, kw: dict, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        ConvGeometry.from_shapes(x_shape, w_shape, **kw)


def test_geometry_checks_op_sizes() -> None:
    g = ConvGeometry.from_shapes((2, 4, 9, 8), (6, 2, 3, 3))
    g.check_sizes({"batch": 2, "in_channels": 4, "out_channels": 6, "height": 9, "width": 8,
                   "kernel_size": 3})
    with pytest.raises(InvalidArgument, match="kernel_size"):
        g.check_sizes({"kernel_size": (3, 2)})
    with pytest.raises(InvalidArgument, match="unknown parameter"):
        g.check_sizes({"bias": True})


def op_params(geo: tuple) -> dict[str, Any]:
    """``geo`` as the conv2d op's parameters (what the runner passes as ``params``)."""
    n, c, o, h, w, kernel, stride, padding, dilation, groups, bias = geo
    return {"batch": n, "in_channels": c, "out_channels": o, "height": h, "width": w,
            "kernel_size": _pair(kernel), "stride": _pair(stride), "padding": _pair(padding),
            "dilation": _pair(dilation), "groups": groups, "bias": bias}


def test_resolve_geometry_from_params() -> None:
    geo = GEOMETRIES[6]
    x, w = (3, 3, 17, 5), (4, 3, 1, 3)
    g = resolve_geometry(x, w, has_bias=True, params=op_params(geo))
    assert (g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.Ho, g.Wo) == (3, 3, 0, 1, 1, 2, 6, 1)
    # keywords win over params
    assert resolve_geometry(x, w, has_bias=True, params=op_params(geo), stride=1).Ho == 17
    with pytest.raises(InvalidArgument, match="bias=True"):
        resolve_geometry(x, w, has_bias=False, params=op_params(geo))
    with pytest.raises(InvalidArgument, match="height=18"):
        resolve_geometry(x, w, has_bias=True, params={**op_params(geo), "height": 18})
