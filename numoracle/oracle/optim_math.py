"""Optimizer updates in the error-tracking arithmetic: SGD, Adam and AdamW as torch defines them.

:class:`OptimConfig` holds the hyperparameters of one optimizer; :func:`optimizer_step`
applies its update to a tracked parameter, gradient and optimizer state and
returns them updated, each element with its bound (DESIGN §2). The formulas are
those of ``torch.optim`` (``sgd.py``, ``adam.py``, ``adamw.py``):

SGD (momentum ``mu``, dampening ``tau``, weight decay ``wd``, Nesterov)::

    g = grad + wd * p
    buf = g                              at step 1 (no dampening on the first step)
    buf = mu * buf + (1 - tau) * g       afterwards
    g = g + mu * buf  (Nesterov)  or  g = buf
    p = p - lr * g

Adam (``weight_decay`` as an L2 term in the gradient) and AdamW (decoupled,
``p = p * (1 - lr * wd)`` first), at step ``t``::

    m = beta1 * m + (1 - beta1) * g      (torch: m.lerp_(g, 1 - beta1))
    v = beta2 * v + (1 - beta2) * g * g
    vmax = max(vmax, v)                  (amsgrad; then vmax replaces v below)
    denom = sqrt(v) / sqrt(1 - beta2^t) + eps
    p = p - (lr / (1 - beta1^t)) * m / denom

Bounds. Every elementwise operation rounds once in the accumulation format
(see :mod:`~numoracle.oracle.tracked` and :mod:`~numoracle.oracle.elementwise`);
the kernel may hold every hyperparameter and every derived scalar rounded
to the storage format (relative error ``u`` unless the value is a value of the
format). ``1 - beta1`` and ``1 - beta2`` may be computed from the rounded
betas, so their relative error is ``u beta / (1 - beta) + 2u``
(:func:`one_minus_err`): torch's fused CUDA Adam does so (it uses the float32
``1 - fl(0.999)``, hundreds of u away from ``0.001``). The bias
corrections ``1 - beta^t`` may be computed in float32 (fused kernels): their
relative error is taken as ``((t + 4) u beta^t + 2u) / (1 - beta^t)``
(``beta`` rounded, ``pow``, the subtraction that cancels), halved under the
square root. ``eps`` enters as its float32 copy (radius ``u eps``). Where
implementations use different but equivalent formulas (``lerp`` against the
weighted sum for ``m``; torch's foreach and fused kernels) the reference takes
both and keeps the larger radius (:func:`~numoracle.oracle.tracked.either`),
so one bound covers the default, foreach and fused variants alike.

Examples
--------
>>> import numpy as np
>>> from numoracle.oracle.precision import get_model
>>> from numoracle.oracle.tracked import exact
>>> cfg = OptimConfig("sgd", lr=0.5)
>>> p, _ = optimizer_step(cfg, exact(np.array([1.0])), exact(np.array([1.0])), {}, 1,
...                       get_model("fp32"))
>>> float(p.value[0]), float(p.det[0])
(0.5, 0.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidArgument
from .elementwise import div, maximum, mul, sqrt, widen
from .formats import representable
from .precision import PrecisionModel
from .tracked import Tracked, add, either, exact, mul_scalar, sub

__all__ = ["OptimConfig", "OPTIMIZERS", "optimizer_step", "scalar_err", "bias_correction_err",
           "one_minus_err"]

OPTIMIZERS = ("sgd", "adam", "adamw")


def scalar_err(c: float, model: PrecisionModel) -> float:
    """Relative error of the kernel's copy of the scalar ``c``: 0 where ``c`` is a
    value of the storage format, else its unit roundoff (the kernel may round it)."""
    return 0.0 if bool(representable(np.asarray(c), model.storage)) else model.storage.u


def bias_correction_err(beta: float, t: int, model: PrecisionModel) -> float:
    """Relative error of a kernel's ``1 - beta^t`` (see the module docstring)."""
    u = model.acc_unit()
    bt = beta**t
    return min(((t + 4) * u * bt + 2 * u) / (1.0 - bt), 0.5)


