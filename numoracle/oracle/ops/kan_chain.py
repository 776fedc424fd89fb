"""``kan_chain``: a network of 1-3 KAN layers, forward through all of them and
backward from an upstream gradient at the last one.

Layer ``l`` (``l = 0 .. L - 1``) is the layer of :mod:`numoracle.oracle.ops.kan`
from ``widths[l]`` to ``widths[l + 1]`` features, with its own ``grid_l``,
``coef_l``, ``base_weight_l`` and ``spline_weight_l``; all layers share the grid
size and the spline order (the polynomial degree). Inputs: ``x``
``(B, widths[0])``, the four parameter arrays of every layer and ``grad_output``
``(B, widths[L])``. Outputs, per layer: ``y_l`` (its output, the next layer's
input), ``grad_input_l`` (the gradient with respect to its input: the first
layer's included, which is seed 001's bug), ``grad_coef_l``,
``grad_base_weight_l``, ``grad_spline_weight_l``.

Bounds, by composition of :func:`~numoracle.oracle.ops.kan.kan_layer` over
tracked values: layer ``l + 1``'s input is layer ``l``'s tracked ``y`` after the
store to the storage format (its value exact, its radius the bound of ``y_l``),
and its bases and derivatives are widened by their Lipschitz constants over
that radius; layer ``l``'s upstream gradient is the stored tracked
``grad_input_{l+1}``, whose radius every gradient of layer ``l`` carries on
through its contractions. So a kernel that computes each layer within its model
from its *own* rounded intermediates is within the bound of every output; an
element whose bound depends on an overflowing or non-finite intermediate is
not judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import InvalidArgument
from ..bspline import uniform_grid
from ..formats import Format, quantize
from ..precision import PrecisionModel
from ..tracked import Tracked, store
from .base import Op, Product, check_positive_int, on_the_host
from .kan import KAN_OUTPUTS, MAX_GRID, as_input, check_order, kan_layer, place_near_knots
from .plan import Choice, Dim, Widths

__all__ = ["KanChain", "MAX_LAYERS", "MAX_WIDTH", "chain_outputs", "layer_inputs"]

#: deepest chain
MAX_LAYERS = 3
#: widest layer of a chain
MAX_WIDTH = 64
_PARAMS = ("coef", "base_weight", "spline_weight")
_GRADS = KAN_OUTPUTS[1:]


def chain_outputs(layers: int) -> tuple[str, ...]:
    """``y_0 .. y_{L-1}`` then, per layer, its four gradients."""
    return tuple(f"y_{i}" for i in range(layers)) + tuple(
        f"{g}_{i}" for i in range(layers) for g in _GRADS)


def layer_inputs(layer: int) -> tuple[str, ...]:
    """The input names of layer ``layer``'s parameters: grid, coef, base and spline weight."""
    return tuple(f"{n}_{layer}" for n in ("grid",) + _PARAMS)


def _check_widths(widths: Any, layers: int) -> tuple[int, ...]:
    if isinstance(widths, (str, bytes)) or not hasattr(widths, "__len__") \
            or len(widths) != layers + 1:
        raise InvalidArgument(f"kan_chain: {widths=} must be a sequence of layers + 1 = "
                              f"{layers + 1} feature counts (input, then each layer's output)")
    return tuple(check_positive_int(f"widths[{i}]", w, upper=MAX_WIDTH)
                 for i, w in enumerate(widths))


