"""Layouts: the axis order and memory order an array is handed over in.

A layout name is either

* a **memory layout** of the op's canonical axis order (see
  :data:`MEMORY_LAYOUTS`): ``C`` row-major, ``F`` column-major, ``T`` a
  transposed view (last two axes), ``S`` strided; or
* an **axis order**, for inputs and outputs whose axes have names (a
  convolution's activations ``NCHW`` / ``NHWC``, its weights ``OIHW`` /
  ``OHWI`` / ``HWIO``), optionally followed by ``:F`` for the column-major
  storage of that axis order: ``"HWIO:F"`` is an array of shape
  ``(kH, kW, C_in/groups, C_out)`` stored in Fortran order.

An op names the axes of its inputs and outputs (``Op.input_axes`` and
``Op.output_axes``, canonical order first); cases and targets speak of layouts
by name; the runner permutes the canonical host arrays into a target's axis
order before handing them over (:func:`to_order`) and brings its outputs back
(:func:`from_order`). The memory order is the backend's business
(:meth:`numoracle.targets.backends.Backend.to_device`).

Examples
--------
>>> import numpy as np
>>> parse("HWIO:F", "OIHW")
Layout(order='HWIO', memory='F')
>>> to_order(np.zeros((8, 3, 5, 4)), "OIHW", "HWIO").shape
(5, 4, 3, 8)
>>> normalize("F", "NCHW")
'NCHW:F'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgument

__all__ = ["MEMORY_LAYOUTS", "AXIS_ORDERS", "ALL_LAYOUTS", "Layout", "parse", "normalize",
           "layouts_for", "accepts", "permutation", "to_order", "from_order", "shape_in",
           "check_layout_name"]

#: memory layouts of the canonical axis order, valid for every array
MEMORY_LAYOUTS = ("C", "F", "T", "S")
#: the axis orders of each canonical axis order (canonical first)
AXIS_ORDERS: Mapping[str, tuple[str, ...]] = {
    "NCHW": ("NCHW", "NHWC"),
    "OIHW": ("OIHW", "OHWI", "HWIO"),
}
#: every layout name: the memory layouts, then each axis order and its ``:F``
ALL_LAYOUTS: tuple[str, ...] = MEMORY_LAYOUTS + tuple(
    lay for orders in AXIS_ORDERS.values() for o in orders for lay in (o, f"{o}:F")
)


@dataclass(frozen=True)
class Layout:
    """A parsed layout: the axis order (None: the canonical one of an array
    without axis names) and the memory layout of that order."""

    order: str | None
    memory: str


def check_layout_name(layout: Any) -> str:
    """``layout`` when it is a known layout name, else InvalidArgument."""
    if not isinstance(layout, str) or layout not in ALL_LAYOUTS:
        raise InvalidArgument(
            f"layout {layout!r} is unknown; use a memory layout {MEMORY_LAYOUTS} or an axis "
            f"order, optionally column-major with ':F', from {ALL_LAYOUTS[len(MEMORY_LAYOUTS):]}"
        )
    return layout


def layouts_for(axes: str | None) -> tuple[str, ...]:
    """The layouts valid for an array whose canonical axis order is ``axes``
    (None: an array without axis names, which takes the memory layouts only)."""
    if axes is None:
        return MEMORY_LAYOUTS
    orders = AXIS_ORDERS.get(axes, (axes,))
    return MEMORY_LAYOUTS + tuple(lay for o in orders for lay in (o, f"{o}:F"))


def parse(layout: str, axes: str | None = None) -> Layout:
    """The axis order and memory layout ``layout`` names for an array whose
    canonical axis order is ``axes``.

    Raises
    ------
    InvalidArgument
        For an unknown name, or an axis order the array does not have (``NHWC``
        for a weight).
    """
    check_layout_name(layout)
    if layout in MEMORY_LAYOUTS:
        return Layout(axes, layout)
    if layout not in layouts_for(axes):
        what = "an array without named axes" if axes is None else f"an array with axes {axes}"
        raise InvalidArgument(
            f"layout {layout!r} is not valid for {what}; use one of {layouts_for(axes)}"
        )
    order, _, memory = layout.partition(":")
    return Layout(order, memory or "C")


def normalize(layout: str, axes: str | None) -> str:
    """The one name of ``layout`` for an array with canonical axes ``axes``:
    ``C`` and ``F`` of a named array become its canonical order (``"NCHW"``,
    ``"NCHW:F"``), so that equal layouts compare equal."""
    lay = parse(layout, axes)
    if lay.order is None or lay.memory in ("T", "S"):
        return layout
    return lay.order + (":F" if lay.memory == "F" else "")


def accepts(accepted: tuple[str, ...], layout: str, axes: str | None) -> bool:
    """Whether a target accepting ``accepted`` takes an array in ``layout``."""
    want = normalize(layout, axes)
    valid = layouts_for(axes)
    return any(a in valid and normalize(a, axes) == want for a in accepted)


def permutation(src: str, dst: str) -> tuple[int, ...]:
    """Axes of an array in order ``src`` that make it an array in order ``dst``
    (``arr.transpose(permutation(src, dst))``)."""
    if sorted(src) != sorted(dst) or len(set(src)) != len(src):
        raise InvalidArgument(f"axis orders {src!r} and {dst!r} must name the same axes once each")
    return tuple(src.index(a) for a in dst)


def shape_in(shape: tuple[int, ...], axes: str | None, order: str | None) -> tuple[int, ...]:
    """``shape`` (in the canonical order ``axes``) in the axis order ``order``."""
    if axes is None or order is None or order == axes:
        return tuple(shape)
    return tuple(shape[i] for i in permutation(axes, order))


def to_order(arr: Any, axes: str | None, order: str | None) -> Any:
    """A view of ``arr`` (canonical order ``axes``) in the axis order ``order``."""
    if axes is None or order is None or order == axes:
        return arr
    return arr.transpose(permutation(axes, order))


def from_order(arr: Any, axes: str | None, order: str | None) -> Any:
    """Inverse of :func:`to_order`: ``arr`` in order ``order`` back in ``axes``."""
    if axes is None or order is None or order == axes:
        return arr
    return arr.transpose(permutation(order, axes))