def _real(name: str, value: Any, lo: float, hi: float, hint: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
            or not (lo <= float(value) <= hi):
        raise InvalidArgument(f"{name}={value!r} must be a number in [{lo}, {hi}]; {hint}")
    return float(value)


@dataclass(frozen=True)
class OptimConfig:
    """Hyperparameters of one optimizer, with torch's meaning and defaults.

    Parameters
    ----------
    optimizer : str
        ``"sgd"``, ``"adam"`` or ``"adamw"``.
    lr : float
        Learning rate (> 0).
    momentum, dampening : float
        SGD only: momentum in [0, 1) and dampening in [0, 1].
    nesterov : bool
        SGD only: Nesterov momentum (needs ``momentum > 0`` and ``dampening == 0``).
    weight_decay : float
        L2 penalty (SGD, Adam) or decoupled decay (AdamW), >= 0.
    beta1, beta2, eps : float
        Adam and AdamW only.
    amsgrad : bool
        Adam and AdamW only: keep the running maximum of ``v``.
    """

    optimizer: str
    lr: float
    momentum: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    amsgrad: bool = False

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise InvalidArgument(f"optimizer={self.optimizer!r} is unknown; use one of "
                                  f"{OPTIMIZERS}")
        _real("lr", self.lr, 1e-12, 1e3, "e.g. lr=0.01")
        _real("momentum", self.momentum, 0.0, 0.999999, "e.g. momentum=0.9")
        _real("dampening", self.dampening, 0.0, 1.0, "e.g. dampening=0")
        _real("weight_decay", self.weight_decay, 0.0, 1.0, "e.g. weight_decay=0.01")
        _real("beta1", self.beta1, 0.0, 0.999999, "e.g. beta1=0.9")
        _real("beta2", self.beta2, 0.0, 0.999999, "e.g. beta2=0.999")
        _real("eps", self.eps, 1e-30, 1.0, "e.g. eps=1e-8")
        for flag in ("nesterov", "amsgrad"):
            if not isinstance(getattr(self, flag), (bool, np.bool_)):
                raise InvalidArgument(f"{flag}={getattr(self, flag)!r} must be True or False")
        if self.nesterov and (self.momentum == 0 or self.dampening != 0):
            raise InvalidArgument(
                f"nesterov=True needs momentum > 0 and dampening == 0 (got momentum="
                f"{self.momentum}, dampening={self.dampening}), as in torch.optim.SGD")
        if self.optimizer == "sgd" and self.amsgrad:
            raise InvalidArgument("amsgrad=True is an Adam/AdamW option; use optimizer='adam'")
        if self.optimizer != "sgd" and (self.momentum or self.dampening or self.nesterov):
            raise InvalidArgument(f"momentum, dampening and nesterov are SGD options; "
                                  f"{self.optimizer} takes beta1, beta2, eps, amsgrad")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> OptimConfig:
        """The config named by an op's parameters (``optimizer``, ``lr``, ...)."""
        keys = ("optimizer", "lr", "momentum", "dampening", "nesterov", "weight_decay",
                "beta1", "beta2", "eps", "amsgrad")
        return cls(**{k: params[k] for k in keys if k in params})

    @property
    def state_names(self) -> tuple[str, ...]:
        """The optimizer state per parameter, as torch names it."""
        if self.optimizer == "sgd":
            return ("momentum_buffer",) if self.momentum else ()
        return ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if self.amsgrad else ())

    def torch_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the matching ``torch.optim`` constructor."""
        if self.optimizer == "sgd":
            return {"lr": self.lr, "momentum": self.momentum, "dampening": self.dampening,
                    "nesterov": self.nesterov, "weight_decay": self.weight_decay}
        return {"lr": self.lr, "betas": (self.beta1, self.beta2), "eps": self.eps,
                "weight_decay": self.weight_decay, "amsgrad": self.amsgrad}


def one_minus_err(b: float, model: PrecisionModel) -> float:
    """Relative error of a kernel's ``1 - b`` when it may subtract from ``b``
    rounded to the storage format (as fused kernels may): the rounding
    of ``b`` grows by ``b / (1 - b)`` in the cancellation, plus one rounding."""
    eb = scalar_err(b, model)
    return min(eb * b / (1.0 - b) + model.acc_unit() + scalar_err(1.0 - b, model), 0.5)


def _scale(t: Tracked, c: float, model: PrecisionModel) -> Tracked:
    """``t * c`` with the kernel's copy of ``c`` possibly rounded."""
    return mul_scalar(t, c, model, c_rel_err=scalar_err(c, model))


