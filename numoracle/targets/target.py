"""Targets: a kernel under test, the backend it runs on and the precision it claims."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..cases.layouts import ALL_LAYOUTS, MEMORY_LAYOUTS, check_layout_name
from ..errors import InvalidArgument
from ..oracle.precision import PrecisionModel, get_model

__all__ = ["Target", "LAYOUTS", "BACKENDS", "GPU_BACKENDS"]

#: Memory layouts a case can hand an input in:
#: ``C`` row-major contiguous, ``F`` column-major (Fortran order),
#: ``T`` a transposed view of a contiguous array (last two axes),
#: ``S`` non-contiguous strides (every other element of a larger buffer).
#: Inputs with named axes (a convolution's) also take axis orders such as
#: ``"NHWC"`` or ``"HWIO:F"`` (see :mod:`numoracle.cases.layouts`).
LAYOUTS = MEMORY_LAYOUTS
BACKENDS = ("numpy", "torch-cpu", "torch-cuda", "cupy")
#: the backends whose kernels run on a CUDA GPU
GPU_BACKENDS = ("torch-cuda", "cupy")


@dataclass(frozen=True)
class Target:
    """A kernel under test.

    Parameters
    ----------
    name : str
        Unique name, e.g. ``"torch-cuda-tf32"``.
    op : str
        The op it computes (``"linear"``, ``"matmul"``).
    backend : str
        One of :data:`BACKENDS`: where its inputs live.
    precision : PrecisionModel or str
        The precision model it claims; a preset name is accepted.
    fn : callable
        ``fn(**inputs) -> Mapping[str, array]``: takes the op's inputs as
        backend arrays (keyword arguments named as the op names them) and
        returns the outputs it computes, by name. For ops whose kernels need
        parameters the shapes do not tell (``conv2d``: stride, padding,
        dilation, groups) it is also given ``params``, the case's parameters.
    outputs : tuple of str
        Which of the op's outputs ``fn`` returns; empty means all of them.
    layouts : tuple of str, or mapping of input name to tuple of str
        The input layouts it accepts (see :data:`LAYOUTS` and
        :mod:`numoracle.cases.layouts`), for every input or per input (inputs a
        mapping leaves out accept ``("C",)``). An input drawn in a layout the
        target does not accept is handed over in its first accepted layout.
    output_layouts : mapping of output name to str
        The axis order of each output with named axes that ``fn`` returns
        (``{"y": "NHWC", "grad_weight": "HWIO"}``); outputs left out are in the
        op's canonical order. The runner brings them back before judging.
    max_reduction : int or None
        Longest reduction it should be tested on (None: no limit).
    source : str or None
        Where a repro finds this target again: a module or ``.py`` path whose
        ``TARGETS`` holds it; None for the built-in targets.
    available : callable
        ``available() -> str | None``: None when usable here, else the reason.
    engine : callable or None
        ``engine(call) -> str``: runs ``call()`` (one call of the kernel) and
        names the engine or algorithm the library used for it (cuDNN's kernels:
        implicit GEMM, Winograd, FFT). A failing verdict records it, and its
        repro; None where the backend cannot tell.
    """

    name: str
    op: str
    backend: str
    precision: PrecisionModel
    fn: Callable[..., Mapping[str, Any]]
    outputs: tuple[str, ...] = ()
    layouts: tuple[str, ...] | Mapping[str, tuple[str, ...]] = LAYOUTS
    output_layouts: Mapping[str, str] = field(default_factory=dict)
    max_reduction: int | None = None
    available: Callable[[], str | None] = field(default=lambda: None, compare=False)
    description: str = ""
    source: str | None = None
    engine: Callable[[Callable[[], Any]], str] | None = field(default=None, compare=False)

    @property
    def on_gpu(self) -> bool:
        """Whether the kernel runs on a CUDA GPU (:data:`GPU_BACKENDS`)."""
        return self.backend in GPU_BACKENDS

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise InvalidArgument(
                f"backend={self.backend!r} is unknown; use one of {BACKENDS}"
            )
        if not callable(self.fn):
            raise InvalidArgument(f"fn={self.fn!r} must be callable: fn(**inputs) -> dict")
        groups = self.layouts.values() if isinstance(self.layouts, Mapping) else [self.layouts]
        for group in groups:
            if isinstance(group, str) or not isinstance(group, (tuple, list)) or not group \
                    or any(lay not in ALL_LAYOUTS for lay in group):
                raise InvalidArgument(
                    f"layouts={self.layouts!r} must be a non-empty subset of {ALL_LAYOUTS}, "
                    "or a mapping of input name to such a subset"
                )
        if isinstance(self.layouts, Mapping):
            object.__setattr__(self, "layouts", {k: tuple(v) for k, v in self.layouts.items()})
        else:
            object.__setattr__(self, "layouts", tuple(self.layouts))
        if not isinstance(self.output_layouts, Mapping):
            raise InvalidArgument(
                f"output_layouts={self.output_layouts!r} must map output names to axis "
                "orders, e.g. {'y': 'NHWC'}"
            )
        for lay in self.output_layouts.values():
            check_layout_name(lay)
            if lay in MEMORY_LAYOUTS or ":" in lay:
                raise InvalidArgument(
                    f"output layout {lay!r} must be an axis order such as 'NHWC' or 'HWIO' "
                    "(outputs are read through their strides, whatever their memory order)"
                )
        if not isinstance(self.precision, PrecisionModel):
            object.__setattr__(self, "precision", get_model(self.precision))

    def accepted_layouts(self, name: str) -> tuple[str, ...]:
        """The layouts the target accepts for input ``name``."""
        if isinstance(self.layouts, Mapping):
            return tuple(self.layouts.get(name, ("C",)))
        return tuple(self.layouts)

    def unavailable_reason(self) -> str | None:
        """Why this target cannot run here, or None."""
        try:
            return self.available()
        except Exception as exc:  # noqa: BLE001 - an availability probe must never crash a run
            return f"availability check raised {type(exc).__name__}: {exc}"
