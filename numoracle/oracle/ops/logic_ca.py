"""``logic_ca``: a differentiable logic cellular automaton (seed 004), ``steps`` steps
on an ``H x W`` grid of ``C`` channels, the loss on the final grid, and the
gradients of every gate logit and of the initial grid by backpropagation through time.

One step, for every cell: the 3x3 neighbourhood of each channel (periodic
boundary, or zeros beyond the edge: ``periodic``), read in row order
``(dy, dx)`` for ``dy, dx in -1, 0, 1``; each of the ``K = kernels`` perception
kernels, a logic tree ``9 -> 4 -> 2 -> 1`` (its weights shared by every channel
and cell), on every channel's neighbourhood; the features ``[cell's C channels,
kernel 0's C outputs, kernel 1's, ...]``; the update network, two logic layers
``C (1 + K) -> hidden -> C``, whose output is the cell's new state. The loss is
``mean((grid_T - target)^2)`` over the ``H W C`` values.

Inputs: ``grid`` (H, W, C), values in ``[0, 1]`` (a share exactly 0 or 1; the
gates map ``[0, 1]^2`` into ``[0, 1]``, so every state stays there); ``target``
(H, W, C) in ``{0, 1}``; ``perception`` (K, 7, 16) logits (the tree's layers, 4, 2
and 1 neurons, one after the other) with ``perception_idx`` (K, 7, 2) (each
neuron's two inputs in the layer before); ``update`` (hidden + C, 16) with
``update_idx`` (hidden + C, 2). The op draws its own values (its state lives in
``[0, 1]``; logits are the family's, non-finite ones replaced by 0 and clipped to
``[-32, 32]``). Outputs ``y`` (the final grid), ``loss`` (1,), ``grad_grid``,
``grad_perception`` and ``grad_update``.

Bounds by composition (:mod:`numoracle.oracle.logic_gates`): the forward pass step
by step with every state's radius; the backward pass step by step in reverse, each
layer's input gradient a sum of monomial terms, each cell's input gradient
distributed to its neighbourhood as a sum of ``1 + 9 K`` contributions (fewer at a
zero boundary) in any order, and each layer's gradient of the probabilities summed
over every cell, channel and step in any order before one softmax backward (the
seed's accumulation over cells and steps; autograd on shared probabilities).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np

from ...errors import InvalidArgument
from ..elementwise import mul
from ..formats import Format, quantize
from ..logic_gates import (
    N_GATES,
    LayerCache,
    gate_prob_grad,
    layer_backward,
    layer_forward,
    softmax,
    softmax_backward,
)
from ..precision import PrecisionModel
from ..tracked import Tracked, exact, matmul, mul_scalar, store, sub, sum_, tcat, tmap
from .base import Op, Product, check_positive_int, on_the_host
from .logic_layer import as_index, connection_map
from .plan import Dim, Flag

__all__ = ["LogicCA", "LOGIC_CA_OUTPUTS", "PERCEPTION_WIDTHS", "OFFSETS", "logic_ca"]

LOGIC_CA_OUTPUTS = ("y", "loss", "grad_grid", "grad_perception", "grad_update")
PERCEPTION_WIDTHS = (4, 2, 1)
OFFSETS = tuple((dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1))
_LIMITS = {"height": 64, "width": 64, "channels": 16, "steps": 32, "kernels": 4, "hidden": 64}
#: share of the initial grid set exactly to 0 and to 1 (each)
BINARY_SHARE = 0.25
LOGIT_CLIP = 32.0


class LogicCA(Op):
    name = "logic_ca"
    group = "logic"
    #: small by default (a case is cheap); ``params`` reach up to :data:`_LIMITS`
    plan = (Flag("periodic"), Dim("steps", 4), Dim("height", 8), Dim("width", 8),
            Dim("channels", 4), Dim("kernels", 2), Dim("hidden", 8))
    param_names = ("height", "width", "channels", "steps", "kernels", "hidden", "periodic")
    parameters = ("perception", "update")
    passes_params = True
    precision_ladder = False

    def validate(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self._reject_unknown(params)
        out: dict[str, Any] = {k: check_positive_int(k, params.get(k), upper=v)
                               for k, v in _LIMITS.items()}
        periodic = params.get("periodic", True)
        if not isinstance(periodic, (bool, np.bool_)):
            raise InvalidArgument(f"periodic={periodic!r} must be a bool (True: the grid wraps "
                                  "around; False: zeros beyond the edge)")
        out["periodic"] = bool(periodic)
        return out

    def input_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        h, w, c = params["height"], params["width"], params["channels"]
        k, u = params["kernels"], params["hidden"]
        return {"grid": (h, w, c), "target": (h, w, c), "perception": (k, 7, N_GATES),
                "perception_idx": (k, 7, 2), "update": (u + c, N_GATES),
                "update_idx": (u + c, 2)}

    def outputs(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        return LOGIC_CA_OUTPUTS

    def output_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        s = self.input_shapes(params)
        return {"y": s["grid"], "loss": (1,), "grad_grid": s["grid"],
                "grad_perception": s["perception"], "grad_update": s["update"]}

    def reductions(self, params: Mapping[str, Any]) -> dict[str, int]:
        cells = params["height"] * params["width"]
        n = cells * params["channels"] * params["steps"]
        return {"y": 34, "loss": cells * params["channels"], "grad_grid": 1 + 9 * params["kernels"],
                "grad_perception": 4 * n, "grad_update": 4 * n}

    def products(self, params: Mapping[str, Any]) -> tuple[Product, ...]:
        return (Product("grid", "target", params["height"] * params["width"]),)

    def prepare_inputs(self, arrays: dict[str, np.ndarray], params: Mapping[str, Any],
                       storage: Format, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """States in ``[0, 1]``, a binary target, finite clipped logits and the
        connection maps, from the case's generator."""
        shape = arrays["grid"].shape
        grid = rng.random(shape)
        pick = rng.random(shape)
        grid = np.where(pick < BINARY_SHARE, 0.0, np.where(pick < 2 * BINARY_SHARE, 1.0, grid))
        arrays["grid"] = quantize(grid, storage)
        arrays["target"] = (rng.random(shape) < 0.5).astype(np.float64)
        for name in ("perception", "update"):
            w = np.where(np.isfinite(arrays[name]), arrays[name], 0.0)
            arrays[name] = quantize(np.clip(w, -LOGIT_CLIP, LOGIT_CLIP), storage)
        c, k, u = params["channels"], params["kernels"], params["hidden"]
        pidx = np.zeros((k, 7, 2))
        for kk in range(k):
            off, n_in = 0, 9
            for width in PERCEPTION_WIDTHS:
                a, b = connection_map(n_in, width, rng)
                pidx[kk, off:off + width, 0], pidx[kk, off:off + width, 1] = a, b
                off, n_in = off + width, width
        uidx = np.zeros((u + c, 2))
        uidx[:u, 0], uidx[:u, 1] = connection_map(c * (1 + k), u, rng)
        uidx[u:, 0], uidx[u:, 1] = connection_map(u, c, rng)
        arrays["perception_idx"], arrays["update_idx"] = pidx, uidx
        return arrays

    def reference(self, inputs: Mapping[str, np.ndarray], params: Mapping[str, Any],
                  model: PrecisionModel, outputs: tuple[str, ...] = ()) -> dict[str, Tracked]:
        self._check_inputs(inputs, params)
        want = outputs or LOGIC_CA_OUTPUTS
        host, back = on_the_host(inputs)  # (its arithmetic is NumPy's)
        for name in ("grid", "target", "perception", "update"):
            if not np.all(np.isfinite(host[name])):
                raise InvalidArgument(f"logic_ca: input {name!r} holds non-finite values; the "
                                      "automaton's inputs are finite (see prepare_inputs)")
        res = logic_ca(host, params, model)
        return {k: back(store(v, model)) for k, v in res.items() if k in want}


