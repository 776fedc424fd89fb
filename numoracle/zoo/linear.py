"""Mutants of a NumPy float32 ``linear`` kernel, each claiming fp32.

Every mutant is one plausible bug; ``numoracle zoo --ops linear`` must catch
each with the default strategies, and the correct kernel must pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numoracle.targets.target import Target
from numoracle.kernels.numpy_targets import linear as correct_linear
from numoracle.oracle.formats import quantize
from numoracle.oracle.precision import get_model

Arrays = dict[str, np.ndarray]


def weight_read_transposed(x, weight, grad_output, bias=None) -> Arrays:
    """Reads the (out, in) weight buffer as if it were stored (in, out)."""
    o, i = weight.shape
    misread = np.ascontiguousarray(weight).reshape(-1).reshape(i, o).T
    return correct_linear(x, np.ascontiguousarray(misread), grad_output, bias)


def last_term_dropped(x, weight, grad_output, bias=None) -> Arrays:
    """The forward reduction loop stops one term early (``k < n - 1``)."""
    out = correct_linear(x, weight, grad_output, bias)
    out["y"] = out["y"] - np.outer(x[:, -1], weight[:, -1]).astype(np.float32)
    return out


def bias_added_twice(x, weight, grad_output, bias=None) -> Arrays:
    """The bias is added in the epilogue and again by the caller."""
    out = correct_linear(x, weight, grad_output, bias)
    if bias is not None:
        out["y"] = out["y"] + bias
    return out


def tf32_inputs(x, weight, grad_output, bias=None) -> Arrays:
    """Inputs truncated to tf32 (10 mantissa bits) although fp32 is claimed."""
    def t(a: np.ndarray) -> np.ndarray:
        return quantize(np.asarray(a, np.float64), "tf32", "rz").astype(np.float32)
    return correct_linear(t(x), t(weight), t(grad_output), bias)


def _fp16_acc_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Products in fp32, partial sums kept in fp16, sequentially."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float16)
    for i in range(a.shape[1]):
        acc = (acc.astype(np.float32) + np.outer(a[:, i], b[i, :]).astype(np.float32)).astype(
            np.float16)
    return acc.astype(np.float32)


def fp16_accumulation(x, weight, grad_output, bias=None) -> Arrays:
    """Partial sums in fp16 although fp32 accumulation is claimed."""
    out = correct_linear(x, weight, grad_output, bias)
    out["y"] = _fp16_acc_matmul(x, weight.T) + (bias if bias is not None else np.float32(0))
    out["grad_input"] = _fp16_acc_matmul(grad_output, weight)
    out["grad_weight"] = _fp16_acc_matmul(grad_output.T, x)
    return out


def fp16_accumulation_from_2048(x, weight, grad_output, bias=None) -> Arrays:
    """The forward switches to fp16 partial sums for long rows (``in_features >=
    2048``), as a kernel that picks another code path for large K; short rows,
    the only ones small default cases would draw, are right."""
    out = correct_linear(x, weight, grad_output, bias)
    if x.shape[1] >= 2048:
        out["y"] = _fp16_acc_matmul(x, weight.T) + (bias if bias is not None else np.float32(0))
    return out


def rows_past_64_unwritten(x, weight, grad_output, bias=None) -> Arrays:
    """The forward is launched on one block of 64 rows: the rows of a batch past
    64 are never written and keep the poison (NaN); batches up to 64 are right."""
    out = correct_linear(x, weight, grad_output, bias)
    out["y"][64:] = np.nan
    return out


def tail_tile_past_64_dropped(x, weight, grad_output, bias=None) -> Arrays:
    """The forward reduces in tiles of 128 terms whose last, partial tile stops
    after 64: the terms past 64 of a tail longer than 64 are dropped (right
    where ``in_features mod 128`` is 0 or at most 64)."""
    out = correct_linear(x, weight, grad_output, bias)
    n = x.shape[1]
    tail = n % 128
    if tail > 64:
        keep = n - tail + 64
        out["y"] = correct_linear(x[:, :keep], weight[:, :keep], grad_output, bias)["y"]
    return out


def grad_bias_wrong_axis(x, weight, grad_output, bias=None) -> Arrays:
    """grad_bias reduced over the feature axis instead of the batch axis."""
    out = correct_linear(x, weight, grad_output, bias)
    if bias is not None:
        out["grad_bias"] = np.add.reduce(grad_output, axis=1)
    return out


def grad_weight_last_sample_dropped(x, weight, grad_output, bias=None) -> Arrays:
    """The batch loop of grad_weight is off by one (skips the last sample)."""
    out = correct_linear(x, weight, grad_output, bias)
    out["grad_weight"] = out["grad_weight"] - np.outer(grad_output[-1], x[-1]).astype(np.float32)
    return out


def grad_input_unwritten(x, weight, grad_output, bias=None) -> Arrays:
    """The grad_input kernel is never launched: its buffer keeps the poison."""
    out = correct_linear(x, weight, grad_output, bias)
    out["grad_input"] = np.full_like(out["grad_input"], np.nan)
    return out


MUTANTS: dict[str, Any] = {
    "weight_read_transposed": weight_read_transposed,
    "last_term_dropped": last_term_dropped,
    "bias_added_twice": bias_added_twice,
    "tf32_inputs_claiming_fp32": tf32_inputs,
    "fp16_accumulation_claiming_fp32": fp16_accumulation,
    "fp16_accumulation_from_2048": fp16_accumulation_from_2048,
    "rows_past_64_unwritten": rows_past_64_unwritten,
    "tail_tile_past_64_dropped": tail_tile_past_64_dropped,
    "grad_bias_wrong_axis": grad_bias_wrong_axis,
    "grad_weight_last_sample_dropped": grad_weight_last_sample_dropped,
    "grad_input_unwritten": grad_input_unwritten,
}

TARGETS: list[Target] = [
    Target(name=name, op="linear", backend="numpy", precision=get_model("fp32"), fn=fn,
           description=(fn.__doc__ or "").strip(), source=__name__)
    for name, fn in MUTANTS.items()
]
