"""NumPy targets for ``logic_ca`` in seed 004's parallel design: every cell's
gradients computed independently ("in parallel": vectorised over cells), then
merged into the shared accumulators cell by cell.

The backward pass runs the steps in reverse. Per step and cell it forms the
gradient of every layer's gate probabilities (the cell's rows: its channels for a
perception kernel), and the gradient of its 3x3 neighbourhood and of its own
state; the merge then adds, cell after cell, the probability gradients into one
accumulator per layer (over all cells and steps) and distributes the
neighbourhood gradients into the previous grid's gradient (wrapping around, or
dropped beyond a zero edge). After the last step each layer's logit gradient is
the softmax backward of its accumulator, once.

``merge`` picks the order of the merge: ``"sequential"`` (cell order: the seed's
sequential merge, deterministic), ``"shuffled"`` (a fresh random order at every
merge: what atomics give; the results differ from the sequential merge by
rounding only) or ``"racy"`` (a CPU emulation of unsynchronised read-modify-write
updates: cells merge in pairs that both read the accumulator before either writes,
so the second write wins and the first cell's contributions are lost).
:func:`ca_numpy` also takes the flags the bug zoo uses to plant seed 004's bugs
(:mod:`numoracle.zoo.logic`).

The layer's formulas are difflogic's (``r = r + p_g * gate_g``), written here
independently of the oracle.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np

from ..oracle.precision import get_model
from ..targets.target import Target

__all__ = ["gates", "layer_forward", "layer_backward", "ca_numpy", "TARGETS", "MERGES"]

MERGES = ("sequential", "shuffled", "racy")
PERCEPTION_WIDTHS = (4, 2, 1)
OFFSETS = tuple((dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1))


def gates(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    """The 16 relaxed gates, difflogic's formulas, in the arrays' dtype."""
    one = a.dtype.type(1)
    two = a.dtype.type(2)
    ab = a * b
    return [np.zeros_like(a), ab, a - ab, a, b - ab, b, a + b - two * a * b, a + b - ab,
            one - (a + b - ab), one - (a + b - two * a * b), one - b, one - b + ab, one - a,
            one - a + ab, one - ab, np.ones_like(a)]


def _derivatives(a: np.ndarray, b: np.ndarray, xor_wrong: bool = False
                 ) -> tuple[list[Any], list[Any]]:
    """``d gate / d a`` and ``d gate / d b`` for the 16 gates."""
    one, two = a.dtype.type(1), a.dtype.type(2)
    z = np.zeros_like(a)
    da = [z, b, one - b, one + z, -b, z, one - two * b, one - b, b - one, two * b - one, z,
          b + z, -one + z, b - one, -b, z]
    db = [z, a, -a, z, one - a, one + z, one - two * a, one - a, a - one, two * a - one,
          -one + z, a - one, z, a + z, -a, z]
    if xor_wrong:  # XOR's derivative taken as OR's
        da[6], db[6] = one - b, one - a
    return da, db


def softmax(w: np.ndarray) -> np.ndarray:
    e = np.exp(w - w.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layer_forward(x: np.ndarray, ia: np.ndarray, ib: np.ndarray, p: np.ndarray
                  ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """``(R, I)`` -> ``(R, J)`` for probabilities ``p`` (J, 16)."""
    a, b = x[:, ia], x[:, ib]
    r = np.zeros_like(a)
    for g, v in enumerate(gates(a, b)):
        r = r + p[:, g] * v
    return r, (a, b)


def layer_backward(gy: np.ndarray, cache: tuple[np.ndarray, np.ndarray], p: np.ndarray,
                   ia: np.ndarray, ib: np.ndarray, n_in: int, xor_wrong: bool = False
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the input gradient ``(R, I)`` and the probability gradient ``(R, J, 16)``."""
    a, b = cache
    gp = np.stack([gy * v for v in gates(a, b)], axis=-1)
    if xor_wrong:  # the XOR relaxation's value taken as OR's in the gradient
        gp[..., 6] = gy * (a + b - a * b)
    da, db = _derivatives(a, b, xor_wrong)
    ga, gb = np.zeros_like(a), np.zeros_like(a)
    for g in range(16):
        ga = ga + p[:, g] * da[g]
        gb = gb + p[:, g] * db[g]
    gx = np.zeros((a.shape[0], n_in), dtype=a.dtype)
    for j in range(a.shape[1]):  # neuron by neuron, as a per-cell loop would
        gx[:, ia[j]] += gy[:, j] * ga[:, j]
        gx[:, ib[j]] += gy[:, j] * gb[:, j]
    return gx, gp


