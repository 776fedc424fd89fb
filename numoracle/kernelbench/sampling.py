"""Judging an official instance too large for float64 on a sample of its rows.

KernelBench sizes its official instances for a GPU: activations of 10^8 to
10^9 elements, whose float64 evaluation with radii beside every value does not
fit. The candidate can still run at exactly those sizes and values; what cannot
is the oracle on the whole tensor. Where the model is *row-separable* — output
row ``i`` (axis 0) depends on input row ``i`` alone, as a batch of independent
samples does, or the rows of a matrix product — the exact value of a few rows is
the same model evaluated on those rows of the inputs, at a row count the oracle
holds. So the judge runs the candidate on the full official instance, keeps the
sampled rows of each output (the first, the last, and rows drawn from the
case's seed) and judges them against the oracle on the same rows. Where the
rows a piece of the floor holds are few enough pieces, every row is judged
instead, a piece at a time (:mod:`.pieces`).

Separability is not assumed. The *row knob* is the size constant that sets
axis 0 of some inputs and of every output, and nothing else (no parameter's
shape, no other input's); and at reduced sizes the model, in float64, gives on
a subset of rows the same values as on all rows, subset kept. Train-mode batch
normalisation (statistics over the batch), a reduction over axis 0 or a model
that mixes rows fails that test, and the instance is judged at reduced sizes
instead; so is one whose inputs are too many to make on the host and hand over
(:data:`MAX_INPUT_ELEMENTS`; inputs both processes draw on the device are not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .cases import float64_bytes, valid_sizes, varied_knobs
from .problem import BadFile, Problem

__all__ = ["RowPlan", "row_plan", "sample_rows", "MAX_ROWS", "MAX_INPUT_ELEMENTS"]

#: rows judged at most in a sampled instance
MAX_ROWS = 8
#: the most floating input elements an instance run whole may have: its two draws
#: are made on the host and handed to the candidate's process (1 GiB each in fp32)
MAX_INPUT_ELEMENTS = 1 << 28
#: names tried first as the row knob (a batch is the usual axis 0)
_BATCH_NAMES = ("batch_size", "batch", "n", "N", "M", "m")


@dataclass(frozen=True)
class RowPlan:
    """How an official instance is sampled.

    Attributes
    ----------
    knob : str
        The size constant that sets axis 0 of the sampled inputs and outputs.
    inputs : tuple of int
        Positions of the forward pass's arguments whose axis 0 it sets.
    total : int
        Its official value (the rows there are).
    rows : int
        Rows judged per case (the most whose float64 floor fits).
    """

    knob: str
    inputs: tuple[int, ...]
    total: int
    rows: int

    def sizes(self, sizes: Mapping[str, Any], rows: Sequence[int]) -> dict[str, Any]:
        """``sizes`` with the row knob at the sample's length."""
        return {**sizes, self.knob: len(rows)}

    def take(self, args: Sequence[Any], rows: Sequence[int]) -> list[Any]:
        """The forward pass's arguments (host arrays or tensors) restricted to ``rows``
        (the others unchanged); a ``range`` of step 1 as a view of those rows."""
        if isinstance(rows, range) and rows.step == 1:  # a piece: a view of its rows
            return [a[rows.start:rows.stop] if i in self.inputs
                    and isinstance(a, (np.ndarray, torch.Tensor)) else a
                    for i, a in enumerate(args)]
        idx = np.asarray(rows, dtype=np.int64)
        return [a[idx] if i in self.inputs and isinstance(a, np.ndarray) else
                a[torch.as_tensor(idx, device=a.device)]
                if i in self.inputs and isinstance(a, torch.Tensor) else a
                for i, a in enumerate(args)]


def sample_rows(plan: RowPlan, seed: int) -> tuple[int, ...]:
    """The first and the last row and ``plan.rows - 2`` others drawn from ``seed``,
    in increasing order."""
    n, k = plan.total, min(plan.rows, plan.total)
    if k <= 1:
        return (0,)
    chosen = {0, n - 1}
    middle = np.arange(1, n - 1)
    more = min(k - 2, middle.size)
    if more > 0:
        picked = np.random.default_rng(seed).choice(middle, size=more, replace=False)
        chosen |= {int(i) for i in picked}
    return tuple(sorted(chosen))


