"""Pinned cases of three false alarms on correct targets, drawn under small size
limits (``max_elements=1024``), and the oracle rules that now judge them.

* KAN ``grad_coef`` (torch CPU fp32 and fp64, ``special`` seed 215): the upstream
  gradient is the smallest subnormal and a spline scale is ``-1.3e36``; autograd
  forms ``g * B_c`` first (below the normal range: rounded to 0 or to the
  subnormal itself) and then scales it, so the error is absolute in ``g * B_c``
  and relative to nothing in the result. The nested contraction now bounds an
  underflow scaled by a later factor; mpmath gives the exact gradient.
* MLP training (numpy fp32, Adam, ``special`` seed 4): step 4's forward pass
  overflows in float32 (``x = -1.3e36`` meets ``w1 = -1.3e36``), every logit
  gradient is NaN, and the ReLU backward multiplies by the mask: ``NaN * 0``. The
  oracle had a NaN radius on the pre-activation (so it took the mask as certain)
  and a masked gradient whose radius was infinite as exactly 0.
* KAN chain (torch fp64, CUDA and CPU alike, ``special`` seed 0, drawn by the GPU
  sweep under the default and the 262,144-element limits): ``grad_input_2`` NaN
  where the oracle's value is finite. Layer 1's output is within its bound but
  far from the oracle's (``y_1[55, 1]``: the kernel's ``-3.3e258`` beside the
  oracle's 0 with a radius of ``3.8e293``); autograd's recursion weights at the
  kernel's own ``x`` then multiply past the float64 range and meet a zero basis
  (``inf * 0``). The rule that leaves such elements unjudged had measured the
  weights at the oracle's ``x`` only; it now widens them by the radius of ``x``.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.checking.check import check_case
from numoracle.oracle.bspline import bases_mp
from numoracle.oracle.nested import nested_contraction
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import gamma, get_model
from numoracle.oracle.tracked import Tracked, exact, relu_mask_mul

KAN_263 = {"family": "special", "layouts": {"coef": "F", "grid": "F"}, "op": "kan",
           "overlays": [], "seed": 215,
           "params": {"batch": 1, "grid_size": 14, "in_features": 5, "out_features": 1,
                      "spline_order": 3}}
MLP_225 = {"family": "special", "layouts": {}, "op": "mlp_train", "overlays": [], "seed": 4,
           "storage": "fp32",
           "params": {"amsgrad": False, "batch": 2, "classes": 3, "dampening": 0.0,
                      "eps": 0.001, "hidden1": 4, "hidden2": 4, "in_features": 1, "lr": 0.01,
                      "momentum": 0.0, "nesterov": False, "optimizer": "adam", "steps": 4,
                      "weight_decay": 0.0}}


KAN_CHAIN_0 = {"family": "special", "layouts": {}, "op": "kan_chain", "overlays": [], "seed": 0,
               "storage": "fp64",
               "params": {"batch": 62, "grid_size": 4, "layers": 3, "spline_order": 3,
                          "widths": [5, 5, 7, 1]}}


def _kan_case(storage: str) -> Case:
    return Case.from_dict({**KAN_263, "storage": storage})


@pytest.mark.parametrize("storage", ["fp32", "fp64"])
def test_kan_case_263_passes(storage: str) -> None:
    pytest.importorskip("torch")
    from numoracle.kernels import get_target

    v = check_case(_kan_case(storage), get_target(f"torch-cpu-{storage}", "kan"))
    assert v.passed, v.message()
    assert v.outputs["grad_coef"].worst_ratio_det > 0.1  # the underflow is judged, not skipped


@pytest.mark.parametrize("storage", ["fp32", "fp64"])
def test_kan_case_263_underflow_against_mpmath(storage: str) -> None:
    """The exact ``grad_coef[0, 4, c] = g B_c(x) sw`` (mpmath, 60 digits): the
    reference holds it within its own error; autograd's value (``g * B_c``
    rounded below the normal range, then scaled) errs by far more than the old
    bound ``gamma_h S + (h + 1) 2^emin`` and by no more than the new one."""
    case = _kan_case(storage)
    a = case.inputs()
    model = get_model(storage)
    fmt = model.accumulate
    ref = get_op("kan").reference(a, case.params, model, outputs=("grad_coef",))["grad_coef"]
    mpmath.mp.dps = 60
    g, sw = mpmath.mpf(a["grad_output"][0, 0]), mpmath.mpf(a["spline_weight"][0, 4])
    assert a["grad_output"][0, 0] == 2.0 ** (fmt.emin - fmt.t)  # the smallest subnormal
    bases = bases_mp(mpmath.mpf(a["x"][0, 4]), a["grid"][4], 3)
    dtype = np.float32 if storage == "fp32" else np.float64
    h = 1 + 2  # one term: height 0 + 0, two product roundings
    for c in range(3):
        exact_v = g * bases[c] * sw
        assert abs(mpmath.mpf(ref.value[0, 4, c]) - exact_v) <= mpmath.mpf(ref.ref_err[0, 4, c])
        # autograd: (g * B_c) rounded in the storage format (below 2^emin), then * sw
        gb = dtype(a["grad_output"][0, 0]) * dtype(float(bases[c]))
        kernel = float(gb * dtype(a["spline_weight"][0, 4]))
        err = abs(mpmath.mpf(kernel) - exact_v)
        s = abs(exact_v)
        old = float(gamma(np.asarray(h), model.acc_unit())) * s + (h + 1) * fmt.tiny
        assert err > 1e5 * old  # the old bound missed it by orders of magnitude
        assert err <= ref.det[0, 4, c]
        # not widened beyond the analysis: twice the term's magnitude as the oracle
        # knows it (its float64 sum may underflow too: 2^-1074 M more), the bases'
        # radii and the roundings of the store adding a relative 1e-5 at most
        m = abs(a["spline_weight"][0, 4]) + 2.0
        s_known = float(s) + 2.0**-1074 * m
        assert ref.det[0, 4, c] <= 2.0 * (1 + 1e-5) * s_known + 2 * float(old)


@pytest.mark.parametrize("storage", ["fp32", "fp64"])
def test_nested_contraction_covers_underflow_before_the_last_factor(storage: str) -> None:
    model = get_model(storage)
    dtype = np.float32 if storage == "fp32" else np.float64
    tiny_sub = 2.0 ** (model.accumulate.emin - model.accumulate.t)
    a, b, c = (exact(np.array([v])) for v in (tiny_sub, 0.4, -1.3e36 if storage == "fp32"
                                              else -7e305))
    t = nested_contraction("i,i,i->", a, b, c, model, outer=1, inner=1)
    va, vb, vc = (dtype(x.value[0]) for x in (a, b, c))
    for got in ((va * vb) * vc, va * (vb * vc), (va * vc) * vb):
        assert abs(float(got) - t.value) <= t.det + t.ref_err
    # normal-range factors: the new term stays below the relative rounding bound
    n = nested_contraction("i,i,i->", exact(np.array([0.3])), exact(np.array([0.7])),
                           exact(np.array([1.5])), model, outer=1, inner=1)
    assert n.det <= 8 * model.acc_unit() * 0.315 + 6 * model.accumulate.tiny


def test_mlp_case_225_passes() -> None:
    from numoracle.kernels import get_target

    case = Case.from_dict(MLP_225)
    v = check_case(case, get_target("numpy-fp32", "mlp_train"))
    assert v.passed, v.message()
    # the kernel's NaN at b2[3, 2] (step 4) meets a bound that does not judge it: the
    # logits may overflow from step 1 on (b3 and w3 hold 1.3e36), so every gradient
    # the ReLU masks may be NaN * 0 in this kernel
    ref = get_op("mlp_train").reference(case.inputs(), case.params, get_model("fp32"),
                                        outputs=("b2",))["b2"]
    assert not np.isfinite(ref.det[3, 2])


def _t(value: list[float], det: list[float], ref: list[float] | None = None) -> Tracked:
    t = exact(np.array(value))
    return Tracked(value=t.value, ref_err=np.array(ref or [0.0] * len(value)),
                   det=np.array(det), prob=np.array(det), mag=np.abs(t.value), n=1)


def test_relu_mask_nan_radius_leaves_the_sign_unsure() -> None:
    g = _t([2.0], [1e-7])
    out = relu_mask_mul(g, _t([-0.36], [np.inf], [np.nan]))
    assert out.det[0] >= 2.0  # covers the kernel's 0 and its 2


def test_relu_mask_masked_unbounded_gradient_is_not_judged() -> None:
    g = _t([0.5, 0.5, 0.5], [np.inf, 1e-7, 1e-7])
    out = relu_mask_mul(g, _t([-1.0, -1.0, 1.0], [0.0, 0.0, 0.0]))
    assert np.isinf(out.det[0])  # NaN * 0 in a kernel that multiplies by the mask
    assert out.det[1] == 0.0 and out.value[1] == 0.0  # a finite gradient masked exactly
    assert out.det[2] == pytest.approx(1e-7)


def test_nested_contraction_partial_precision_subnormal_product() -> None:
    """``g B`` lands on the subnormal grid with 9 significant bits (a relative
    error of ``4e-4``), then a scale of ``2^100`` brings it back to ``1e-12``:
    a normal-range result off by far more than ``gamma_h S`` (the first report
    of issue 17: an error of ``7.4e-10`` on ``-9.18e-5``)."""
    model = get_model("fp32")
    a, b, c = (exact(np.array([v], dtype=np.float64))
               for v in (3 * 2.0**-140, float(np.float32(0.3)), float(np.float32(1.3 * 2.0**100))))
    t = nested_contraction("i,i,i->", a, b, c, model, outer=1, inner=1)
    va, vb, vc = (np.float32(x.value[0]) for x in (a, b, c))
    got = float((va * vb) * vc)
    err = abs(got - float(t.value))
    old = float(gamma(np.asarray(3), model.acc_unit())) * abs(float(t.value)) \
        + 4 * model.accumulate.tiny
    assert err > 100 * old
    assert err <= t.det


def test_kan_chain_adjoint_overflowing_at_the_kernels_own_input() -> None:
    case = Case.from_dict(KAN_CHAIN_0)
    a = case.inputs()
    ref = get_op("kan_chain").reference(a, case.params, get_model("fp64"))
    y1, gi2 = ref["y_1"], ref["grad_input_2"]
    # the oracle's own value is finite, and a kernel's y_1 anywhere within the radius
    # is correct; mpmath: at x = y_1 - radius the three levels' weights (x - t) / den
    # multiply past the float64 range, so autograd's adjoint overflows there
    assert np.isfinite(gi2.value[55, 1]) and y1.value[55, 1] == 0.0
    mpmath.mp.dps = 30
    x = mpmath.mpf(y1.value[55, 1]) - mpmath.mpf(y1.det[55, 1])
    t = a["grid_2"][1]
    weights = [abs(x - mpmath.mpf(t[0])) / mpmath.mpf(t[p] - t[0]) for p in (1, 2, 3)]
    assert weights[0] * weights[1] * weights[2] > mpmath.mpf(np.finfo(np.float64).max)
    assert not np.isfinite(gi2.det[55, 1])  # not judged
    assert np.isfinite(gi2.det).sum() > 0  # elements with small radii still are
    torch = pytest.importorskip("torch")
    from numoracle.kernels import get_target

    target = get_target("torch-cpu-fp64", "kan_chain")
    got = target.fn(**{k: torch.as_tensor(v) for k, v in a.items()})
    assert torch.isnan(got["grad_input_2"][55, 1])  # the kernel's inf * 0
    v = check_case(case, target)
    assert v.passed, v.message()
