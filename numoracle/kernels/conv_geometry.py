"""The geometry of a 2-D convolution as the conv2d kernels take it: sizes, stride,
padding, dilation and groups validated against the arrays' shapes and axis order
(NCHW with OIHW weights, or NHWC with OHWI weights), and the int32 arguments the
CUDA kernels of :mod:`numoracle.kernels.cupy_conv2d` read.

Examples
--------
>>> g = ConvGeometry.from_shapes((1, 2, 5, 5), (4, 2, 3, 3), padding=1)
>>> (g.Ho, g.Wo)
(5, 5)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidArgument

__all__ = ["CONV_LAYOUTS", "SIZE_PARAMS", "ConvGeometry", "resolve_geometry"]

#: op parameters :func:`conv2d` accepts besides the geometry, checked against the arrays
SIZE_PARAMS = ("batch", "in_channels", "out_channels", "height", "width", "kernel_size")

#: activation layout -> (weight layout, the -D value the source is built with)
CONV_LAYOUTS: dict[str, tuple[str, int]] = {"NCHW": ("OIHW", 0), "NHWC": ("OHWI", 1)}

_INT32_MAX = 2**31 - 1
#: spatial extents are kept below this so that no int index expression overflows
_EXTENT_MAX = 2**28


def _pair(name: str, value: Any, *, low: int) -> tuple[int, int]:
    """An int or a pair of ints, each at least ``low``, as ``(h, w)``."""
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    ok = len(pair) == 2 and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) and low <= v < _EXTENT_MAX
        for v in pair
    )
    if not ok:
        rule = "a positive int" if low > 0 else "a non-negative int"
        raise InvalidArgument(f"{name}={value!r} must be {rule} or a pair (h, w) of them")
    return int(pair[0]), int(pair[1])


def _check_dim(name: str, value: int) -> int:
    if not 0 < value < _EXTENT_MAX:
        raise InvalidArgument(f"{name}={value} must lie in [1, 2**28) for the conv2d kernels")
    return int(value)


@dataclass(frozen=True)
class ConvGeometry:
    """The sizes of one 2-D convolution and the axis order of its arrays.

    Build it with :meth:`from_shapes`; ``layout`` is ``"NCHW"`` (weights
    ``OIHW``) or ``"NHWC"`` (weights ``OHWI``).

    Examples
    --------
    >>> g = ConvGeometry.from_shapes((2, 4, 9, 8), (6, 2, 3, 3), stride=2, padding=1)
    >>> g.G, g.Ho, g.Wo, g.shape("y")
    (2, 5, 4, (2, 6, 5, 4))
    """

    N: int
    C: int
    H: int
    W: int
    O: int  # noqa: E741 - the conventional name of the output channels
    KH: int
    KW: int
    Ho: int
    Wo: int
    sh: int
    sw: int
    ph: int
    pw: int
    dh: int
    dw: int
    G: int
    layout: str = "NCHW"

    @classmethod
    def from_shapes(
        cls,
        x_shape: tuple[int, ...],
        weight_shape: tuple[int, ...],
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int | None = None,
        layout: str = "NCHW",
    ) -> ConvGeometry:
        """The geometry of ``conv2d(x, weight)`` from the two shapes, in ``layout``.

        Raises InvalidArgument when the shapes or parameters do not describe a
        convolution with at least one output pixel.
        """
        if layout not in CONV_LAYOUTS:
            raise InvalidArgument(f"{layout=} is unknown; use one of {sorted(CONV_LAYOUTS)}")
        wlay = CONV_LAYOUTS[layout][0]
        if len(x_shape) != 4 or len(weight_shape) != 4:
            raise InvalidArgument(
                f"conv2d: x.shape={tuple(x_shape)} and weight.shape={tuple(weight_shape)} "
                f"must be 4-D, in {layout} and {wlay} order"
            )
        if layout == "NCHW":
            n, c, h, w = x_shape
            o, cg, kh, kw = weight_shape
        else:
            n, h, w, c = x_shape
            o, kh, kw, cg = weight_shape
        n, c, h, w, o, cg, kh, kw = (
            _check_dim(name, int(v))
            for name, v in zip(("N", "C", "H", "W", "O", "C/groups", "kH", "kW"),
                               (n, c, h, w, o, cg, kh, kw), strict=True)
        )
        if groups is None:
            if c % cg:
                raise InvalidArgument(
                    f"conv2d: x has C={c} channels, not a multiple of the weight's "
                    f"C/groups={cg}; check the layout ({layout} / {wlay})"
                )
            groups = c // cg
        if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
            raise InvalidArgument(f"{groups=} must be a positive int")
        if c != cg * groups or o % groups:
            raise InvalidArgument(
                f"conv2d: {groups=} needs C = groups * (weight's C/groups) and O a multiple "
                f"of groups; got C={c}, C/groups={cg}, O={o}"
            )
        sh, sw = _pair("stride", stride, low=1)
        ph, pw = _pair("padding", padding, low=0)
        dh, dw = _pair("dilation", dilation, low=1)
        ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        if ho < 1 or wo < 1 or max(h + 2 * ph, w + 2 * pw) >= _EXTENT_MAX:
            raise InvalidArgument(
                f"conv2d: the dilated kernel ({dh * (kh - 1) + 1} x {dw * (kw - 1) + 1}) is "
                f"larger than the padded input ({h + 2 * ph} x {w + 2 * pw}); use a smaller "
                "kernel or dilation, or more padding"
            )
        return cls(n, c, h, w, o, kh, kw, ho, wo, sh, sw, ph, pw, dh, dw, int(groups), layout)

    @property
    def Cg(self) -> int:  # noqa: N802 - named as in the CUDA source
        """Input channels per group."""
        return self.C // self.G

    @property
    def positions(self) -> int:
        """Output pixels over the batch, ``N * Ho * Wo``: grad_weight's reduction length."""
        return self.N * self.Ho * self.Wo

    def shape(self, array: str) -> tuple[int, ...]:
        """Shape of ``x``, ``weight``, ``bias``, ``y`` (= ``grad_output``) in this layout."""
        nhwc = self.layout == "NHWC"
        shapes = {
            "x": (self.N, self.H, self.W, self.C) if nhwc else (self.N, self.C, self.H, self.W),
            "weight": (self.O, self.KH, self.KW, self.Cg) if nhwc
            else (self.O, self.Cg, self.KH, self.KW),
            "bias": (self.O,),
            "y": (self.N, self.Ho, self.Wo, self.O) if nhwc
            else (self.N, self.O, self.Ho, self.Wo),
        }
        shapes["grad_output"] = shapes["y"]
        return shapes[array]

    def check_sizes(self, sizes: Mapping[str, Any]) -> None:
        """Check the op's size parameters (``batch``, ``in_channels``,
        ``out_channels``, ``height``, ``width``, ``kernel_size``; None skips one)
        against this geometry; InvalidArgument for an unknown name or a mismatch."""
        unknown = sorted(set(sizes) - set(SIZE_PARAMS))
        if unknown:
            raise InvalidArgument(
                f"conv2d: unknown parameter(s) {unknown}; pass the inputs, stride, padding, "
                f"dilation, groups, bias and optionally {list(SIZE_PARAMS)}"
            )
        have = {
            "batch": self.N, "in_channels": self.C, "out_channels": self.O,
            "height": self.H, "width": self.W, "kernel_size": (self.KH, self.KW),
        }
        for name, value in sizes.items():
            if value is None:
                continue
            if name == "kernel_size":
                value = _pair("kernel_size", value, low=1)
            if value != have[name]:
                raise InvalidArgument(
                    f"conv2d: {name}={value!r} does not match the arrays, which have "
                    f"{have[name]} ({self.layout} layout)"
                )

    def args(self) -> tuple[np.int32, ...]:
        """The ``CONV_PARAMS`` arguments of the kernels, in order."""
        for name in ("N", "C", "O"):
            if getattr(self, name) > _INT32_MAX:
                raise InvalidArgument(f"{name}={getattr(self, name)} exceeds int32")
        return tuple(
            np.int32(v)
            for v in (self.N, self.C, self.H, self.W, self.O, self.KH, self.KW, self.Ho,
                      self.Wo, self.sh, self.sw, self.ph, self.pw, self.dh, self.dw, self.G)
        )


