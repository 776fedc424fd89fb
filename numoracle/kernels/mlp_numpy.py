"""A float32 MLP trainer on the host in the design of seed 003, and its optimizers.

:class:`Trainer` trains the network of :class:`~numoracle.oracle.mlp.MLP` as the
CUDA design does: phase 1 computes each sample's gradient and adds it into
zeroed gradient buffers (the sum over the batch, in sample order); phase 2
divides the buffers by the batch size and applies one optimizer update
(:func:`update`, torch's formulas in float32) per batch.

``bugs`` switches on the defects the bug zoo plants (each must be caught):

* ``"per_sample_update"``: the optimizer runs after every sample, on that
  sample's gradient (the seed-003 bug);
* ``"not_averaged"``: the gradient is not divided by the batch size;
* ``"buffers_not_zeroed"``: the gradient buffers keep the previous batch's sum;
* ``"phase_race"``: the update reads the buffers when only the first half of
  the batch has been added (the update launched before the accumulation finished).

``update(..., bugs)`` also plants the optimizer defects: ``"bias_correction_off"``
(Adam's corrections use step ``t + 1``), ``"eps_in_sqrt"`` (``sqrt(v_hat + eps)``),
``"momentum_init_zero"`` (the momentum buffer starts at 0, so step 1 damps the
gradient: ``(1 - dampening) g``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..oracle.mlp import PARAMS
from ..oracle.optim_math import OptimConfig

__all__ = ["update", "Trainer", "BUGS", "UPDATE_BUGS"]

F32 = np.float32
BUGS = ("per_sample_update", "not_averaged", "buffers_not_zeroed", "phase_race")
UPDATE_BUGS = ("bias_correction_off", "eps_in_sqrt", "momentum_init_zero")


def update(cfg: OptimConfig, p: np.ndarray, g: np.ndarray, state: dict[str, np.ndarray],
           t: int, bugs: frozenset[str] = frozenset()) -> np.ndarray:
    """One optimizer step in float32 (torch's formulas); ``state`` updated in place.

    Returns the new parameter. ``state`` holds :attr:`OptimConfig.state_names`
    after step ``t - 1`` (empty at ``t = 1``)."""
    p, g = p.astype(F32), g.astype(F32)
    c = {k: F32(v) for k, v in (("lr", cfg.lr), ("wd", cfg.weight_decay),
                                ("mu", cfg.momentum), ("damp", 1.0 - cfg.dampening))}
    if cfg.optimizer == "sgd":
        if cfg.weight_decay:
            g = g + c["wd"] * p
        if cfg.momentum:
            if t == 1 and "momentum_init_zero" not in bugs:
                buf = g.copy()
            else:
                prev = state.get("momentum_buffer", np.zeros_like(g))
                buf = c["mu"] * prev + c["damp"] * g
            state["momentum_buffer"] = buf
            g = g + c["mu"] * buf if cfg.nesterov else buf
        return (p - c["lr"] * g).astype(F32)
    if cfg.weight_decay:
        if cfg.optimizer == "adamw":
            p = p * F32(1.0 - cfg.lr * cfg.weight_decay)
        else:
            g = g + c["wd"] * p
    zero = np.zeros_like(g)
    m = state.get("exp_avg", zero) if t > 1 else zero
    v = state.get("exp_avg_sq", zero) if t > 1 else zero
    m = m + F32(1.0 - cfg.beta1) * (g - m)
    v = F32(cfg.beta2) * v + F32(1.0 - cfg.beta2) * g * g
    state["exp_avg"], state["exp_avg_sq"] = m, v
    if cfg.amsgrad:
        vmax = state.get("max_exp_avg_sq", zero) if t > 1 else zero
        v = state["max_exp_avg_sq"] = np.maximum(vmax, v)
    tc = t + 1 if "bias_correction_off" in bugs else t
    bc1, bc2 = 1.0 - cfg.beta1**tc, 1.0 - cfg.beta2**tc
    if "eps_in_sqrt" in bugs:
        denom = np.sqrt(v / F32(bc2) + F32(cfg.eps))
    else:
        denom = np.sqrt(v) / F32(math.sqrt(bc2)) + F32(cfg.eps)
    return (p - F32(cfg.lr / bc1) * (m / denom)).astype(F32)


def _relu(a: np.ndarray) -> np.ndarray:
    return np.maximum(a, F32(0))


class Trainer:
    """The seed-003 two-phase trainer on the host (see the module docstring).

    Parameters
    ----------
    cfg : OptimConfig
        The optimizer.
    bugs : collection of str
        Defects to plant (:data:`BUGS`, :data:`UPDATE_BUGS`); empty for the correct trainer.
    """

    def __init__(self, cfg: OptimConfig, bugs: Any = ()) -> None:
        self.cfg = cfg
        self.bugs = frozenset(bugs)
        unknown = self.bugs - set(BUGS) - set(UPDATE_BUGS)
        if unknown:
            from ..errors import InvalidArgument

            raise InvalidArgument(f"bugs={sorted(unknown)} are unknown; use {BUGS + UPDATE_BUGS}")
        self.buffers: dict[str, np.ndarray] = {}

    def sample_grads(self, params: Mapping[str, np.ndarray], x: np.ndarray,
                     label: int) -> tuple[float, dict[str, np.ndarray]]:
        """The loss and the (unscaled) gradient of one sample, in float32."""
        w1, b1, w2, b2, w3, b3 = (params[k] for k in PARAMS)
        a1 = w1 @ x + b1
        r1 = _relu(a1)
        a2 = w2 @ r1 + b2
        r2 = _relu(a2)
        z = w3 @ r2 + b3
        s = z - z.max()
        e = np.exp(s)
        se = e.sum(dtype=F32)
        loss = float(np.log(se) - s[label])
        dz = e / se
        dz[label] -= F32(1)
        d2 = (w3.T @ dz) * (a2 > 0)
        d1 = (w2.T @ d2) * (a1 > 0)
        return loss, {"w3": np.outer(dz, r2), "b3": dz, "w2": np.outer(d2, r1), "b2": d2,
                      "w1": np.outer(d1, x), "b1": d1}

    def step(self, params: Mapping[str, np.ndarray], state: Mapping[str, np.ndarray],
             x: np.ndarray, labels: np.ndarray, t: int) -> dict[str, np.ndarray]:
        """Step ``t`` on the batch ``x`` (B, in), ``labels`` (B,) ints; returns
        ``loss``, ``grad_<p>`` (the averaged gradient the update used), the new
        parameters and state (``w1.exp_avg`` ...)."""
        cur = {k: np.array(params[k], dtype=F32) for k in PARAMS}
        opt = {k: {s: np.array(state[f"{k}.{s}"], dtype=F32) for s in self.cfg.state_names
                   if f"{k}.{s}" in state} for k in PARAMS}
        x = np.asarray(x, dtype=F32)
        batch = x.shape[0]
        if "buffers_not_zeroed" not in self.bugs or not self.buffers:
            self.buffers = {k: np.zeros_like(cur[k]) for k in PARAMS}
        buf = self.buffers
        losses = F32(0)
        cut = (batch + 1) // 2 if "phase_race" in self.bugs and batch > 1 else batch
        used: dict[str, np.ndarray] = {}
        for b in range(batch):
            loss, g = self.sample_grads(cur, x[b], int(labels[b]))
            losses += F32(loss)
            if "per_sample_update" in self.bugs:
                for k in PARAMS:
                    cur[k] = update(self.cfg, cur[k], g[k], opt[k], t, self.bugs)
                    used[k] = g[k]
                continue
            for k in PARAMS:
                buf[k] += g[k]
            if b + 1 == cut and cut < batch:
                used = {k: v.copy() for k, v in buf.items()}  # what the early update reads
        out: dict[str, np.ndarray] = {"loss": np.asarray(losses / F32(batch), dtype=F32)}
        if "per_sample_update" not in self.bugs:
            read = used if used else buf
            div = F32(1) if "not_averaged" in self.bugs else F32(batch)
            for k in PARAMS:
                g_avg = (read[k] / div).astype(F32)
                used[k] = g_avg
                cur[k] = update(self.cfg, cur[k], g_avg, opt[k], t, self.bugs)
        for k in PARAMS:
            out[k] = cur[k]
            out[f"grad_{k}"] = used[k]
            for s, v in opt[k].items():
                out[f"{k}.{s}"] = v
        return out
