"""Two formulations of each composite rule: kernels that compute the same function
as torch's reference by another algebraically equal route a careful kernel may
take (shifted or not, either association, online, folded, another identity).
Each must pass; :mod:`benchmarks.traced.specials` records them.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from numoracle.oracle.traced import Claims

__all__ = ["FORMULATIONS"]

_EPS = 1e-5
_C = math.sqrt(2.0 / math.pi)


# -- references ------------------------------------------------------------------------

def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis."""
    return torch.softmax(x, -1)


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    """Log-softmax over the last axis."""
    return torch.log_softmax(x, -1)


def logsumexp(x: torch.Tensor) -> torch.Tensor:
    """Log-sum-exp over the last axis."""
    return torch.logsumexp(x, -1)


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over class labels."""
    return F.cross_entropy(logits, labels)


def cross_entropy_rows(x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each row over class labels (its gradient: log-softmax's backward)."""
    return F.cross_entropy(x, labels, reduction="none")


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Layer norm over the last axis, with affine weights."""
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=_EPS)


def rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """RMS norm over the last axis: ``x / sqrt(mean(x^2) + eps) * w``."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + _EPS) * w


def group_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Group norm of 2 groups."""
    return F.group_norm(x, 2, w, b, eps=_EPS)


def batch_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Batch norm in training mode (batch statistics)."""
    return F.batch_norm(x, None, None, w, b, training=True, eps=_EPS)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU, erf form."""
    return F.gelu(x)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU, tanh form."""
    return F.gelu(x, approximate="tanh")


def softplus(x: torch.Tensor) -> torch.Tensor:
    """Softplus (threshold 20)."""
    return F.softplus(x)


def silu(x: torch.Tensor) -> torch.Tensor:
    """SiLU."""
    return F.silu(x)


# -- formulations ----------------------------------------------------------------------

def _out(y: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"out": y}


def _online(x: torch.Tensor, block: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """The running maximum and the rescaled sum of ``exp(x - m)`` over blocks."""
    m = torch.full(x.shape[:-1] + (1,), -math.inf)
    s = torch.zeros(x.shape[:-1] + (1,))
    for j in range(0, x.shape[-1], block):
        blk = x[..., j:j + block]
        new = torch.maximum(m, blk.amax(-1, keepdim=True))
        s = s * torch.exp(m - new) + torch.exp(blk - new).sum(-1, keepdim=True)
        m = new
    return m, s


def softmax_two_pass(x: torch.Tensor) -> dict[str, torch.Tensor]:
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return _out(e / e.sum(-1, keepdim=True))


def softmax_online_reciprocal(x: torch.Tensor) -> dict[str, torch.Tensor]:
    m, s = _online(x)
    return _out(torch.exp(x - m) * (1.0 / s))


def log_softmax_shifted(x: torch.Tensor) -> dict[str, torch.Tensor]:
    d = x - x.amax(-1, keepdim=True)
    return _out(d - torch.log(torch.exp(d).sum(-1, keepdim=True)))


def log_softmax_other_association(x: torch.Tensor) -> dict[str, torch.Tensor]:
    m = x.amax(-1, keepdim=True)
    return _out(x - (m + torch.log(torch.exp(x - m).sum(-1, keepdim=True))))


def logsumexp_two_pass(x: torch.Tensor) -> dict[str, torch.Tensor]:
    m = x.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), 0.0, m)  # a lane of -inf (or holding +inf): no shift
    return _out((m + torch.log(torch.exp(x - m).sum(-1, keepdim=True)))[..., 0])


def logsumexp_online(x: torch.Tensor) -> dict[str, torch.Tensor]:
    m, s = _online(x)
    return _out((m + torch.log(s))[..., 0])


def cross_entropy_log_softmax(logits: torch.Tensor,
                              labels: torch.Tensor) -> dict[str, torch.Tensor]:
    p = log_softmax_shifted(logits)["out"]
    return _out(-p.gather(1, labels[:, None]).mean())