def _shift(a: np.ndarray, dy: int, dx: int, periodic: bool) -> np.ndarray:
    if periodic:
        return np.roll(a, shift=(-dy, -dx), axis=(0, 1))
    h, w = a.shape[:2]
    out = np.zeros_like(a)
    ys, xs = slice(max(0, -dy), min(h, h - dy)), slice(max(0, -dx), min(w, w - dx))
    yt, xt = slice(max(0, dy), min(h, h + dy)), slice(max(0, dx), min(w, w + dx))
    out[ys, xs] = a[yt, xt]
    return out


def _layers(params: Mapping[str, Any], pidx: np.ndarray, uidx: np.ndarray) -> tuple[Any, Any]:
    c, k, u = params["channels"], params["kernels"], params["hidden"]
    perc = []
    for kk in range(k):
        off, n_in, layers = 0, 9, []
        for width in PERCEPTION_WIDTHS:
            layers.append((pidx[kk, off:off + width, 0], pidx[kk, off:off + width, 1], off,
                           width, n_in))
            off, n_in = off + width, width
        perc.append(layers)
    upd = [(uidx[:u, 0], uidx[:u, 1], 0, u, c * (1 + k)), (uidx[u:, 0], uidx[u:, 1], u, c, u)]
    return perc, upd


def ca_numpy(grid: np.ndarray, target: np.ndarray, perception: np.ndarray,
             perception_idx: np.ndarray, update: np.ndarray, update_idx: np.ndarray, *,
             params: Mapping[str, Any], dtype: Any = np.float32, merge: str = "sequential",
             seed: int = 0, wrap_wrong: bool = False, bptt_forward_order: bool = False,
             xor_wrong: bool = False, no_centring: bool = False,
             drop_kernel: int | None = None) -> dict[str, np.ndarray]:
    """The automaton's outputs (``y``, ``loss``, ``grad_grid``, ``grad_perception``,
    ``grad_update``) in ``dtype``, the backward pass in seed 004's design (module
    docstring); the flags plant the zoo's bugs."""
    if merge not in MERGES:
        raise ValueError(f"{merge=} must be one of {MERGES}")
    rng = np.random.default_rng(seed)
    h, w, c = (int(params[k]) for k in ("height", "width", "channels"))
    steps, periodic = int(params["steps"]), bool(params["periodic"])
    k_count = int(params["kernels"])
    cells = h * w
    x = np.asarray(grid, dtype=dtype)
    pp = softmax(np.asarray(perception, dtype=dtype)).astype(dtype)  # (K, 7, 16)
    pu = softmax(np.asarray(update, dtype=dtype)).astype(dtype)
    perc, upd = _layers(params, np.asarray(perception_idx).astype(np.int64),
                        np.asarray(update_idx).astype(np.int64))
    history = []
    for _ in range(steps):
        nb = np.stack([_shift(x, dy, dx, periodic) for dy, dx in OFFSETS], axis=-1)
        rows = nb.reshape(cells * c, 9)
        feats = [x.reshape(cells, c)]
        pcache = []
        for kk in range(k_count):
            z, lc = rows, []
            for ia, ib, off, width, _ in perc[kk]:
                z, cache = layer_forward(z, ia, ib, pp[kk, off:off + width])
                lc.append(cache)
            pcache.append(lc)
            feats.append(z.reshape(cells, c))
        z = np.concatenate(feats, axis=1)
        ucache = []
        for ia, ib, off, width, _ in upd:
            z, cache = layer_forward(z, ia, ib, pu[off:off + width])
            ucache.append(cache)
        history.append((pcache, ucache))
        x = z.reshape(h, w, c)
    n_val = dtype(h * w * c)
    d = x - np.asarray(target, dtype=dtype)
    loss = np.sum(d * d) / n_val
    g = (dtype(2) * d) / n_val

    acc_p = np.zeros((k_count, 7, 16), dtype=dtype)
    acc_u = np.zeros(pu.shape, dtype=dtype)
    order_steps = range(steps) if bptt_forward_order else reversed(range(steps))
    for t in order_steps:
        pcache, ucache = history[t]
        # -- per cell, in parallel -----------------------------------------------------
        gz = g.reshape(cells, c)
        cell_u: list[Any] = [None] * len(upd)
        for li in reversed(range(len(upd))):
            ia, ib, off, width, n_in = upd[li]
            gz, cell_u[li] = layer_backward(gz, ucache[li], pu[off:off + width], ia, ib, n_in,
                                            xor_wrong)
        center = gz[:, :c]
        cell_p: list[list[Any]] = [[None] * len(PERCEPTION_WIDTHS) for _ in range(k_count)]
        nbs = []
        for kk in range(k_count):
            gk = gz[:, c * (1 + kk):c * (2 + kk)].reshape(cells * c, 1)
            for li in reversed(range(len(PERCEPTION_WIDTHS))):
                ia, ib, off, width, n_in = perc[kk][li]
                gk, gp = layer_backward(gk, pcache[kk][li], pp[kk, off:off + width], ia, ib,
                                        n_in, xor_wrong)
                cell_p[kk][li] = gp.reshape(cells, c, width, 16)
            nbs.append(gk.reshape(cells, c, 9))
        # -- merge, cell after cell ------------------------------------------------------
        prev = np.zeros((h, w, c), dtype=dtype)
        order = np.arange(cells)
        if merge == "shuffled":
            order = rng.permutation(cells)
        for pos_in_order, cell in enumerate(order):
            lost = merge == "racy" and pos_in_order % 2 == 1  # its partner's write wins
            y0, x0 = divmod(int(cell), w)
            contribs_u = [cell_u[li][cell] for li in range(len(upd))]
            if not lost:
                for li, (_, _, off, width, _) in enumerate(upd):
                    acc_u[off:off + width] += contribs_u[li]
                for kk in range(k_count):
                    if drop_kernel is not None and kk == drop_kernel % k_count:
                        continue
                    for li, (_, _, off, width, _) in enumerate(perc[kk]):
                        for ch in range(c):
                            acc_p[kk, off:off + width] += cell_p[kk][li][cell, ch]
                prev[y0, x0] += center[cell]
                for kk in range(k_count):
                    for pos, (dy, dx) in enumerate(OFFSETS):
                        ny, nx = y0 + dy, x0 + dx
                        if periodic:
                            ny, nx = (ny % (w if wrap_wrong else h)) % h, nx % w
                        elif not (0 <= ny < h and 0 <= nx < w):
                            continue
                        prev[ny, nx] += nbs[kk][cell, :, pos]
        g = prev
    centre = lambda acc, p: acc if no_centring else (  # noqa: E731
        acc - np.sum(acc * p, axis=-1, keepdims=True))
    return {"y": x, "loss": np.asarray([loss], dtype=dtype), "grad_grid": g,
            "grad_perception": pp * centre(acc_p, pp), "grad_update": pu * centre(acc_u, pu)}