def _indices(host: Mapping[str, np.ndarray], params: Mapping[str, Any]) -> tuple[Any, Any]:
    c, k, u = params["channels"], params["kernels"], params["hidden"]
    pidx = []
    for kk in range(k):
        off, n_in, layers = 0, 9, []
        for width in PERCEPTION_WIDTHS:
            sl = host["perception_idx"][kk, off:off + width]
            layers.append((as_index(sl[:, 0], n_in, "perception_idx"),
                           as_index(sl[:, 1], n_in, "perception_idx"), off, width))
            off, n_in = off + width, width
        pidx.append(layers)
        del layers
    ui = host["update_idx"]
    uidx = [(as_index(ui[:u, 0], c * (1 + k), "update_idx"),
             as_index(ui[:u, 1], c * (1 + k), "update_idx"), 0, u),
            (as_index(ui[u:, 0], u, "update_idx"), as_index(ui[u:, 1], u, "update_idx"), u, c)]
    return pidx, uidx


def _shift(a: np.ndarray, dy: int, dx: int, periodic: bool) -> np.ndarray:
    """``out[y, x] = a[y + dy, x + dx]`` (wrapped, or 0 beyond the edge)."""
    if periodic:
        return np.roll(a, shift=(-dy, -dx), axis=(0, 1))
    h, w = a.shape[:2]
    out = np.zeros_like(a)
    ys, xs = slice(max(0, -dy), min(h, h - dy)), slice(max(0, -dx), min(w, w - dx))
    yt, xt = slice(max(0, dy), min(h, h + dy)), slice(max(0, dx), min(w, w + dx))
    out[ys, xs] = a[yt, xt]
    return out


