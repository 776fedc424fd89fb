"""The Op interface: parameters, shapes, accumulation lengths and a reference."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from ...errors import InvalidArgument
from ..formats import Format
from ..precision import PrecisionModel
from ..tracked import Tracked, moved
from ..xp import array_module, device_of, to_numpy
from .plan import REGIMES, Dim, Spec

__all__ = ["Op", "Product", "IntegerInput", "INTEGER_DTYPES", "check_positive_int",
           "with_bias_gradient", "on_the_host"]

#: the dtypes an integer input may have: indices and class labels, masks
INTEGER_DTYPES = ("int64", "bool")


@dataclass(frozen=True)
class Product:
    """Two inputs multiplied together and summed over ``n`` terms (plus ``extra``
    added terms such as a bias) somewhere in the op: what the exact-integer value
    family budgets its bit widths by."""

    a: str
    b: str
    n: int


@dataclass(frozen=True)
class IntegerInput:
    """An input that holds integers (class labels, indices) or booleans (masks)
    instead of floating-point values: drawn uniformly in ``[lo, hi)``, never
    rounded to a storage format, handed to kernels as ``dtype`` arrays."""

    lo: int
    hi: int
    dtype: str = "int64"


def with_bias_gradient(params: Mapping[str, Any]) -> tuple[str, ...]:
    """``y``, ``grad_input``, ``grad_weight`` and, with a bias, ``grad_bias``: the
    outputs of a layer with weights (linear, conv2d)."""
    return ("y", "grad_input", "grad_weight") + (("grad_bias",) if params["bias"] else ())


def on_the_host(inputs: Mapping[str, Any]) -> tuple[dict[str, np.ndarray],
                                                   Callable[[Tracked], Tracked]]:
    """The inputs as float64 host arrays, for a reference whose arithmetic is NumPy's
    (device arrays copied explicitly: CuPy's ``get``, a tensor's ``cpu``), and what
    hands a result back in the namespace and on the device of the first device
    input (a result unchanged where every input is on the host)."""
    host = {k: np.asarray(to_numpy(v), dtype=np.float64) for k, v in inputs.items()}
    for v in inputs.values():
        xp = array_module(v)
        if xp is not np:
            device = device_of(v)
            return host, lambda t: moved(t, xp, device)
    return host, lambda t: t


def check_positive_int(name: str, value: Any, *, upper: int | None = None) -> int:
    """Validate a dimension: a positive int (bool rejected), at most ``upper``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidArgument(f"{name}={value!r} must be a positive int")
    if upper is not None and value > upper:
        raise InvalidArgument(f"{name}={value!r} exceeds the limit {upper}; use a smaller {name}")
    return int(value)


