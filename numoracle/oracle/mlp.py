"""One training step of a ReLU MLP with softmax cross-entropy, in the error-tracking arithmetic.

:class:`MLP` is ``in -> hidden1 -> hidden2 -> classes`` (``Linear, ReLU, Linear,
ReLU, Linear``), trained on the mean softmax cross-entropy of a batch of ``B``
samples with integer labels, gradients averaged over the batch, then one
optimizer update (:mod:`~numoracle.oracle.optim_math`) per parameter. The
parameters are ``w1`` (hidden1, in), ``b1``, ``w2``, ``b2``, ``w3`` (classes,
hidden2), ``b3``; the state of parameter ``w1`` is named ``w1.exp_avg`` and so on.

Bounds by composition (DESIGN §2):

* the layers: contractions (:func:`~numoracle.oracle.tracked.matmul`, bias as
  one more term, any order), ReLU 1-Lipschitz with no rounding;
* the loss: ``s = z - max z`` (the max is exact; one rounding), ``e = exp(s)``
  (2 ulps), ``se = sum e``, ``log p = s - log(se)``, the label's entries
  summed and divided by ``B``;
* the logit gradient ``(softmax - onehot) / B``: softmax taken both as
  ``e / se`` and as ``exp(log p)`` (torch), the division by ``B`` both before
  and after the subtraction (:func:`~numoracle.oracle.tracked.either`);
* the backward pass both with that scaled gradient (torch) and with the
  unscaled ``softmax - onehot``, summed over the batch and divided by ``B``
  once at the end (per-sample accumulation then one update, the seed-003
  design): the bound covers both;
* the masks of the ReLU backward (:func:`~numoracle.oracle.tracked.relu_mask_mul`):
  where a pre-activation is within its radius of 0 the radius grows by ``|g|``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import InvalidArgument
from .elementwise import amax, div, exp, log
from .optim_math import OptimConfig, optimizer_step, scalar_err
from .precision import PrecisionModel
from .tracked import (
    Tracked,
    either,
    exact,
    matmul,
    mul_scalar,
    relu,
    relu_mask_mul,
    store,
    sub,
    sum_,
)
from .xp import like

__all__ = ["MLP", "PARAMS", "reshape"]

#: the parameters of an :class:`MLP`, in the order of the forward pass
PARAMS = ("w1", "b1", "w2", "b2", "w3", "b3")


def reshape(t: Tracked, fn: Callable[[Any], Any]) -> Tracked:
    """``fn`` (a reshape, an index, a transpose) applied to every array of ``t``."""
    def f(a: Any) -> Any:
        return fn(np.broadcast_to(a, t.value.shape))
    n = f(t.n) if np.ndim(t.n) else t.n
    return replace(t, value=fn(t.value), ref_err=f(t.ref_err), det=f(t.det), prob=f(t.prob),
                   mag=f(t.mag), lo=None if t.lo is None else f(t.lo), n=n)


def _negated(t: Tracked) -> Tracked:
    """``-t``: the value (and its low part) negated, exactly; the radii, the
    magnitude sum and the lengths unchanged (a radius is never negative)."""
    return replace(t, value=-t.value, lo=None if t.lo is None else -t.lo)


@dataclass(frozen=True)
class MLP:
    """The network, its optimizer and the precision model its kernel claims.

    Parameters
    ----------
    sizes : tuple of int
        ``(in_features, hidden1, hidden2, classes)``.
    cfg : OptimConfig
        The optimizer applied once per batch.
    model : PrecisionModel
        Bounds every contraction and elementwise operation (see the module docstring).
    """

    sizes: tuple[int, int, int, int]
    cfg: OptimConfig
    model: PrecisionModel

    def __post_init__(self) -> None:
        if len(self.sizes) != 4 or any(
                isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1
                for s in self.sizes):
            raise InvalidArgument(f"sizes={self.sizes!r} must be four positive ints: "
                                  "(in_features, hidden1, hidden2, classes)")

    def param_shapes(self) -> dict[str, tuple[int, ...]]:
        i, h1, h2, c = self.sizes
        return {"w1": (h1, i), "b1": (h1,), "w2": (h2, h1), "b2": (h2,), "w3": (c, h2),
                "b3": (c,)}

    def state_names(self) -> tuple[str, ...]:
        """Names of the optimizer state tensors (``w1.exp_avg``, ...)."""
        return tuple(f"{p}.{s}" for p in PARAMS for s in self.cfg.state_names)

    def with_model(self, model: PrecisionModel) -> MLP:
        return replace(self, model=model)

    # -- forward and backward ------------------------------------------------------
    def gradients(self, x: Tracked, labels: np.ndarray,
                  params: Mapping[str, Tracked]) -> dict[str, Tracked]:
        """``loss`` (shape ``()``), ``logits`` and ``grad_<p>`` for every parameter."""
        m = self.model
        w1, b1, w2, b2, w3, b3 = (params[k] for k in PARAMS)
        batch = x.shape[0]
        a1 = matmul(x, w1.T, m, bias=b1)
        r1 = relu(a1)
        a2 = matmul(r1, w2.T, m, bias=b2)
        r2 = relu(a2)
        z = matmul(r2, w3.T, m, bias=b3)
        s = sub(z, amax(z, axis=1, keepdims=True), m)
        e = exp(s, m)
        se = sum_(e, axis=1, model=m)
        col = reshape(se, lambda v: v.reshape(-1, 1))
        logp = sub(s, reshape(log(se, m), lambda v: v.reshape(-1, 1)), m)
        rows = like(np.arange(batch), labels)  # (host constants where the labels are)
        picked = reshape(logp, lambda v: v[rows, labels].reshape(1, batch))
        total = matmul(picked, exact(like(np.ones((batch, 1)), x.value)), m)
        inv_err = scalar_err(1.0 / batch, m)
        loss = mul_scalar(_negated(reshape(total, lambda v: v.reshape(()))), batch, m,
                          divide=True, c_rel_err=inv_err)
        soft = either(div(e, col, m), exp(logp, m))
        onehot = exact(like(np.eye(z.shape[1]), z.value)[labels])

        def scaled(t: Tracked) -> Tracked:
            return mul_scalar(t, batch, m, divide=True, c_rel_err=inv_err)

        dz_unscaled = sub(soft, onehot, m)
        dz = either(sub(scaled(soft), scaled(onehot), m), scaled(dz_unscaled))
        before = self._backward(dz, x, (a1, r1, a2, r2), params)
        after = {k: scaled(v) for k, v in
                 self._backward(dz_unscaled, x, (a1, r1, a2, r2), params).items()}
        out = {k: either(before[k], after[k]) for k in before}
        out["loss"] = loss
        out["logits"] = z
        return out

    def _backward(self, dz: Tracked, x: Tracked, acts: tuple[Tracked, ...],
                  params: Mapping[str, Tracked]) -> dict[str, Tracked]:
        m = self.model
        a1, r1, a2, r2 = acts
        g = {"grad_w3": matmul(dz.T, r2, m), "grad_b3": sum_(dz, axis=0, model=m)}
        d2 = relu_mask_mul(matmul(dz, params["w3"], m), a2)
        g["grad_w2"], g["grad_b2"] = matmul(d2.T, r1, m), sum_(d2, axis=0, model=m)
        d1 = relu_mask_mul(matmul(d2, params["w2"], m), a1)
        g["grad_w1"], g["grad_b1"] = matmul(d1.T, x, m), sum_(d1, axis=0, model=m)
        return g

    # -- one training step -------------------------------------------------------
    def step(self, x: Tracked, labels: np.ndarray, params: Mapping[str, Tracked],
             state: Mapping[str, Tracked], k: int) -> dict[str, Tracked]:
        """Step ``k`` (1-based) from ``params`` and the optimizer ``state`` of step
        ``k - 1``: ``loss``, ``grad_<p>``, the updated parameters and state."""
        m = self.model
        out: dict[str, Tracked] = {}
        grads = self.gradients(x, labels, params)
        out["loss"] = store(grads["loss"], m)
        for p in PARAMS:
            sub_state = {s: state[f"{p}.{s}"] for s in self.cfg.state_names
                         if f"{p}.{s}" in state}
            new_p, new_s = optimizer_step(self.cfg, params[p], grads[f"grad_{p}"], sub_state,
                                          k, m)
            out[f"grad_{p}"] = store(grads[f"grad_{p}"], m)
            out[p] = store(new_p, m)
            for s, v in new_s.items():
                out[f"{p}.{s}"] = store(v, m)
        return out
