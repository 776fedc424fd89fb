"""What a foreign target declares beside its arguments, read once for every kind.

A shared-library symbol, a WGSL shader and an external command each name the
op they compute (or hand a PyTorch reference that *is* the op), the op
parameters they fix, and end as a :class:`~numoracle.targets.target.Target`
whose inputs are handed over in the layouts their
:class:`~numoracle.foreign.spec.ArgSpec` declares. This module reads those
declarations the same way for each of them:

:func:`declared_op`
    the op's name, from ``op=`` or from ``reference=`` (a traced op) or a
    recorded ``traced`` spec;
:func:`fixed_params`
    ``params=`` checked against the op's parameter names;
:func:`foreign_target`
    the Target, its layouts taken from the spec.

Examples
--------
>>> fixed_params("optim", {"optimizer": "sgd"})
{'optimizer': 'sgd'}
>>> fixed_params("matmul", {"stride": 2})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
numoracle.errors.InvalidArgument: params names ['stride'], which are not parameters of matmul; ...
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import InvalidArgument
from ..oracle.ops import get_op
from ..oracle.precision import PrecisionModel
from ..targets.target import Target
from .spec import ArgSpec, _params_of

__all__ = ["declared_op", "fixed_params", "foreign_target", "spec_params"]


def declared_op(op: str | None, *, what: str, reference: Any = None, inputs: Any = None,
                dims: Mapping[str, Any] | None = None, grads: Sequence[str] = (),
                claims: Mapping[str, Any] | None = None,
                traced: Mapping[str, Any] | None = None) -> str:
    """The name of the op a foreign kernel computes.

    ``traced`` (a recorded traced op, as a spec file holds it) or ``reference``
    (a PyTorch function that is the op, with ``inputs``, ``dims``, ``grads``
    and ``claims`` as :func:`numoracle.check_kernel` takes them) make the op;
    otherwise ``op`` names a built-in one. ``what`` names the kernel in the
    message when neither is given (``"the symbol"``, ``"the shader"``).
    """
    if traced is not None or reference is not None:
        from ..oracle.traced.op import restore_op, traced_op  # noqa: PLC0415 - torch, on request

        if traced is not None:
            return restore_op(traced).name
        return traced_op(reference, inputs=inputs, dims=dims, grads=grads, name=op,
                         claims=claims).name
    if op is None:
        raise InvalidArgument(f"give op= (the op {what} computes) or reference= (a PyTorch "
                              "reference with inputs=)")
    return op


def fixed_params(op: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """``params`` checked against ``op``'s parameter names (JSON-ready values)."""
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise InvalidArgument(f"params={params!r} must map parameter names to the values the "
                              "kernel fixes, e.g. {'optimizer': 'sgd'}")
    names = get_op(op).param_names
    unknown = sorted(set(params) - set(names))
    if unknown:
        raise InvalidArgument(f"params names {unknown}, which are not parameters of {op}; "
                              f"its parameters are {list(names)}")
    return {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}


def spec_params(op: str) -> dict[str, Any]:
    """Valid parameters of ``op`` with every flag on (every input present)."""
    return _params_of(op)


def foreign_target(spec: ArgSpec, fn: Any, *, name: str, backend: str,
                   model: PrecisionModel, max_reduction: int | None, source: str,
                   description: str, available: Callable[[], str | None]) -> Target:
    """The Target of a foreign kernel: its inputs in their declared layouts,
    its outputs read back from theirs."""
    op = get_op(spec.op)
    layouts = {n: (spec.layout(n),) for n in op.input_shapes(spec_params(spec.op))}
    out_layouts = {n: order for n in spec.outputs
                   if (order := spec.order_and_memory(n)[0]) is not None}
    return Target(name=name, op=spec.op, backend=backend, precision=model, fn=fn,
                  outputs=spec.outputs, layouts=layouts, output_layouts=out_layouts,
                  max_reduction=max_reduction, available=available,
                  description=description, source=source)