def cross_entropy_logsumexp(logits: torch.Tensor,
                            labels: torch.Tensor) -> dict[str, torch.Tensor]:
    m = logits.amax(-1, keepdim=True)
    lse = m + torch.log(torch.exp(logits - m).sum(-1, keepdim=True))
    return _out((lse - logits.gather(1, labels[:, None])).mean())


def approximate(exact: np.ndarray, ulps: Any, rng: np.random.Generator) -> np.ndarray:
    """An fp32 value within ``ulps`` fp32 ulps of the float64 ``exact``, as far
    from it as that allows, on a random side: what an approximate division or
    exponential (``div.full.f32``: 2 ulps; ``ex2.approx``: ``2 + 1.173 |x|``) may
    return. An exact 0 stays 0, an infinity or NaN stays what it is."""
    near = exact.astype(np.float32)
    with np.errstate(invalid="ignore"):
        ulp = np.spacing(np.abs(near)).astype(np.float64)
    side = rng.choice([-1.0, 1.0], size=exact.shape)
    far = (exact + side * ulps * ulp).astype(np.float32)
    far = np.where(np.abs(far.astype(np.float64) - exact) > ulps * ulp,
                   np.nextafter(far, near), far)
    return np.where((exact == 0) | ~np.isfinite(near), near, far)


def _ce_rows(x: torch.Tensor, labels: torch.Tensor, grad_out: torch.Tensor,
             fast: bool) -> dict[str, torch.Tensor]:
    """A fused cross-entropy's forward and logits gradient, fp32, as a Triton
    kernel computes them: ``m + log(s) - x[label]`` and ``(e / s - onehot) dloss``
    with ``e = exp(x - m)``, ``s = sum(e)``; ``fast``: the exponential and the
    division approximate, off by the ``triton`` profile's ulps."""
    rng = np.random.default_rng(zlib.crc32(x.detach().numpy().tobytes()))
    xa = x.detach().numpy().astype(np.float32)
    m = xa.max(-1, keepdims=True)
    d = xa - m
    with np.errstate(invalid="ignore", over="ignore"):
        e = (approximate(np.exp(d.astype(np.float64)), 2.0 + 1.173 * np.abs(d), rng)
             if fast else np.exp(d))
        s = e.sum(-1, keepdims=True, dtype=np.float32)
        p = approximate(e.astype(np.float64) / s, 2.0, rng) if fast else e / s
    lab = labels.numpy()[:, None]
    loss = (m + np.log(s)) - np.take_along_axis(xa, lab, 1)
    onehot = (np.arange(xa.shape[-1]) == lab).astype(np.float32)
    dx = (p - onehot) * grad_out.numpy().astype(np.float32)[:, None]
    return {"out": torch.from_numpy(loss[:, 0]), "grad_x": torch.from_numpy(dx)}


def cross_entropy_softmax_minus_onehot(x: torch.Tensor, labels: torch.Tensor,
                                       grad_out: torch.Tensor) -> dict[str, torch.Tensor]:
    """The gradient as ``(e / s - onehot) dloss``, correctly rounded fp32."""
    return _ce_rows(x, labels, grad_out, fast=False)


def cross_entropy_softmax_minus_onehot_triton(
        x: torch.Tensor, labels: torch.Tensor, grad_out: torch.Tensor) -> dict[str, torch.Tensor]:
    """As :func:`cross_entropy_softmax_minus_onehot`, the exponential and the
    division off by the ``triton`` profile's ulps (claim ``fp32+triton``)."""
    return _ce_rows(x, labels, grad_out, fast=True)


def layer_norm_two_pass(x: torch.Tensor, w: torch.Tensor,
                        b: torch.Tensor) -> dict[str, torch.Tensor]:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return _out((x - mean) / torch.sqrt(var + _EPS) * w + b)


