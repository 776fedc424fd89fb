"""Correct targets of traced ops: torch running the reference itself.

A traced op (:class:`~numoracle.oracle.traced.op.TracedOp`) *is* its PyTorch
reference, so torch evaluating that reference eagerly in the claimed storage
dtype is a correct kernel of it: on the CPU in float32 and bfloat16 (under torch's
CPU elementwise accuracy, :data:`numoracle.oracle.accuracy.TORCH_CPU`), and on
CUDA in float32 with TF32 off, with TF32 on (cuBLAS and cuDNN), and in
bfloat16. Each target runs the reference (a module as a copy of it in the
storage dtype, its parameters the case's) and, for an op with gradients,
``torch.autograd.grad`` with the case's ``grad_<output>``; it returns every
output of the op.

The math flags each mode claims are pinned for the call as for the built-in
torch targets (:func:`~numoracle.kernels.torch_targets.precision_flags`), and
cuDNN's TF32 switch with them (on only for the TF32 mode), so a convolution in
the reference runs in the precision the target claims.

These targets are made per op (:func:`reference_targets`); the registry finds
them by name for a traced op (replay of a repro).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from typing import Any

from ..errors import InvalidArgument
from ..oracle.formats import get_format
from ..oracle.ops import get_op
from ..oracle.precision import get_model
from ..targets.target import Target
from .torch_targets import _NO_CONTEXT_WARNING, TorchMode, _available, _pinned, precision_flags

__all__ = ["MODES", "reference_targets", "run_reference"]


#: the modes a reference runs in: (mode, what it is)
MODES: tuple[tuple[TorchMode, str], ...] = (
    # torch's CPU kernels: GELU's erf by a polynomial with an absolute error (accuracy
    # profile torch-cpu)
    (TorchMode("cpu", "fp32", claims=(("accuracy", "torch-cpu"),)),
     "torch CPU float32, eager, torch's CPU elementwise accuracy"),
    (TorchMode("cpu", "bf16", claims=(("flush_subnormal_inputs", True),
                                      ("accuracy", "torch-cpu"))),
     "torch CPU bfloat16, eager (each op rounded to bfloat16), subnormal inputs flushed, "
     "torch's CPU elementwise accuracy"),
    (TorchMode("cuda", "fp32"), "torch CUDA float32, eager, TF32 off in cuBLAS and cuDNN"),
    (TorchMode("cuda", "fp32", tf32=True,
               claims=(("input_rounding", "rne"), ("inputs_maybe_unrounded", True),
                       ("accumulate_rounding", "rz"))),
     "torch CUDA float32, eager, TF32 on in cuBLAS and cuDNN"),
    # as the built-in target: F.linear may round x W^T to bf16 before adding the bias
    (TorchMode("cuda", "bf16", claims=(("bias_after_store", True), ("accumulate_rounding", "rz"))),
     "torch CUDA bfloat16, eager (each op rounded to bfloat16), reduced-precision reductions "
     "off"),
)


@contextmanager
def _cudnn_tf32(mode: TorchMode) -> Iterator[None]:
    """cuDNN's TF32 switch as ``mode`` claims, for the block (CUDA fp32 only)."""
    import torch

    if mode.device != "cuda" or mode.storage != "fp32":
        yield
        return
    with _pinned(torch.backends.cudnn, "allow_tf32", mode.tf32):
        yield


def _twin(op: Any, mode: TorchMode) -> Any:
    """The reference's module in ``mode``'s dtype on its device (kept per mode)."""
    import torch

    kept: dict[TorchMode, Any] = op.__dict__.setdefault("_torch_twins", {})
    if mode not in kept:
        module = op.ref.module
        kept[mode] = None if module is None else copy.deepcopy(module).to(
            device=mode.device, dtype=get_format(mode.storage).torch_dtype())
    return kept[mode]


def run_reference(*, mode: TorchMode, op_name: str, **inputs: Any) -> dict[str, Any]:
    """The outputs of traced op ``op_name`` as torch computes them eagerly in
    ``mode`` on the given tensors (every input of the op, by name)."""
    import torch

    op: Any = get_op(op_name)
    ref = op.ref
    missing = [n for n in ref.names if n not in inputs]
    if missing:
        raise InvalidArgument(f"{op_name}: inputs {missing} are missing")
    twin = copy.copy(ref)
    twin.module = _twin(op, mode)
    with ExitStack() as stack:
        stack.enter_context(precision_flags(mode))
        stack.enter_context(_cudnn_tf32(mode))
        stack.enter_context(warnings.catch_warnings())
        # autograd's CUDA thread binds its context late and says so (harmless)
        warnings.filterwarnings("ignore", _NO_CONTEXT_WARNING, UserWarning)
        if not ref.grads:
            with torch.no_grad():
                outs, names = twin.flat({n: inputs[n] for n in ref.names})
            return dict(zip(names, outs, strict=True))
        stack.enter_context(torch.enable_grad())
        leaves = {n: inputs[n].detach().requires_grad_(n in ref.grads) for n in ref.names}
        outs, names = twin.flat(leaves)
        grads = torch.autograd.grad(outs, [leaves[g] for g in ref.grads],
                                    [inputs[f"grad_{n}"] for n in names], allow_unused=True)
    result = {n: o.detach() for n, o in zip(names, outs, strict=True)}
    for g, value in zip(ref.grads, grads, strict=True):
        result[f"grad_{g}"] = torch.zeros_like(leaves[g]) if value is None else value
    return result


def reference_targets(op: str) -> list[Target]:
    """torch running traced op ``op``'s reference, one target per mode of
    :data:`MODES` (named as the built-in torch targets: ``torch-cpu-fp32``, ...).

    Raises
    ------
    InvalidArgument
        If ``op`` is not a traced op.
    """
    found = get_op(op)
    if getattr(found, "ref", None) is None or not hasattr(found, "spec"):
        raise InvalidArgument(f"op {op!r} is not made from a PyTorch reference; torch's "
                              "reference targets exist only for traced ops")
    return [Target(name=mode.target_name, op=op, backend=f"torch-{mode.device}",
                   precision=mode.precision,
                   fn=partial(run_reference, mode=mode, op_name=op),
                   available=partial(_available, mode), layouts=("C", "F", "T", "S"),
                   description=f"{text}; the reference itself")
            for mode, text in MODES]