class Op(ABC):
    """A named operation with validated parameters and an error-tracking reference.

    Subclasses define ``name``, :meth:`validate`, :meth:`input_shapes`,
    :meth:`outputs`, :meth:`reductions`, :meth:`products` and :meth:`reference`.
    """

    name: str = ""
    #: parameter names a case must give (dimensions and flags)
    param_names: tuple[str, ...] = ()
    #: how the strategies draw the parameters, in draw order (see
    #: :mod:`numoracle.oracle.ops.plan`); empty: every parameter a ``Dim``
    plan: ClassVar[tuple[Spec, ...]] = ()
    #: the plan of the ``realistic`` regime (real layer sizes, for GPUs); empty:
    #: the small plan serves both
    realistic_plan: ClassVar[tuple[Spec, ...]] = ()
    #: the name that stands for this op and its kin on the command line
    #: (``--ops kan``: the KAN layer and chains of layers); None: its own name only
    group: ClassVar[str | None] = None
    #: canonical axis order of the inputs whose axes have names (``{"x": "NCHW"}``);
    #: they may be handed over in another axis order (see :mod:`numoracle.cases.layouts`)
    input_axes: ClassVar[Mapping[str, str]] = MappingProxyType({})
    #: canonical axis order of the outputs whose axes have names
    output_axes: ClassVar[Mapping[str, str]] = MappingProxyType({})
    #: whether a kernel needs parameters its inputs' shapes do not tell (a
    #: convolution's stride, padding, dilation, groups): then targets are
    #: called with the case's parameters as one more keyword, ``params``
    passes_params: ClassVar[bool] = False
    #: inputs that are trained parameters (a layer's weight and bias): before the
    #: judged call a check hands the target other values of them, so that a kernel
    #: that keeps stale parameters after an update fails (DESIGN §4)
    parameters: ClassVar[tuple[str, ...]] = ()
    #: whether a result beyond the claimed bound may be explained by a coarser
    #: standard precision model (the diagnosis ladder of
    #: :func:`numoracle.checking.verdict.ladder_for`): true for ops whose outputs are each
    #: one contraction (linear, matmul, conv2d), where "consistent with tf32" is
    #: a finding. Composed ops (an optimizer step, a training step) set it
    #: False: their bound composes many roundings of the claimed model, so a
    #: coarser accumulation format says nothing, and a result beyond the bound
    #: is diagnosed as a logic bug. ``"traced"`` (a traced reference, whose rules
    #: take every claim): the ladder of coarser claims of
    #: :func:`numoracle.checking.verdict.traced_ladder`
    precision_ladder: ClassVar[bool | str] = True
    #: families of real workloads (``numoracle.cases.values.WORKLOAD_FAMILIES``)
    #: the op's inputs are meaningful for, drawn besides the general ones
    value_families: tuple[str, ...] = ()

    @abstractmethod
    def validate(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Return the params normalised, or raise InvalidArgument."""

    @abstractmethod
    def input_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        """Shape of each input, by name, in the op's canonical (row-major) axis order."""

    @abstractmethod
    def outputs(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        """Names of the outputs the op defines."""

    @abstractmethod
    def output_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        """Shape of each output, by name."""

    @abstractmethod
    def reductions(self, params: Mapping[str, Any]) -> dict[str, int]:
        """Accumulation length of each output element (terms summed), by output."""

    @abstractmethod
    def products(self, params: Mapping[str, Any]) -> tuple[Product, ...]:
        """The input pairs multiplied inside the op with their reduction lengths."""

    @abstractmethod
    def reference(
        self,
        inputs: Mapping[str, np.ndarray],
        params: Mapping[str, Any],
        model: PrecisionModel,
        outputs: tuple[str, ...] = (),
    ) -> dict[str, Tracked]:
        """Exact value and bound of each requested output (all when empty)."""

    def prepare_inputs(self, arrays: dict[str, np.ndarray], params: Mapping[str, Any],
                       storage: Format, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """The bulk inputs of a case, adjusted where the op needs structure that a
        value family does not give (a KAN layer's sorted knots): called by
        :meth:`numoracle.cases.case.Case.inputs` after the overlays, with the case's
        generator. The default returns ``arrays`` unchanged."""
        return arrays

    def params_from_shapes(self, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Any] | None:
        """The parameters of a case whose inputs have ``shapes``, for ops whose
        parameters the shapes tell only through arithmetic (a KAN layer's spline
        order: knots minus coefficients minus one); foreign targets read a case's
        parameters this way. The default: None (not told this way)."""
        return None

    def integer_inputs(self, params: Mapping[str, Any]) -> dict[str, IntegerInput]:
        """The inputs that hold integers or booleans, by name, with the range
        their values are drawn in for ``params``; every other input holds
        floating-point values of the storage format. The default: none."""
        return {}

    def notes(self) -> tuple[str, ...]:
        """Sentences about how the op judged its cases that a run's verdict
        states (a traced reference captured again for every case). The
        default: none."""
        return ()

    def draw_plan(self, regime: str = "small") -> tuple[Spec, ...]:
        """The specs the strategies draw in ``regime`` (``"small"`` or
        ``"realistic"``): :attr:`plan` (:attr:`realistic_plan` where given), or a
        :class:`Dim` per parameter."""
        if regime not in REGIMES:
            raise InvalidArgument(f"{regime=} is unknown; use one of {REGIMES}")
        if regime == "realistic" and self.realistic_plan:
            return self.realistic_plan
        return self.plan or tuple(Dim(name) for name in self.param_names)

    def _reject_unknown(self, params: Mapping[str, Any]) -> None:
        """Raise InvalidArgument when ``params`` names a parameter the op does not take."""
        unknown = set(params) - set(self.param_names)
        if unknown:
            raise InvalidArgument(f"{self.name}: unknown parameters {sorted(unknown)}; give "
                                  f"{self.param_names}")

    def _check_inputs(self, inputs: Mapping[str, np.ndarray], params: Mapping[str, Any]) -> None:
        for name, shape in self.input_shapes(params).items():
            if name not in inputs:
                raise InvalidArgument(f"{self.name}: input {name!r} is missing; give all of "
                                      f"{sorted(self.input_shapes(params))}")
            x = inputs[name]  # (an array's own shape: no NumPy dispatch to CuPy's)
            got = tuple(x.shape if hasattr(x, "shape") else np.shape(x))
            if got != shape:
                raise InvalidArgument(
                    f"{self.name}: input {name!r} has shape {got}, expected {shape} "
                    f"for params {dict(params)}"
                )

    def __repr__(self) -> str:
        return f"<op {self.name}>"