def layer_norm_welford_folded(x: torch.Tensor, w: torch.Tensor,
                              b: torch.Tensor) -> dict[str, torch.Tensor]:
    mean = torch.zeros(x.shape[:-1] + (1,))
    m2 = torch.zeros(x.shape[:-1] + (1,))
    for i in range(x.shape[-1]):
        v = x[..., i:i + 1]
        delta = v - mean
        mean = mean + delta / (i + 1)
        m2 = m2 + delta * (v - mean)
    rstd = torch.rsqrt(m2 / x.shape[-1] + _EPS)
    scale = w * rstd
    return _out(x * scale + (b - mean * scale))


def rms_norm_divide(x: torch.Tensor, w: torch.Tensor) -> dict[str, torch.Tensor]:
    return _out(x / torch.sqrt((x * x).mean(-1, keepdim=True) + _EPS) * w)


def rms_norm_rsqrt_weight_first(x: torch.Tensor, w: torch.Tensor) -> dict[str, torch.Tensor]:
    return _out((w * x) * torch.rsqrt((x * x).sum(-1, keepdim=True) / x.shape[-1] + _EPS))


def _group_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = x.reshape(x.shape[0], 2, -1)
    mean = g.mean(-1, keepdim=True)
    var = ((g - mean) ** 2).mean(-1, keepdim=True)
    return g, mean, var


def group_norm_two_pass(x: torch.Tensor, w: torch.Tensor,
                        b: torch.Tensor) -> dict[str, torch.Tensor]:
    g, mean, var = _group_stats(x)
    y = ((g - mean) / torch.sqrt(var + _EPS)).reshape(x.shape)
    return _out(y * w[None, :, None] + b[None, :, None])


def group_norm_folded(x: torch.Tensor, w: torch.Tensor,
                      b: torch.Tensor) -> dict[str, torch.Tensor]:
    g, mean, var = _group_stats(x)
    rstd = torch.rsqrt(var + _EPS)  # (N, 2, 1)
    per_c = x.shape[1] // 2
    rstd_c = rstd.repeat_interleave(per_c, 1)  # (N, C, 1)
    mean_c = mean.repeat_interleave(per_c, 1)
    scale = w[None, :, None] * rstd_c
    return _out(x * scale + (b[None, :, None] - mean_c * scale))


def _batch_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mean = x.mean((0, 2), keepdim=True)
    return mean, ((x - mean) ** 2).mean((0, 2), keepdim=True)


def batch_norm_two_pass(x: torch.Tensor, w: torch.Tensor,
                        b: torch.Tensor) -> dict[str, torch.Tensor]:
    mean, var = _batch_stats(x)
    return _out((x - mean) / torch.sqrt(var + _EPS) * w[None, :, None] + b[None, :, None])


def batch_norm_folded(x: torch.Tensor, w: torch.Tensor,
                      b: torch.Tensor) -> dict[str, torch.Tensor]:
    mean, var = _batch_stats(x)
    scale = w[None, :, None] * torch.rsqrt(var + _EPS)
    return _out(x * scale + (b[None, :, None] - mean * scale))


def gelu_erf(x: torch.Tensor) -> dict[str, torch.Tensor]:
    return _out(0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0))))


def gelu_erfc(x: torch.Tensor) -> dict[str, torch.Tensor]:
    return _out(x * (0.5 * torch.erfc(-x / math.sqrt(2.0))))


def gelu_tanh_form(x: torch.Tensor) -> dict[str, torch.Tensor]:
    return _out(0.5 * x * (1.0 + torch.tanh(_C * (x + 0.044715 * x * x * x))))


def gelu_tanh_sigmoid(x: torch.Tensor) -> dict[str, torch.Tensor]:
    return _out(x * torch.sigmoid(2.0 * _C * (x + 0.044715 * x * x * x)))


def softplus_threshold(x: torch.Tensor) -> dict[str, torch.Tensor]:
    return _out(torch.where(x > 20.0, x, torch.log1p(torch.exp(x))))


