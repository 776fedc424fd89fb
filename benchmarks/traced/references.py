"""PyTorch references the traced oracle's benchmarks judge, one per op family.

Each entry is ``name -> (reference, inputs, dims, grads, params)``, the
arguments of :func:`numoracle.oracle.traced.op.traced_op`; together they cover
the rule library's families: contractions, convolutions (1-D, 2-D, transposed,
grouped), softmax and losses, normalisations, activations, reductions,
pooling, attention and an optimizer step. Module-level functions, so a repro
names them (``benchmarks.traced.references:layer``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["FAMILIES", "make_op"]


def layer(x, weight, bias):
    return torch.relu(F.linear(x, weight, bias))


def convolutions(x, w2, b2, w1, wt):
    y = F.conv2d(x, w2, b2, padding=1)
    z = F.conv1d(x.flatten(2), w1, stride=2, groups=2)
    t = F.conv_transpose2d(x, wt, stride=2, padding=1, output_padding=1)
    return y, z, t


def softmax_losses(logits, target_probs, pred, target):
    log_p = F.log_softmax(logits, -1)
    soft_ce = -(target_probs.softmax(-1) * log_p).sum(-1).mean()
    return (torch.softmax(logits, -1), soft_ce, F.mse_loss(pred, target),
            F.binary_cross_entropy_with_logits(pred, target.sigmoid()))


def norms(x, gamma, beta):
    ln = F.layer_norm(x.flatten(2), (x.shape[2] * x.shape[3],))
    gn = F.group_norm(x, 2, gamma, beta)
    bn = F.batch_norm(x, None, None, gamma, beta, training=True)
    return ln, gn, bn


def activations(x):
    return (F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), torch.sigmoid(x),
            torch.tanh(x), F.softplus(x), F.elu(x), F.leaky_relu(x, 0.1))


def reductions(x):
    return (x.sum(-1), x.mean(0), x.cumsum(-1), torch.logsumexp(x, -1),
            x.var(-1, correction=0), x.amax(-1))


def pooling(x):
    return (F.max_pool2d(x, 2), F.avg_pool2d(x, 3, stride=2, padding=1),
            F.adaptive_avg_pool2d(x, 1))


def attention(q, k, v):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, -1) @ v


def adam(param0, grads):
    p, g = param0.clone(), grads[0]
    m, v = torch.zeros_like(p), torch.zeros_like(p)
    m.lerp_(g, 1 - 0.9)
    v.mul_(0.999).addcmul_(g, g, value=1 - 0.999)
    denom = (v.sqrt() / math.sqrt(1 - 0.999)).add_(1e-8)
    p.addcdiv_(m, denom, value=-0.01 / (1 - 0.9))
    return {"param": p, "exp_avg": m, "exp_avg_sq": v}


#: family -> (reference, inputs, dims, grads)
FAMILIES: dict[str, tuple[Any, dict[str, tuple[Any, ...]], dict[str, Any], tuple[str, ...]]] = {
    "contraction": (layer, {"x": ("batch", "i"), "weight": ("o", "i"), "bias": ("o",)},
                    {"i": (1, 64), "o": (1, 32)}, ("x", "weight", "bias")),
    "convolution": (convolutions, {"x": ("batch", 4, "h", "w"), "w2": ("o", 4, 3, 3),
                                   "b2": ("o",), "w1": (6, 2, 3), "wt": (4, 3, 2, 2)},
                    {"batch": (1, 4), "h": (2, 12), "w": (2, 12), "o": (1, 8)},
                    ("x", "w2", "b2")),
    "softmax_loss": (softmax_losses, {"logits": ("batch", "n"), "target_probs": ("batch", "n"),
                                      "pred": ("batch", "n"), "target": ("batch", "n")},
                     {"n": (1, 64)}, ("logits", "pred")),
    "normalisation": (norms, {"x": ("batch", 4, "h", "w"), "gamma": (4,), "beta": (4,)},
                      {"batch": (2, 8), "h": (1, 8), "w": (2, 8)}, ("x", "gamma", "beta")),
    "activation": (activations, {"x": ("batch", "n")}, {"n": (1, 256)}, ("x",)),
    "reduction": (reductions, {"x": ("batch", "n")}, {"n": (1, 256)}, ("x",)),
    "pooling": (pooling, {"x": ("batch", "c", "h", "w")},
                {"batch": (1, 4), "c": (1, 4), "h": (2, 16), "w": (2, 16)}, ("x",)),
    "attention": (attention, {"q": ("batch", "s", "d"), "k": ("batch", "t", "d"),
                              "v": ("batch", "t", "e")},
                  {"batch": (1, 4), "s": (1, 16), "t": (1, 16), "d": (1, 32), "e": (1, 16)},
                  ("q", "k", "v")),
    "optimizer": (adam, {"param0": ("n",), "grads": (1, "n")}, {"n": (1, 1024)}, ()),
}


def make_op(family: str, grads: bool = True) -> Any:
    """The registered traced op of ``family`` (``traced_<family>``; without its
    gradients ``traced_<family>_forward``)."""
    from numoracle.oracle.traced.op import traced_op  # noqa: PLC0415 - torch-heavy

    ref, inputs, dims, wrt = FAMILIES[family]
    return traced_op(ref, inputs=inputs, dims=dims, grads=wrt if grads else (),
                     name=f"traced_{family}" if grads else f"traced_{family}_forward")
