"""KAN ``grad_input`` when a kernel scales the upstream gradient by ``spline_weight``
first, as the layer's definition reads (``(g sw) sum_c coef B'_c``).

Pinned from the CuPy KAN target on an H100 (``limits`` sweep, max_elements 256):
``kan(batch=87, in=1, out=1, grid_size=7, spline_order=3) fp32 special seed=85``,
``spline_weight = -2^-126`` (the smallest normal) and ``coef[0] = -1.3e36``. The
kernel's ``g * sw`` falls below the normal range and ``-ftz=true`` flushes it:
the term ``sw coef B'`` (up to 0.03) is lost, and ``grad_input`` is 0 where the
exact value is 1.9e-4. The oracle formed ``coef * sw`` first (efficient-kan's
order) and judged it a bug at ratio 2.1e5; it now allows ``tiny |sum_c coef B'_c|``
for each ``g sw`` that underflows, and only there.
"""

from __future__ import annotations

from pathlib import Path

import mpmath
import numpy as np

from numoracle.checking.check import _reference_inputs, judge
from numoracle.checking.verdict import OutputVerdict
from numoracle.oracle.bspline import derivative_mp
from numoracle.oracle.ops import get_op
from numoracle.store.repro import Repro, load_repro

CASE = Path(__file__).parent.parent / "data" / "cupy-kan-scaled-underflow"


def _verdict(r: Repro, grad_input: np.ndarray) -> OutputVerdict:
    return judge(r.case, r.model, r.inputs, {**r.got, "grad_input": grad_input},
                 with_diagnosis=False)["grad_input"]


def test_the_flushed_product_is_within_the_bound() -> None:
    r = load_repro(CASE)
    v = _verdict(r, r.got["grad_input"])
    assert v.passed, v.worst
    # the allowance is used, not a blanket pass: the worst element is near its bound
    assert v.worst_ratio_det > 0.5


def test_twice_the_loss_is_caught() -> None:
    """The worst element moved twice as far from the exact value as the flush
    moved it (a kernel that subtracts the term rather than losing it)."""
    r = load_repro(CASE)
    ref = get_op("kan").reference(_reference_inputs(r.case, r.inputs), r.case.params, r.model,
                                  ("grad_input",))["grad_input"].to_host()
    got = r.got["grad_input"]
    err = np.abs(got - ref.value)
    with np.errstate(invalid="ignore"):
        b = int(np.argmax(np.nan_to_num(err / ref.bound(), nan=0.0, posinf=0.0)))
    doubled = got.copy()
    doubled.flat[b] = ref.value.flat[b] + 2.0 * (got.flat[b] - ref.value.flat[b])
    v = _verdict(r, doubled)
    assert not v.passed
    assert 1.5 < v.worst_ratio_det < 2.5


def test_the_exact_gradient_against_mpmath() -> None:
    """At the worst element: the exact ``grad_input`` (mpmath, 60 digits) lies within
    the reference's own error; the kernel's 0 is what a flush of ``g * sw`` and
    ``g * base_weight`` gives; the new bound holds it and is within 2x of it."""
    r = load_repro(CASE)
    a = r.inputs
    ref = get_op("kan").reference(_reference_inputs(r.case, a), r.case.params, r.model,
                                  ("grad_input",))["grad_input"].to_host()
    got = r.got["grad_input"]
    with np.errstate(invalid="ignore"):
        ratio = np.abs(got[:, 0] - ref.value[:, 0]) / ref.bound()[:, 0]
    b = int(np.argmax(np.nan_to_num(ratio, nan=0.0)))
    mpmath.mp.dps = 60
    x, g = mpmath.mpf(a["x"][b, 0]), mpmath.mpf(a["grad_output"][b, 0])
    sw, bw = mpmath.mpf(a["spline_weight"][0, 0]), mpmath.mpf(a["base_weight"][0, 0])
    d = derivative_mp(x, a["grid"][0], r.case.params["spline_order"])
    sig = 1 / (1 + mpmath.exp(-x))
    spline = mpmath.fsum(mpmath.mpf(c) * dc for c, dc in zip(a["coef"][0, 0], d, strict=True))
    exact = g * (bw * sig * (1 + x * (1 - sig)) + sw * spline)
    assert abs(mpmath.mpf(ref.value[b, 0]) - exact) <= mpmath.mpf(ref.ref_err[b, 0])
    tiny = 2.0**-126
    for w in ("spline_weight", "base_weight"):  # both products below the normal range
        assert 0 < abs(a["grad_output"][b, 0] * a[w][0, 0]) < tiny
    assert got[b, 0] == 0.0
    assert abs(float(exact)) <= ref.det[b, 0] <= 2.0 * abs(float(exact))