class KanChain(Op):
    name = "kan_chain"
    group = "kan"
    #: chains of 1-3 layers of small widths, shrinking towards one layer of one
    #: feature (the widths right after the depth: they follow it)
    plan = (Choice("layers", (1, 2, 3)), Widths("widths", "layers", 8),
            Choice("spline_order", (2, 3, 4, 5)), Dim("grid_size", 8),
            Dim("batch", 64, is_batch=True))
    param_names = ("layers", "widths", "batch", "grid_size", "spline_order")
    #: a chain's bound composes every layer: under a coarser model it grows so wide
    #: that "consistent with" it says nothing; a failure is diagnosed as a logic bug
    precision_ladder = False

    def validate(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self._reject_unknown(params)
        layers = check_positive_int("layers", params.get("layers", 1), upper=MAX_LAYERS)
        return {"layers": layers, "widths": _check_widths(params.get("widths"), layers),
                "batch": check_positive_int("batch", params.get("batch"), upper=1 << 12),
                "grid_size": check_positive_int("grid_size", params.get("grid_size", 5),
                                                upper=MAX_GRID),
                "spline_order": check_order(params.get("spline_order", 3))}

    def input_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        w, b = params["widths"], params["batch"]
        g, k = params["grid_size"], params["spline_order"]
        out: dict[str, tuple[int, ...]] = {"x": (b, w[0])}
        for i in range(params["layers"]):
            grid, coef, wb, ws = layer_inputs(i)
            out.update({grid: (w[i], g + 2 * k + 1), coef: (w[i + 1], w[i], g + k),
                        wb: (w[i + 1], w[i]), ws: (w[i + 1], w[i])})
        out["grad_output"] = (b, w[-1])
        return out

    def outputs(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        return chain_outputs(params["layers"])

    def output_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        w, b = params["widths"], params["batch"]
        c = params["grid_size"] + params["spline_order"]
        out: dict[str, tuple[int, ...]] = {}
        for i in range(params["layers"]):
            o, n = w[i + 1], w[i]
            out.update({f"y_{i}": (b, o), f"grad_input_{i}": (b, n),
                        f"grad_coef_{i}": (o, n, c), f"grad_base_weight_{i}": (o, n),
                        f"grad_spline_weight_{i}": (o, n)})
        return out

    def reductions(self, params: Mapping[str, Any]) -> dict[str, int]:
        w, b = params["widths"], params["batch"]
        c = params["grid_size"] + params["spline_order"]
        out: dict[str, int] = {}
        for i in range(params["layers"]):
            out.update({f"y_{i}": w[i] * (c + 1), f"grad_input_{i}": w[i + 1] * (c + 1),
                        f"grad_coef_{i}": b, f"grad_base_weight_{i}": b,
                        f"grad_spline_weight_{i}": b * c})
        return out

    def products(self, params: Mapping[str, Any]) -> tuple[Product, ...]:
        r = self.reductions(params)
        out = [Product("x", "grad_output", r["grad_base_weight_0"])]
        for i in range(params["layers"]):
            _, coef, wb, ws = layer_inputs(i)
            out += [Product(coef, ws, r[f"y_{i}"]), Product(wb, "grad_output",
                                                            r[f"grad_input_{i}"])]
        return tuple(out)

    def prepare_inputs(self, arrays: dict[str, np.ndarray], params: Mapping[str, Any],
                       storage: Format, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Every layer's uniform grid (rounded to ``storage``), and a share of
        ``x`` on, one rounding from, and outside the first layer's knots."""
        w, g, k = params["widths"], params["grid_size"], params["spline_order"]
        for i in range(params["layers"]):
            arrays[f"grid_{i}"] = quantize(uniform_grid(w[i], g, k), storage)
        arrays["x"] = place_near_knots(arrays["x"], arrays["grid_0"], storage, rng)
        return arrays

    def reference(self, inputs: Mapping[str, np.ndarray], params: Mapping[str, Any],
                  model: PrecisionModel, outputs: tuple[str, ...] = ()) -> dict[str, Tracked]:
        self._check_inputs(inputs, params)
        host, back = on_the_host(inputs)  # (its arithmetic is NumPy's)
        # an intermediate that overflows makes infinite or NaN radii downstream:
        # those elements are not judged, and the floating-point warnings are expected
        with np.errstate(over="ignore", invalid="ignore"):
            res = chain_reference(host, params["layers"], params["spline_order"], model)
        want = outputs or chain_outputs(params["layers"])
        return {k: back(res[k]) for k in want}


def chain_reference(host: Mapping[str, np.ndarray], layers: int, order: int,
                    model: PrecisionModel) -> dict[str, Tracked]:
    """Every output of the chain, stored: forward layer by layer on the stored
    tracked ``y``, then backward layer by layer on the stored tracked ``grad_input``.

    Each output's bound is its layer's :func:`kan_layer` bound over inputs that
    carry the radii of the layers before it (forward) or after it (backward).
    """
    def params_of(i: int) -> tuple[np.ndarray, Tracked, Tracked, Tracked]:
        grid, coef, wb, ws = layer_inputs(i)
        return (host[grid], as_input(host[coef], model), as_input(host[wb], model),
                as_input(host[ws], model))

    xs = [as_input(host["x"], model)]
    out: dict[str, Tracked] = {}
    for i in range(layers):
        grid, coef, wb, ws = params_of(i)
        y = store(kan_layer(xs[i], grid, coef, wb, ws, order, model)["y"], model)
        out[f"y_{i}"] = y
        xs.append(y)
    g = as_input(host["grad_output"], model)
    for i in reversed(range(layers)):
        grid, coef, wb, ws = params_of(i)
        res = kan_layer(xs[i], grid, coef, wb, ws, order, model, g=g, outputs=_GRADS)
        for name in _GRADS:
            out[f"{name}_{i}"] = store(res[name], model)
        g = out[f"grad_input_{i}"]
    return out