def row_plan(problem: Problem, base: Mapping[str, Any], small: Mapping[str, int],
             max_bytes: int, *, host_inputs: bool = True) -> RowPlan | None:
    """The way to sample the official instance at ``base``, or None where the model
    is not row-separable, not even one row fits ``max_bytes``, or the instance's
    inputs are made on the host (``host_inputs``) and are too many to hand over
    whole (:data:`MAX_INPUT_ELEMENTS`); inputs the candidate's process and the judge
    each draw on the device are not handed over."""
    specs = problem.input_specs(base)
    if host_inputs and sum(s.elements() for s in specs if s.floating) > MAX_INPUT_ELEMENTS:
        return None
    found = _row_knob(problem, base)
    if found is None:
        return None
    knob, inputs = found
    total = int(problem.knobs[knob])
    rows = 0
    for k in range(min(MAX_ROWS, total), 0, -1):
        sizes = {**base, knob: k}
        if valid_sizes(problem, sizes) and float64_bytes(problem, sizes) <= max_bytes:
            rows = k
            break
    if rows == 0:
        return None
    plan = RowPlan(knob, inputs, total, rows)
    return plan if _separable(problem, plan, {**base, **small}) else None


def _shapes(problem: Problem, sizes: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    specs = problem.input_specs(sizes)
    with torch.device("meta"):
        state = {k: tuple(v.shape) for k, v in problem.model(sizes).state_dict().items()}
    return [(s.shape if s.dtype is not None else None) for s in specs], state


def _row_knob(problem: Problem, base: Mapping[str, Any]) -> tuple[str, tuple[int, ...]] | None:
    """The knob that sets axis 0 of some floating inputs and nothing else they or the
    parameters have; with the positions of those inputs."""
    knobs = varied_knobs(problem)
    order = sorted(knobs, key=lambda k: (k not in _BATCH_NAMES, k))
    try:
        shapes, state = _shapes(problem, base)
    except BadFile:
        return None
    for name in order:
        value, half = knobs[name], knobs[name] // 2
        if not valid_sizes(problem, {**base, name: half}):
            continue
        try:
            other, other_state = _shapes(problem, {**base, name: half})
        except BadFile:
            continue
        if other_state != state:
            continue
        rows = tuple(i for i, (a, b) in enumerate(zip(shapes, other, strict=True))
                     if a and b and a[0] == value and b[0] == half and a[1:] == b[1:])
        rest_same = all(a == b for i, (a, b) in enumerate(zip(shapes, other, strict=True))
                        if i not in rows)
        if rows and rest_same:
            return name, rows
    return None


def _separable(problem: Problem, plan: RowPlan, sizes: Mapping[str, Any]) -> bool:
    """Whether, at ``sizes`` (small), the model on a subset of rows gives the same
    values as on all rows (float64, train mode as judged, the same parameters)."""
    n = int(sizes.get(plan.knob, problem.knobs[plan.knob]))
    if n < 3:
        n = 4
    full = {**sizes, plan.knob: n}
    if not valid_sizes(problem, full):
        return False
    keep = (0, n - 1)
    try:
        model = problem.model(full).double()
        args = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in problem.inputs(full, seed=1)]
        part = problem.model({**full, plan.knob: len(keep)}).double()
        part.load_state_dict(model.state_dict(), strict=True)
        with torch.no_grad():
            whole = _listed(model(*args))
            picked = [a[list(keep)] if i in plan.inputs and isinstance(a, torch.Tensor) else a
                      for i, a in enumerate(args)]
            some = _listed(part(*picked))
    except Exception:  # noqa: BLE001 - a model that does not run so is not sampled
        return False
    if len(whole) != len(some):
        return False
    for w, s in zip(whole, some, strict=True):
        if not (isinstance(w, torch.Tensor) and isinstance(s, torch.Tensor)):
            return False
        if w.dim() == 0 or w.shape[0] != n or tuple(s.shape) != (len(keep), *w.shape[1:]):
            return False
        scale = float(w.abs().max()) if w.numel() else 0.0
        if not torch.allclose(w[list(keep)], s, rtol=1e-9, atol=1e-12 * max(scale, 1e-300)):
            return False
    return True


def _listed(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]