def _columns(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Columns ``lo:hi`` of ``(cells, F)`` as one column ``(cells * (hi - lo), 1)``."""
    return a[:, lo:hi].reshape(-1, 1)


def _sent(a: np.ndarray, pos: int, dy: int, dx: int, periodic: bool) -> np.ndarray:
    """Position ``pos`` of ``(H, W, C, 9)`` neighbourhood gradients, shifted to the
    cells they belong to."""
    return _shift(a[..., pos], dy, dx, periodic)


def _neighbourhood(x: Tracked, periodic: bool) -> Tracked:
    """``(H, W, C, 9)``: the 9 shifted copies of ``x`` stacked."""
    return tmap(x, lambda a: np.stack([_shift(a, dy, dx, periodic) for dy, dx in OFFSETS],
                                      axis=-1))


def logic_ca(host: Mapping[str, np.ndarray], params: Mapping[str, Any],
             model: PrecisionModel) -> dict[str, Tracked]:
    """Every output of the automaton on exact inputs (module docstring), not yet stored."""
    h, w, c = params["height"], params["width"], params["channels"]
    steps, periodic = params["steps"], params["periodic"]
    k_count = params["kernels"]
    pidx, uidx = _indices(host, params)
    cells = h * w
    with np.errstate(over="ignore", invalid="ignore"):
        pp = softmax(exact(host["perception"].reshape(k_count * 7, N_GATES)), model)
        pu = softmax(exact(host["update"]), model)

        def rows_of(p: Tracked, lo: int, n: int) -> Tracked:
            return tmap(p, lambda a: a[lo:lo + n])

        x = exact(host["grid"])
        caches: list[dict[str, Any]] = []
        for _ in range(steps):
            rows = tmap(_neighbourhood(x, periodic), lambda a: a.reshape(cells * c, 9))
            feats = [tmap(x, lambda a: a.reshape(cells, c))]
            step: dict[str, Any] = {"perc": []}
            for kk in range(k_count):
                z, layer_caches = rows, []
                for ia, ib, off, width in pidx[kk]:
                    z, cache = layer_forward(z, ia, ib, rows_of(pp, kk * 7 + off, width), model)
                    layer_caches.append(cache)
                step["perc"].append(layer_caches)
                feats.append(tmap(z, lambda a: a.reshape(cells, c)))
            z = tcat(feats, axis=1)
            step["upd"] = []
            for ia, ib, off, width in uidx:
                z, cache = layer_forward(z, ia, ib, rows_of(pu, off, width), model)
                step["upd"].append(cache)
            x = tmap(z, lambda a: a.reshape(h, w, c))
            caches.append(step)

        n_val = h * w * c
        d = sub(x, exact(host["target"]), model)
        flat = tmap(mul(d, d, model), lambda a: a.reshape(1, n_val))
        loss = mul_scalar(sum_(flat, axis=-1, model=model), float(n_val), model, divide=True,
                          c_rel_err=model.storage.u)
        # d loss / d y = 2 (y - target) / N = (y - target) / (N / 2)
        g = mul_scalar(d, n_val / 2.0, model, divide=True, c_rel_err=model.storage.u)

        upd_g: list[list[Tracked]] = [[] for _ in uidx]
        upd_c: list[list[LayerCache]] = [[] for _ in uidx]
        perc_g: list[list[list[Tracked]]] = [[[] for _ in PERCEPTION_WIDTHS]
                                             for _ in range(k_count)]
        perc_c: list[list[list[LayerCache]]] = [[[] for _ in PERCEPTION_WIDTHS]
                                                for _ in range(k_count)]
        # each cell's number of gradient contributions: the same at every step
        counts = np.ones((h, w, c), np.int64)
        for _ in range(k_count):
            for dy, dx in OFFSETS:
                counts += _shift(np.ones((h, w, c), np.int64), -dy, -dx, periodic)
        for step in reversed(caches):
            gz = tmap(g, lambda a: a.reshape(cells, c))
            for li in reversed(range(len(uidx))):
                _, _, off, width = uidx[li]
                upd_g[li].append(gz)
                upd_c[li].append(step["upd"][li])
                gz = layer_backward(gz, rows_of(pu, off, width), step["upd"][li], model)
            contribs = [tmap(gz, lambda a: a[:, :c].reshape(h, w, c))]
            for kk in range(k_count):
                gk = tmap(gz, partial(_columns, lo=c * (1 + kk), hi=c * (2 + kk)))
                for li in reversed(range(len(PERCEPTION_WIDTHS))):
                    _, _, off, width = pidx[kk][li]
                    perc_g[kk][li].append(gk)
                    perc_c[kk][li].append(step["perc"][kk][li])
                    gk = layer_backward(gk, rows_of(pp, kk * 7 + off, width),
                                        step["perc"][kk][li], model)
                nb = tmap(gk, lambda a: a.reshape(h, w, c, 9))
                for pos, (dy, dx) in enumerate(OFFSETS):
                    # the cell (y, x) read (y + dy, x + dx): send its gradient there
                    contribs.append(tmap(nb, partial(_sent, pos=pos, dy=-dy, dx=-dx,
                                                     periodic=periodic)))
            flat_shape = (n_val, len(contribs))  # positional: numpy < 2.1 has no shape=
            stacked = tmap(tcat(contribs, axis=-1, stack=True), _reshaper(flat_shape))
            ones = exact(np.ones((len(contribs), 1)))
            g = tmap(matmul(stacked, ones, model, terms=counts.reshape(n_val, 1)),
                     lambda a: a.reshape(h, w, c))

        out: dict[str, Tracked] = {"y": x, "loss": loss, "grad_grid": g}
        gp_rows = []
        for kk in range(k_count):
            for li in range(len(PERCEPTION_WIDTHS)):
                gp_rows.append(gate_prob_grad(perc_g[kk][li], perc_c[kk][li], model))
        gp = softmax_backward(pp, tcat(gp_rows, axis=0), model)
        out["grad_perception"] = tmap(gp, lambda a: a.reshape(k_count, 7, N_GATES))
        gu = tcat([gate_prob_grad(upd_g[li], upd_c[li], model) for li in range(len(uidx))],
                  axis=0)
        out["grad_update"] = softmax_backward(pu, gu, model)
    return out


def _reshaper(shape: tuple[int, ...]) -> Callable[[np.ndarray], np.ndarray]:
    """``a -> a.reshape(shape)`` (the shape positional: numpy < 2.1 has no ``shape=``)."""
    def reshape(a: np.ndarray) -> np.ndarray:
        return np.reshape(a, shape)
    return reshape
