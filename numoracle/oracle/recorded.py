"""A hand-written op's reference recorded and replayed (``NUMORACLE_RECORD``).

A hand-written op's reference in torch's namespace on a GPU makes a few hundred
small tensor operations and a handful of decisions on the device's values per
case (at 128x1024x1024 the linear backward costs the host about a millisecond,
the device a fraction of that). :func:`reference` evaluates it as
:meth:`Op.reference <numoracle.oracle.ops.base.Op.reference>` does, and, where
:func:`mode` (the switch of all recorded evaluations, traced and
hand-written) turns recordings on and the inputs are torch's tensors (or torch's NumPy arrays), keeps one recording per
signature (op, shapes, dtypes, parameters, precision model, outputs asked for):
the signature's second case is recorded, the later ones replayed, op by op or
compiled, as the traced oracle's evaluations are
(:mod:`~numoracle.oracle.traced.recording`: every decision a guard, a failed
guard evaluates the case afresh). Everywhere else it is ``op.reference``.

Examples
--------
>>> import numpy as np
>>> from numoracle.oracle.ops import get_op
>>> from numoracle.oracle.precision import get_model
>>> op = get_op("linear")
>>> params = op.validate({"batch": 2, "in_features": 3, "out_features": 2, "bias": True})
>>> rng = np.random.default_rng(0)
>>> inputs = {k: rng.standard_normal(s).astype(np.float32).astype(np.float64)
...           for k, s in op.input_shapes(params).items()}
>>> sorted(reference(op, inputs, params, get_model("fp32")))  # NumPy: op.reference's
['grad_bias', 'grad_input', 'grad_weight', 'y']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .precision import PrecisionModel
from .recording_mode import mode
from .tracked import Tracked
from .xp import array_module, is_torch, namespace_named

if TYPE_CHECKING:
    from .ops.base import Op
    from .traced.recording import Recordings

__all__ = ["reference", "recordings", "device_inputs"]

#: the recordings of each op, by the op's name
_RECORDINGS: dict[str, Recordings] = {}


def recordings(op: Op) -> Recordings:
    """The recordings kept for ``op`` in this process (their counts of replays and
    refusals say how they were used)."""
    from .traced.recording import Recordings  # noqa: PLC0415 - torch's, only with tensors

    return _RECORDINGS.setdefault(op.name, Recordings())


def reference(op: Op, inputs: Mapping[str, Any], params: Mapping[str, Any],
              model: PrecisionModel, outputs: tuple[str, ...] = ()) -> dict[str, Tracked]:
    """``op.reference(inputs, params, model, outputs)``, replayed from a recording of
    an earlier case of the same signature where recordings are switched on and
    ``inputs`` are torch's (on any device); the same values and radii, bit for bit,
    in op-by-op replays (compiled replays: within the oracle's own rounding, radii
    raised by :data:`~numoracle.oracle.traced.recording.COMPILED_SLACK`)."""
    tensors = _tensors(inputs)
    if tensors is None:  # (NumPy's or CuPy's: torch is not imported)
        return op.reference(inputs, params, model, outputs)
    how = mode()
    if how == "off":
        return op.reference(inputs, params, model, outputs)
    from .traced.recording import signature  # noqa: PLC0415 - torch's

    xp = namespace_named("torch")
    device = next(iter(tensors.values())).device
    key = signature(op.name, tensors, (sorted(params.items()), repr(model), outputs,
                                       str(device)))

    def evaluate(given: dict[str, Any]) -> Mapping[str, Any]:
        return op.reference(given, params, model, outputs)

    got = recordings(op).evaluate(key, evaluate, tensors, xp, how)
    if got is None:
        return op.reference(inputs, params, model, outputs)
    return dict(got)


def _tensors(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """``inputs`` as torch's floating-point tensors, or None where one is not torch's
    (NumPy's and CuPy's are evaluated as usual) or not floating-point."""
    if not inputs:
        return None
    out = {}
    for k, v in inputs.items():
        if not is_torch(array_module(v)):
            return None
        t = getattr(v, "tensor", v)  # (torch's NumPy array holds a tensor)
        if not t.is_floating_point():
            return None
        out[k] = t
    return out


def device_inputs(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """``inputs``' floating-point arrays as torch's tensors on the GPU (integer ones stay
    on the host, as the ops take them in torch's namespace), where recordings are switched
    on (:func:`mode`) and torch has a CUDA device (the recordings are torch's); else None."""
    if mode() == "off":
        return None
    try:
        import torch  # noqa: PLC0415 - only with recordings switched on
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return {k: torch.as_tensor(v, device="cuda") if np.asarray(v).dtype.kind == "f" else v
            for k, v in inputs.items()}