def optimizer_step(cfg: OptimConfig, param: Tracked, grad: Tracked,
                   state: Mapping[str, Tracked], step: int,
                   model: PrecisionModel) -> tuple[Tracked, dict[str, Tracked]]:
    """One update of ``cfg`` at ``step`` (1-based) from ``param``, ``grad`` and ``state``.

    ``state`` holds the tensors of :attr:`OptimConfig.state_names` after step
    ``step - 1`` (ignored at step 1, where torch starts them). Returns the
    updated parameter and state, tracked (bounds as in the module docstring).
    """
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 1:
        raise InvalidArgument(f"{step=} must be a positive int (steps count from 1)")
    missing = [n for n in cfg.state_names if n not in state] if step > 1 else []
    if missing:
        raise InvalidArgument(f"state misses {missing} at {step=}; give the state of step "
                              f"{step - 1}: {cfg.state_names}")
    if cfg.optimizer == "sgd":
        return _sgd(cfg, param, grad, state, step, model)
    return _adam(cfg, param, grad, state, int(step), model)


def _sgd(cfg: OptimConfig, p: Tracked, g: Tracked, state: Mapping[str, Tracked], step: int,
         m: PrecisionModel) -> tuple[Tracked, dict[str, Tracked]]:
    if cfg.weight_decay:
        g = add(g, _scale(p, cfg.weight_decay, m), m)
    new: dict[str, Tracked] = {}
    if cfg.momentum:
        if step == 1:
            buf = g
        else:
            damp = g if cfg.dampening == 0 else _scale(g, 1.0 - cfg.dampening, m)
            buf = add(_scale(state["momentum_buffer"], cfg.momentum, m), damp, m)
        new["momentum_buffer"] = buf
        g = add(g, _scale(buf, cfg.momentum, m), m) if cfg.nesterov else buf
    return sub(p, _scale(g, cfg.lr, m), m), new


def _adam(cfg: OptimConfig, p: Tracked, g: Tracked, state: Mapping[str, Tracked], t: int,
          m: PrecisionModel) -> tuple[Tracked, dict[str, Tracked]]:
    xp_zero = exact(np.zeros(p.shape))
    if cfg.weight_decay:
        if cfg.optimizer == "adamw":
            p = _scale(p, 1.0 - cfg.lr * cfg.weight_decay, m)
        else:
            g = add(g, _scale(p, cfg.weight_decay, m), m)
    m0 = state["exp_avg"] if t > 1 else xp_zero
    v0 = state["exp_avg_sq"] if t > 1 else xp_zero
    w1 = 1.0 - cfg.beta1
    e1w, e2w = one_minus_err(cfg.beta1, m), one_minus_err(cfg.beta2, m)
    lerp = add(m0, mul_scalar(sub(g, m0, m), w1, m, c_rel_err=e1w), m)
    weighted = add(_scale(m0, cfg.beta1, m), mul_scalar(g, w1, m, c_rel_err=e1w), m)
    exp_avg = either(lerp, weighted)
    exp_avg_sq = add(_scale(v0, cfg.beta2, m),
                     mul_scalar(mul(g, g, m), 1.0 - cfg.beta2, m, c_rel_err=e2w), m)
    new = {"exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
    v = exp_avg_sq
    if cfg.amsgrad:
        vmax = maximum(state["max_exp_avg_sq"] if t > 1 else xp_zero, exp_avg_sq)
        new["max_exp_avg_sq"] = v = vmax
    bc1 = 1.0 - cfg.beta1**t
    bc2_sqrt = math.sqrt(1.0 - cfg.beta2**t)
    u = m.acc_unit()
    e2 = bias_correction_err(cfg.beta2, t, m) / 2 + u  # sqrt halves it; + the sqrt's rounding
    e1 = bias_correction_err(cfg.beta1, t, m) + u       # lr / bc1: one more rounding
    denom = mul_scalar(sqrt(v, m), bc2_sqrt, m, divide=True, c_rel_err=min(e2, 0.5))
    eps_k = widen(exact(np.full(p.shape, cfg.eps)), scalar_err(cfg.eps, m) * cfg.eps)
    denom = add(denom, eps_k, m)
    upd = mul_scalar(div(exp_avg, denom, m), cfg.lr / bc1, m, c_rel_err=min(e1, 0.5))
    return sub(p, upd, m), new