_GEOMETRY_DEFAULTS = {"stride": 1, "padding": 0, "dilation": 1, "groups": None}


def resolve_geometry(
    x_shape: tuple[int, ...],
    weight_shape: tuple[int, ...],
    *,
    has_bias: bool,
    layout: str = "NCHW",
    params: Mapping[str, Any] | None = None,
    **given: Any,
) -> ConvGeometry:
    """The geometry of one call of a conv2d target.

    ``params`` is the case's op parameters (what the runner passes: ``stride``,
    ``padding``, ``dilation``, ``groups``, the sizes and the ``bias`` flag);
    ``given`` holds the same as keywords (None: not given), which win. The
    sizes and the bias flag must match the arrays.
    """
    merged: dict[str, Any] = dict(params or {})
    merged.update({k: v for k, v in given.items() if v is not None})
    conv = {k: merged.pop(k, default) for k, default in _GEOMETRY_DEFAULTS.items()}
    flag = merged.pop("bias", None)
    geom = ConvGeometry.from_shapes(x_shape, weight_shape, layout=layout, **conv)
    geom.check_sizes(merged)
    if flag is not None and bool(flag) != has_bias:
        raise InvalidArgument(
            f"conv2d: params say bias={flag!r} but a bias array was "
            f"{'given' if has_bias else 'not given'}"
        )
    return geom
