"""Mutants of kernels judged against traced PyTorch references, one or more per
rule family of the traced oracle's library.

Each :class:`TracedMutant` pairs a reference (a module-level function here, so a
repro finds it again by import) with a correct torch kernel and one plausible
bug: softmax without the max subtraction (overflows for large inputs), layer
norm without its affine weights or with the unbiased variance, a pooling window
off by one, GELU's tanh form where the erf form is the reference, a reduction
that drops its tail, a transposed convolution with the wrong output padding, a
cross-entropy over class labels that averages over every sample where the
ignored ones must not count.
:func:`check` judges a kernel with ``check_kernel(kernel, reference=...)``. This
module is not named after an op, so :func:`numoracle.zoo.mutants` never loads it.

Kernels take the inputs by name as float32 torch tensors (the ``torch-cpu``
backend; class labels as int64 tensors) and return ``{"out": tensor}``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from ..api import check_kernel
from ..running.runner import TargetResult

__all__ = ["TracedMutant", "MUTANTS", "check", "softmax", "layer_norm", "avg_pool",
           "gelu", "row_sum", "conv_transpose", "cross_entropy"]

Kernel = Callable[..., dict[str, torch.Tensor]]


# -- the references -------------------------------------------------------------------

def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis."""
    return torch.softmax(x, dim=-1)


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Layer norm over the last axis with affine weights."""
    return F.layer_norm(x, (x.shape[-1],), w, b)


def avg_pool(x: torch.Tensor) -> torch.Tensor:
    """2x2 average pooling, stride 2."""
    return F.avg_pool2d(x, 2)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU, the erf form."""
    return F.gelu(x)


def row_sum(x: torch.Tensor) -> torch.Tensor:
    """The sum of each row."""
    return x.sum(-1)


def conv_transpose(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A 3x3 transposed convolution, stride 2, padding 1, output padding 1."""
    return F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over class labels; samples labelled 0 are ignored."""
    return F.cross_entropy(logits, labels, ignore_index=0)


# -- the kernels ------------------------------------------------------------------------

def _out(f: Callable[..., torch.Tensor]) -> Kernel:
    def kernel(*args: torch.Tensor, **inputs: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"out": f(*args, **inputs)}
    kernel.__name__ = kernel.__qualname__ = f.__name__
    kernel.__doc__ = f.__doc__
    return kernel


def softmax_no_max_subtraction(x: torch.Tensor) -> torch.Tensor:
    """exp(x) / sum(exp(x)): overflows to inf / inf for inputs above ~88."""
    e = torch.exp(x)
    return e / e.sum(-1, keepdim=True)


def layer_norm_without_affine(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The affine weights and bias never applied."""
    return F.layer_norm(x, (x.shape[-1],))


def layer_norm_unbiased_variance(x: torch.Tensor, w: torch.Tensor,
                                 b: torch.Tensor) -> torch.Tensor:
    """Normalised by the unbiased variance (n - 1), as torch.var's default."""
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5) * w + b


def avg_pool_window_off_by_one(x: torch.Tensor) -> torch.Tensor:
    """Each window starts one element late (the last one reads a zero past the edge)."""
    shifted = F.pad(x[..., 1:, 1:], (0, 1, 0, 1))
    return F.avg_pool2d(shifted, 2)


def gelu_tanh_form(x: torch.Tensor) -> torch.Tensor:
    """GELU's tanh approximation where the erf form is the reference."""
    return F.gelu(x, approximate="tanh")


def row_sum_tail_dropped(x: torch.Tensor) -> torch.Tensor:
    """The reduction loop stops one element early."""
    return x[..., :-1].sum(-1)


def conv_transpose_no_output_padding(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Computed without the output padding, the missing row and column left zero."""
    y = F.conv_transpose2d(x, w, stride=2, padding=1)
    return F.pad(y, (0, 1, 0, 1))


def cross_entropy_mean_over_every_sample(logits: torch.Tensor,
                                         labels: torch.Tensor) -> torch.Tensor:
    """The ignored samples left out of the sum but counted in the mean's divisor."""
    picked = -torch.log_softmax(logits, -1).gather(1, labels[:, None])[:, 0]
    return torch.where(labels != 0, picked, 0.0).sum() / labels.shape[0]


@dataclass(frozen=True)
class TracedMutant:
    """A bug in a kernel of a traced reference (see the module docstring)."""

    name: str
    family: str
    reference: Callable[..., torch.Tensor]
    inputs: Mapping[str, tuple[Any, ...]]
    broken: Kernel
    correct: Kernel
    dims: Mapping[str, Any] = field(default_factory=dict)
    integers: Mapping[str, Any] = field(default_factory=dict)


_ROWS = {"x": ("batch", "n")}
_IMAGE = {"x": ("batch", "c", "h", "w")}

MUTANTS: tuple[TracedMutant, ...] = (
    TracedMutant("softmax_no_max_subtraction", "softmax", softmax, _ROWS,
                 _out(softmax_no_max_subtraction), _out(softmax)),
    TracedMutant("layer_norm_without_affine", "normalization", layer_norm,
                 {"x": ("batch", "n"), "w": ("n",), "b": ("n",)},
                 _out(layer_norm_without_affine), _out(layer_norm)),
    TracedMutant("layer_norm_unbiased_variance", "normalization", layer_norm,
                 {"x": ("batch", "n"), "w": ("n",), "b": ("n",)},
                 _out(layer_norm_unbiased_variance), _out(layer_norm), {"n": (2, 64)}),
    TracedMutant("avg_pool_window_off_by_one", "pooling", avg_pool, _IMAGE,
                 _out(avg_pool_window_off_by_one), _out(avg_pool),
                 {"h": (2, 16), "w": (2, 16)}),
    TracedMutant("gelu_tanh_claimed_as_erf", "elementwise", gelu, _ROWS,
                 _out(gelu_tanh_form), _out(gelu)),
    TracedMutant("row_sum_tail_dropped", "reductions", row_sum, _ROWS,
                 _out(row_sum_tail_dropped), _out(row_sum), {"n": (2, 256)}),
    TracedMutant("conv_transpose_wrong_output_padding", "convolution", conv_transpose,
                 {"x": ("batch", "c", "h", "w"), "w": ("c", "o", 3, 3)},
                 _out(conv_transpose_no_output_padding), _out(conv_transpose),
                 {"h": (1, 8), "w": (1, 8), "c": (1, 4), "o": (1, 4)}),
    TracedMutant("cross_entropy_mean_over_every_sample", "losses", cross_entropy,
                 {"logits": ("batch", "n"), "labels": ("batch",)},
                 _out(cross_entropy_mean_over_every_sample), _out(cross_entropy),
                 {"n": (2, 16)}, {"labels": (0, "n")}),
)


def check(mutant: TracedMutant, kernel: Kernel | None = None, **kwargs: Any) -> TargetResult:
    """Judge ``kernel`` (the mutant's broken kernel by default) against its
    reference in fp32 on the ``torch-cpu`` backend; ``kwargs`` go to
    :func:`numoracle.check_kernel` (``examples``, ``seed``, ``store``, ...)."""
    kw: dict[str, Any] = {"precision": "fp32", "backend": "torch-cpu", "store": None,
                          "op": f"traced_zoo_{mutant.name}"}
    kw.update(kwargs)
    return check_kernel(kernel or mutant.broken, reference=mutant.reference,
                        inputs=dict(mutant.inputs), dims=dict(mutant.dims) or None,
                        integers=dict(mutant.integers) or None, **kw)
