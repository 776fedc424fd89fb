"""nll_loss_backward's placement: the samples' shares at their targets, 0 elsewhere,
a radius or magnitude that is 0 at every sample kept as an exact input's read-only
broadcast zero (no array of the scores' size), the others placed densely."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.library.losses import nll_loss_backward_rule
from numoracle.oracle.traced.rules import RuleContext
from numoracle.oracle.tracked import bounded, exact

FIELDS = ("value", "det", "prob", "ref_err", "mag")


def _dense(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.array(np.broadcast_to(a, shape))


@pytest.mark.parametrize(("reduction", "total", "grad"), [
    (1, 8.0, 1.0),  # mean over 8 samples: exact shares, zero radii
    (1, 3.0, 1.0),  # mean over a total of 3: rounded shares, radii at the targets
    (2, 1.0, 0.75),  # sum: exact shares
    (2, 1.0, 0.7),  # sum: shares rounded to the format, radii at the targets
])
def test_placed_shares(reduction: int, total: float, grad: float) -> None:
    rng = np.random.default_rng(0)
    x = exact(rng.standard_normal((8, 50)))
    target = rng.integers(0, 50, 8)
    target[3] = -100  # ignored
    ctx = RuleContext(get_model("fp32"))
    out = nll_loss_backward_rule(ctx, exact(np.asarray(grad)), x, target, None, reduction,
                                 -100, exact(np.asarray(total)))
    rows = np.arange(8)[target != -100]
    cols = target[target != -100]
    off = np.ones((8, 50), dtype=bool)
    off[rows, cols] = False
    want = -grad / total if reduction == 1 else -grad
    assert np.all(out.value[rows, cols] == want) and np.all(out.value[off] == 0.0)
    assert np.all(out.value[3] == 0.0)
    for f in FIELDS[1:]:
        a = getattr(out, f)
        full = _dense(a, out.shape)
        assert np.all(full[off] == 0.0), f
        if not full.any():  # a zero field: the broadcast zero, no array of the scores' size
            assert a.strides == (0, 0) and not a.flags.writeable, f
    exact_shares = total == 8.0 or grad == 0.75
    assert (not _dense(out.det, out.shape).any()) == exact_shares
    assert _dense(out.mag, out.shape)[rows, cols].all()


def test_tracked_grad_radii_placed() -> None:
    """A gradient with radii: each sample's radii at its target, 0 elsewhere."""
    x = exact(np.zeros((4, 6)))
    target = np.array([1, 5, 0, 2])
    g = bounded(np.asarray(0.5), np.asarray(1e-3))
    out = nll_loss_backward_rule(RuleContext(get_model("fp32")), g, x, target, None, 1, -100,
                                 exact(np.asarray(4.0)))
    det = _dense(out.det, out.shape)
    assert np.all(det[np.arange(4), target] > 0) and det.sum() == det[np.arange(4), target].sum()
