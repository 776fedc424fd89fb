"""Cases: plain data that says exactly which inputs a check uses.

A :class:`Case` is op + parameters + storage format + value family + seed +
layouts (+ a few overlaid special values). It prints, saves to JSON and
materialises the same float64 host arrays anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidArgument
from ..oracle.formats import get_format, quantize
from ..oracle.ops import Op, get_op
from .layouts import layouts_for
from .values import FAMILIES, generate_inputs, generate_integers

__all__ = ["Case"]


@dataclass(frozen=True)
class Case:
    """One test case.

    Parameters
    ----------
    op : str
        Op name (``"linear"``).
    params : dict
        The op's parameters (dimensions and flags), validated by the op.
    storage : str
        Storage format of the inputs (``"fp32"``, ``"bf16"``, ...).
    family : str
        Value family (see :data:`numoracle.cases.values.FAMILIES`).
    seed : int
        Seed of the host generator that makes the bulk values.
    layouts : dict
        Layout of each input (see :data:`numoracle.targets.target.LAYOUTS`; inputs
        with named axes also take axis orders such as ``"NHWC"`` or
        ``"HWIO:F"``, see :mod:`numoracle.cases.layouts`); missing inputs are
        row-major (``"C"``).
    overlays : tuple
        ``(input, flat_index, value)`` triples written over the bulk values
        (special values: signed zeros, subnormals, infinities, NaN).
    """

    op: str
    params: dict[str, Any]
    storage: str = "fp32"
    family: str = "normal"
    seed: int = 0
    layouts: dict[str, str] = field(default_factory=dict)
    overlays: tuple[tuple[str, int, float], ...] = ()

    def __post_init__(self) -> None:
        op = get_op(self.op)
        object.__setattr__(self, "params", op.validate(self.params))
        get_format(self.storage)
        if self.family not in FAMILIES:
            raise InvalidArgument(f"family={self.family!r} is unknown; use one of {FAMILIES}")
        if not isinstance(self.seed, (int, np.integer)) or isinstance(self.seed, bool):
            raise InvalidArgument(f"seed={self.seed!r} must be an int")
        shapes = op.input_shapes(self.params)
        for name, lay in self.layouts.items():
            if name not in shapes:
                raise InvalidArgument(f"layouts names {name!r}, which is not an input of "
                                      f"{self.op}; inputs are {sorted(shapes)}")
            valid = layouts_for(op.input_axes.get(name))
            if lay not in valid:
                raise InvalidArgument(f"layout {lay!r} of {name!r} must be one of {valid}")
        integers = op.integer_inputs(self.params)
        for name, idx, _ in self.overlays:
            if name not in shapes or not 0 <= idx < max(1, int(np.prod(shapes[name]))):
                raise InvalidArgument(f"overlay ({name!r}, {idx}) is outside the inputs {shapes}")
            if name in integers:
                raise InvalidArgument(f"overlay ({name!r}, {idx}) is on an integer input; "
                                      "special values go on floating-point inputs only")

    # -- materialisation -------------------------------------------------
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Shape of each input."""
        return get_op(self.op).input_shapes(self.params)

    def layout(self, name: str) -> str:
        """Layout of input ``name`` (``"C"`` unless the case says otherwise)."""
        return self.layouts.get(name, "C")

    def inputs(self) -> dict[str, np.ndarray]:
        """The inputs as float64 host arrays, every value exact in the storage
        format; integer inputs (:meth:`~numoracle.oracle.ops.base.Op.integer_inputs`)
        as ``int64`` or ``bool`` arrays, drawn after the others."""
        op = get_op(self.op)
        rng = np.random.default_rng(self.seed)
        fmt = get_format(self.storage)
        shapes = op.input_shapes(self.params)
        integers = op.integer_inputs(self.params)
        arrays = generate_inputs(  # already exact in fmt
            self.family, {k: s for k, s in shapes.items() if k not in integers},
            op.products(self.params), fmt, rng
        )
        if integers:
            arrays.update(generate_integers(integers, shapes, rng))
            arrays = {k: arrays[k] for k in shapes}
        if type(op).prepare_inputs is Op.prepare_inputs:
            # nothing else changes the values: quantizing the overlays alone gives
            # what quantizing every array again would (quantize is idempotent)
            for name, idx, value in self.overlays:
                arrays[name].reshape(-1)[idx] = quantize(np.float64(value), fmt)
            return arrays
        for name, idx, value in self.overlays:
            arrays[name].reshape(-1)[idx] = value
        arrays = op.prepare_inputs(arrays, self.params, fmt, rng)
        return {k: v if k in integers else quantize(v, fmt) for k, v in arrays.items()}

    # -- plain data --------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (floats of overlays as repr strings so inf/NaN survive)."""
        d = asdict(self)
        d["overlays"] = [[n, int(i), repr(float(v))] for n, i, v in self.overlays]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Case:
        """Inverse of :meth:`to_dict`."""
        d = dict(d)
        d["overlays"] = tuple((n, int(i), float(v)) for n, i, v in d.get("overlays", ()))
        d["layouts"] = dict(d.get("layouts", {}))
        return cls(**d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def size(self) -> int:
        """Total number of input elements: what shrinking minimises."""
        return int(sum(np.prod(s) for s in self.shapes().values()))

    def describe(self) -> str:
        """One line: ``linear(batch=2, in_features=3, ...) fp32 normal seed=7 x:F``."""
        ps = ", ".join(f"{k}={v}" for k, v in self.params.items())
        lay = " ".join(f"{k}:{v}" for k, v in sorted(self.layouts.items()) if v != "C")
        ov = f" +{len(self.overlays)} special" if self.overlays else ""
        return f"{self.op}({ps}) {self.storage} {self.family} seed={self.seed}{ov}" + (
            f" {lay}" if lay else ""
        )
