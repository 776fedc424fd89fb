"""Sliding windows over the last ``d`` axes of an array, with torch's pooling and
convolution index arithmetic (kernel size, stride, padding, dilation,
``ceil_mode``): the taps each output position reads, as a trailing axis."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["Windows", "windows"]


class Windows:
    """The windows of a pooling op over the last ``d`` axes of an input."""

    def __init__(self, shape: Sequence[int], d: int, kernel: Sequence[int], stride: Sequence[int],
                 padding: Sequence[int], dilation: Sequence[int], ceil_mode: bool) -> None:
        def per_axis(v: Sequence[int] | int, default: Sequence[int]) -> tuple[int, ...]:
            vals: list[Any] = list(v) if isinstance(v, (list, tuple)) else [v]
            if not vals:
                return tuple(default)
            return tuple(int(a) for a in (vals * d if len(vals) == 1 else vals))
        self.d = d
        self.spatial = tuple(int(s) for s in shape[-d:])
        self.k = per_axis(kernel, ())
        self.s = per_axis(stride, self.k)
        self.p = per_axis(padding, (0,) * d)
        self.dil = per_axis(dilation, (1,) * d)
        out = []
        for size, k, s, p, dl in zip(self.spatial, self.k, self.s, self.p, self.dil, strict=True):
            span = size + 2 * p - dl * (k - 1) - 1
            o = (-(-span // s) if ceil_mode else span // s) + 1
            if ceil_mode and (o - 1) * s >= size + p:
                o -= 1
            out.append(o)
        self.out = tuple(out)
        # per axis: (out, k) padded coordinate of each tap
        self.coords = [np.arange(o)[:, None] * s + np.arange(k)[None, :] * dl
                       for o, k, s, dl in zip(self.out, self.k, self.s, self.dil, strict=True)]
        self.right = [max(0, int(c.max()) + 1 - size - p) if c.size else 0
                      for c, size, p in zip(self.coords, self.spatial, self.p, strict=True)]

    @property
    def taps(self) -> int:
        return int(np.prod(self.k))

    def gather(self, a: np.ndarray, fill: float) -> np.ndarray:
        """``(..., *out, K)``: each window's taps of ``a`` (``fill`` in the padding)."""
        widths = [(0, 0)] * (a.ndim - self.d) + [(p, r) for p, r in zip(self.p, self.right,
                                                                         strict=True)]
        padded = np.pad(a, widths, constant_values=fill)
        d = self.d
        index = []
        for i, c in enumerate(self.coords):  # broadcast to (*out, *k) over the axes
            shape = [1] * (2 * d)
            shape[i], shape[d + i] = c.shape
            index.append(c.reshape(shape))
        key: tuple[Any, ...] = (Ellipsis, *index)
        g = padded[key]  # (..., *out, *k)
        lead = g.shape[: g.ndim - 2 * d]
        order = list(range(len(lead))) + [len(lead) + i for i in range(d)] + [
            len(lead) + d + i for i in range(d)]
        return np.transpose(g, order).reshape(lead + self.out + (self.taps,))

    def positions(self) -> np.ndarray:
        """``(*out, K)``: the flat input position each tap reads (-1: padding)."""
        plane = np.arange(int(np.prod(self.spatial)), dtype=np.float64).reshape(self.spatial)
        return self.gather(plane, -1.0).astype(np.int64)

    def clipped_counts(self) -> np.ndarray:
        """``(*out,)``: the window's extent clipped to the padded input, as torch
        counts it with ``count_include_pad`` (taps past the right padding do not count)."""
        total = np.ones(self.out)
        for i, (o, k, s, p, size) in enumerate(zip(self.out, self.k, self.s, self.p,
                                                    self.spatial, strict=True)):
            start = np.arange(o) * s - p
            extent = np.minimum(start + k, size + p) - start
            shape = [1] * self.d
            shape[i] = o
            total = total * extent.reshape(shape)
        return total


def windows(x: Any, d: int, *args: Any) -> Windows:
    shape = x.shape if hasattr(x, "shape") else np.shape(x)
    return Windows(shape, d, *args)