def _target(grid: Any, target: Any, perception: Any, perception_idx: Any, update: Any,
            update_idx: Any, *, params: dict[str, Any], dtype: Any, merge: str
            ) -> dict[str, np.ndarray]:
    seed = int(abs(float(np.sum(grid))) * 1e6) % (1 << 31)  # a different order per case
    return ca_numpy(grid, target, perception, perception_idx, update, update_idx,
                    params=params, dtype=dtype, merge=merge, seed=seed)


def _targets() -> tuple[Target, ...]:
    out = []
    for storage, dtype in (("fp32", np.float32), ("fp64", np.float64)):
        out.append(Target(
            name=f"numpy-seq-{storage}", op="logic_ca", backend="numpy",
            precision=get_model(storage, order="sequential", deterministic_runs=True),
            fn=partial(_target, dtype=dtype, merge="sequential"),
            description="seed 004's backward: per-cell gradients, merged cell by cell in "
                        f"cell order (NumPy {np.dtype(dtype).name})"))
        out.append(Target(
            name=f"numpy-shuffled-{storage}", op="logic_ca", backend="numpy",
            precision=get_model(storage),
            fn=partial(_target, dtype=dtype, merge="shuffled"),
            description="seed 004's backward: per-cell gradients, merged in a random order "
                        f"at every step, as atomics would (NumPy {np.dtype(dtype).name})"))
    return tuple(out)


#: the NumPy logic automaton targets: sequential and shuffled merges, fp32 and fp64
TARGETS: tuple[Target, ...] = _targets()