def softplus_stable(x: torch.Tensor) -> dict[str, torch.Tensor]:
    return _out(torch.clamp(x, min=0.0) + torch.log1p(torch.exp(-x.abs())))


def silu_sigmoid(x: torch.Tensor) -> dict[str, torch.Tensor]:
    return _out(x * torch.sigmoid(x))


def silu_divide(x: torch.Tensor) -> dict[str, torch.Tensor]:
    return _out(x / (1.0 + torch.exp(-x)))


_ROWS = {"inputs": {"x": ("batch", "n")}, "dims": {"n": (1, 64)}}
_CE = {"inputs": {"logits": ("batch", "n"), "labels": ("batch",)},
       "integers": {"labels": (0, "n")}, "dims": {"n": (1, 64)}}
_CE_ROWS = {"inputs": {"x": ("batch", "n"), "labels": ("batch",)},
            "integers": {"labels": (0, "n")}, "dims": {"n": (1, 256)}, "grads": ("x",)}
_NORM = {"inputs": {"x": ("batch", "n"), "w": ("n",), "b": ("n",)}, "dims": {"n": (1, 64)}}
_RMS = {"inputs": {"x": ("batch", "n"), "w": ("n",)}, "dims": {"n": (1, 64)}}
_CHANNELS = {"inputs": {"x": ("batch", "c", "l"), "w": ("c",), "b": ("c",)},
             "dims": {"c": (2, 2), "l": (2, 16)}}
_BATCH = {"inputs": {"x": ("batch", "c", "l"), "w": ("c",), "b": ("c",)},
          "dims": {"batch": (2, 8), "c": (1, 4), "l": (1, 8)}}
_ELEMENTWISE = {"inputs": {"x": ("batch", "n")}, "dims": {"n": (1, 64)}}


def _pair(reference: Callable[..., Any], spec: dict[str, Any],
          *kernels: Callable[..., Any]) -> dict[str, tuple[Callable[..., Any], dict[str, Any]]]:
    return {f"{reference.__name__}: {k.__name__}": (k, {"reference": reference, **spec})
            for k in kernels}


#: "rule: formulation" -> (kernel, check_kernel keyword arguments)
FORMULATIONS: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
    **_pair(softmax, _ROWS, softmax_two_pass, softmax_online_reciprocal),
    **_pair(log_softmax, _ROWS, log_softmax_shifted, log_softmax_other_association),
    **_pair(logsumexp, _ROWS, logsumexp_two_pass),
    # online from m = -inf: a lane of -inf gives NaN (exp(-inf - -inf)), its claim
    **_pair(logsumexp, {**_ROWS, "claims": Claims(masked_rows="nan"),
                        "op": "traced_logsumexp_nan_rows"}, logsumexp_online),
    **_pair(cross_entropy, _CE, cross_entropy_log_softmax, cross_entropy_logsumexp),
    **_pair(cross_entropy_rows, _CE_ROWS, cross_entropy_softmax_minus_onehot),
    **_pair(cross_entropy_rows, {**_CE_ROWS, "precision": "fp32+triton"},
            cross_entropy_softmax_minus_onehot_triton),
    **_pair(layer_norm, _NORM, layer_norm_two_pass, layer_norm_welford_folded),
    **_pair(rms_norm, _RMS, rms_norm_divide, rms_norm_rsqrt_weight_first),
    **_pair(group_norm, _CHANNELS, group_norm_two_pass, group_norm_folded),
    **_pair(batch_norm, _BATCH, batch_norm_two_pass, batch_norm_folded),
    **_pair(gelu, _ELEMENTWISE, gelu_erf, gelu_erfc),
    **_pair(gelu_tanh, _ELEMENTWISE, gelu_tanh_form, gelu_tanh_sigmoid),
    **_pair(softplus, _ELEMENTWISE, softplus_threshold, softplus_stable),
    **_pair(silu, _ELEMENTWISE, silu_sigmoid, silu_divide),
}
