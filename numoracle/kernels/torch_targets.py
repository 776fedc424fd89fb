"""torch targets: ``linear`` and ``matmul`` through torch on the CPU and on CUDA.

One function per op, parametrised by a :class:`TorchMode` (device, storage
format, TF32 on or off) through :func:`functools.partial`. ``linear`` runs the
forward pass with :func:`torch.nn.functional.linear` and the backward pass with
:func:`torch.autograd.grad` for the given ``grad_output``, so it judges exactly
the kernels a training step uses (cuBLAS / cuBLASLt on CUDA, oneDNN or ATen's
own loops on the CPU).

What each target claims is only true under torch's global math flags, so every
call pins them with :func:`precision_flags` and restores them on exit:

- fp32 on CUDA: TF32 off (``torch-cuda-fp32``, model ``fp32``) or on
  (``torch-cuda-tf32``, model ``tf32``), through
  ``torch.backends.cuda.matmul.fp32_precision`` where this torch has it (mixing
  it with the legacy ``allow_tf32`` raises in torch >= 2.9), else ``allow_tf32``;
- fp16 / bf16 on CUDA: cuBLAS's reduced-precision reductions (on by default)
  and fp16 accumulation are switched off, so the models ``fp16`` / ``bf16``
  (storage = compute, fp32 accumulation) hold;
- fp32 on the CPU: oneDNN's fp32 matmul precision is pinned to IEEE, so that a
  process-wide ``torch.set_float32_matmul_precision("medium")`` cannot turn
  the fp32 target into a bf16 one.

Every target returns all of the op's outputs.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..errors import InvalidArgument
from ..oracle.formats import get_format
from ..oracle.precision import PrecisionModel, get_model
from ..targets.backends import get_backend
from ..targets.target import Target

__all__ = ["TorchMode", "precision_flags", "linear", "matmul", "TARGETS"]

_NO_CONTEXT_WARNING = "Attempting to run cuBLAS, but there was no current CUDA context"
#: the storage formats a torch target runs in
_STORAGES = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class TorchMode:
    """Where and how a torch target computes.

    Parameters
    ----------
    device : str
        ``"cpu"`` or ``"cuda"`` (the current CUDA device).
    storage : str
        ``"fp32"``, ``"bf16"`` or ``"fp16"``: the dtype of inputs and outputs.
    tf32 : bool
        Let cuBLAS round fp32 inputs to TF32 (CUDA fp32 only).
    claims : tuple of (field, value)
        Precision-model fields the mode claims beyond its preset, for behaviour
        of the library that its plain preset does not describe.
    """

    device: str
    storage: str
    tf32: bool = False
    claims: tuple[tuple[str, object], ...] = ()

    def __post_init__(self) -> None:
        if self.device not in ("cpu", "cuda"):
            raise InvalidArgument(f"device={self.device!r} must be 'cpu' or 'cuda'")
        if self.storage not in _STORAGES:
            raise InvalidArgument(f"storage={self.storage!r} must be one of {sorted(_STORAGES)}")
        if self.tf32 and (self.device, self.storage) != ("cuda", "fp32"):
            raise InvalidArgument(
                f"tf32=True needs device='cuda' and storage='fp32', got "
                f"device={self.device!r}, storage={self.storage!r}"
            )

    @property
    def model(self) -> str:
        """The precision preset this mode claims."""
        return "tf32" if self.tf32 else self.storage

    @property
    def precision(self) -> PrecisionModel:
        """The precision model this mode claims: its preset with :attr:`claims` applied."""
        return get_model(self.model, **dict(self.claims))

    @property
    def target_name(self) -> str:
        """``torch-<device>-<model>``, e.g. ``torch-cuda-tf32``."""
        return f"torch-{self.device}-{self.model}"


def _has(namespace: object, attr: str) -> bool:
    try:
        getattr(namespace, attr)
    except AttributeError:
        return False
    return True


@contextmanager
def _pinned(namespace: object, attr: str, value: object, old: object = None) -> Iterator[None]:
    """Set ``namespace.attr = value`` for the block, then put back ``old`` (by
    default the value it had)."""
    saved = getattr(namespace, attr) if old is None else old
    setattr(namespace, attr, value)
    try:
        yield
    finally:
        setattr(namespace, attr, saved)


def _no_reduced_precision(matmul_flags: object, attr: str) -> Any:
    """Switch off one ``allow_*_reduced_precision_reduction`` flag, keeping its
    split-K half (torch >= 2.10 stores the pair) as it was."""
    reduced = getattr(matmul_flags, attr)
    if _has(matmul_flags, attr + "_split_k"):
        split_k = getattr(matmul_flags, attr + "_split_k")
        return _pinned(matmul_flags, attr, (False, split_k), old=(reduced, split_k))
    return _pinned(matmul_flags, attr, False)


@contextmanager
def precision_flags(mode: TorchMode) -> Iterator[None]:
    """Pin torch's global math flags to what ``mode`` claims, for the block.

    Every flag is restored on exit, exceptions included.

    Examples
    --------
    >>> import torch
    >>> before = torch.backends.cuda.matmul.fp32_precision
    >>> with precision_flags(TorchMode("cuda", "fp32", tf32=True)):
    ...     torch.backends.cuda.matmul.fp32_precision
    'tf32'
    >>> torch.backends.cuda.matmul.fp32_precision == before
    True
    """
    import torch

    cuda_mm = torch.backends.cuda.matmul
    with ExitStack() as stack:
        if mode.device == "cuda" and mode.storage == "fp32":
            if _has(cuda_mm, "fp32_precision"):
                stack.enter_context(
                    _pinned(cuda_mm, "fp32_precision", "tf32" if mode.tf32 else "ieee")
                )
            else:
                stack.enter_context(_pinned(cuda_mm, "allow_tf32", mode.tf32))
        elif mode.device == "cuda" and mode.storage == "fp16":
            stack.enter_context(
                _no_reduced_precision(cuda_mm, "allow_fp16_reduced_precision_reduction")
            )
            if _has(cuda_mm, "allow_fp16_accumulation"):
                stack.enter_context(_pinned(cuda_mm, "allow_fp16_accumulation", False))
        elif mode.device == "cuda" and mode.storage == "bf16":
            stack.enter_context(
                _no_reduced_precision(cuda_mm, "allow_bf16_reduced_precision_reduction")
            )
        elif mode.device == "cpu" and mode.storage == "fp32":
            mkldnn_mm = getattr(torch.backends.mkldnn, "matmul", None)
            if mkldnn_mm is not None and _has(mkldnn_mm, "fp32_precision"):
                stack.enter_context(_pinned(mkldnn_mm, "fp32_precision", "ieee"))
        yield


def _check_tensors(mode: TorchMode, **tensors: Any) -> None:
    import torch

    want = get_format(mode.storage).torch_dtype()
    for name, t in tensors.items():
        if t is None:
            continue
        if not isinstance(t, torch.Tensor) or t.dtype != want or t.device.type != mode.device:
            got = f"{t.dtype} on {t.device}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise InvalidArgument(
                f"{mode.target_name}: input {name!r} must be a {want} tensor on "
                f"{mode.device}, got {got}; make inputs with get_backend("
                f"'torch-{mode.device}').to_device(host, {mode.storage!r}, layout)"
            )


def linear(
    x: Any, weight: Any, grad_output: Any, bias: Any = None, *, mode: TorchMode
) -> dict[str, Any]:
    """``y = F.linear(x, weight, bias)`` and its gradients for ``grad_output``.

    Returns tensors ``y``, ``grad_input``, ``grad_weight`` and, with a bias,
    ``grad_bias``, of the inputs' dtype on their device.
    """
    import torch
    import torch.nn.functional as F

    _check_tensors(mode, x=x, weight=weight, grad_output=grad_output, bias=bias)
    with precision_flags(mode), torch.enable_grad(), warnings.catch_warnings():
        # autograd runs CUDA backward ops on its own thread, which has no CUDA
        # context until cuBLAS binds the primary one, telling so in a UserWarning
        # that is harmless (and an error under -W error).
        warnings.filterwarnings("ignore", _NO_CONTEXT_WARNING, UserWarning)
        params = (x, weight) if bias is None else (x, weight, bias)
        leaves = [t.detach().requires_grad_(True) for t in params]
        y = F.linear(leaves[0], leaves[1], leaves[2] if bias is not None else None)
        grads = torch.autograd.grad(y, leaves, grad_outputs=grad_output)
    out = {"y": y.detach(), "grad_input": grads[0], "grad_weight": grads[1]}
    if bias is not None:
        out["grad_bias"] = grads[2]
    return out


def matmul(a: Any, b: Any, *, mode: TorchMode) -> dict[str, Any]:
    """``out = torch.matmul(a, b)`` over matching batch dimensions."""
    import torch

    _check_tensors(mode, a=a, b=b)
    with precision_flags(mode), torch.no_grad():
        return {"out": torch.matmul(a, b)}


def _available(mode: TorchMode) -> str | None:
    reason = get_backend(f"torch-{mode.device}").available()
    if reason is None and mode.device == "cuda" and mode.storage == "bf16":
        import torch

        if not torch.cuda.is_bf16_supported():
            return "this CUDA device has no bfloat16 support"
    return reason


_MODES: tuple[tuple[TorchMode, str], ...] = (
    (TorchMode("cpu", "fp32"), "torch CPU float32 (oneDNN fp32 matmul precision pinned to IEEE)"),
    # CPU bf16 matmuls read subnormal bf16 inputs as zero, and an Inf or NaN input
    # turns finite results of neighbouring elements into NaN (a finding with a repro:
    # benchmarks/results/findings/torch-cpu-bf16-linear-nan-spreads)
    (TorchMode("cpu", "bf16", claims=(("flush_subnormal_inputs", True),
                                      ("nan_spreads", True))),
     "torch CPU bfloat16, fp32 accumulation, subnormal inputs flushed, NaN may spread "
     "from non-finite inputs"),
    (TorchMode("cuda", "fp32"), "torch CUDA float32, cuBLAS with TF32 off"),
    # cuBLAS rounds fp32 inputs to tf32 to nearest, except in shapes where it runs a
    # plain fp32 kernel (1 x 1 x 1); tensor-core sums do not keep the probabilistic
    # (round-to-nearest) bound, so the tensor-core targets claim truncating accumulation
    (TorchMode("cuda", "fp32", tf32=True,
               claims=(("input_rounding", "rne"), ("inputs_maybe_unrounded", True),
                       ("accumulate_rounding", "rz"))),
     "torch CUDA float32, cuBLAS with TF32 on"),
    # at batch 1, F.linear rounds x W^T to bf16/fp16 before adding the bias
    (TorchMode("cuda", "bf16", claims=(("bias_after_store", True), ("accumulate_rounding", "rz"))),
     "torch CUDA bfloat16, reduced-precision reductions off"),
    (TorchMode("cuda", "fp16", claims=(("bias_after_store", True), ("accumulate_rounding", "rz"))),
     "torch CUDA float16, reduced-precision reductions off"),
)


def _targets() -> tuple[Target, ...]:
    out = []
    for mode, text in _MODES:
        for op, fn, what in (
            ("linear", linear, "F.linear forward, autograd backward"),
            ("matmul", matmul, "torch.matmul"),
        ):
            out.append(
                Target(
                    name=mode.target_name,
                    op=op,
                    backend=f"torch-{mode.device}",
                    precision=mode.precision,
                    fn=partial(fn, mode=mode),
                    available=partial(_available, mode),
                    description=f"{text}; {what}; all outputs",
                )
            )
    return tuple(out)


#: every torch target: six modes, each for linear and matmul
TARGETS: tuple[Target, ...] = _targets()
