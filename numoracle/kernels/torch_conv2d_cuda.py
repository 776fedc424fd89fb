"""torch targets for ``conv2d`` on CUDA: cuDNN through ``F.conv2d`` and autograd.

The forward pass is :func:`torch.nn.functional.conv2d`, the backward pass
:func:`torch.autograd.grad` for the given ``grad_output``, float32 on the
current CUDA device, so the targets judge the cuDNN kernels a training step
runs. Eight targets, ``torch-cuda-<model>[-cl][-det]``:

``fp32`` / ``tf32``
    cuDNN may not (model ``fp32``) or may (model ``tf32``) round fp32 inputs to
    TF32 on tensor cores. How cuDNN rounds them is not documented, so the
    ``tf32`` claim leaves ``input_rounding`` unknown, and it claims truncating
    accumulation (``accumulate_rounding="rz"``), as the tensor-core linear
    targets do; and ``nan_spreads``: in a grouped convolution an Inf of one
    group may turn another group's finite results into NaN.
``-cl``
    inputs converted to ``torch.channels_last`` inside the call (cuDNN's NHWC
    kernels); otherwise they are used as handed over (contiguous NCHW unless
    the case asks for another memory layout).
Every target claims the algorithm classes cuDNN may choose
(``algorithms=("summation", "winograd", "fft")``, see
:mod:`numoracle.oracle.transforms`): at stride 1 and dilation 1 its
heuristics may pick a Winograd or FFT engine, whose results keep neither the
exact regime nor a summation's componentwise bound.

``-det``
    ``torch.backends.cudnn.deterministic = True`` (the targets then claim
    ``deterministic_runs``); otherwise False.

Each call pins cuDNN's flags for its duration and restores them on exit
(:func:`cudnn_flags`): cuDNN enabled, ``benchmark`` off (heuristic algorithm
choice, repeatable), ``deterministic`` as above and the TF32 switch, through
``torch.backends.cudnn.conv.fp32_precision`` where this torch has it (mixing
it with the legacy ``allow_tf32`` raises in torch >= 2.9), else
``torch.backends.cudnn.allow_tf32``.

Arrays are in the canonical axis orders (``x`` and ``grad_output`` NCHW,
``weight`` OIHW): torch takes logical NCHW whatever the strides, so the
targets accept those orders row-major, column-major (``:F``) and strided.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..errors import InvalidArgument
from ..oracle.precision import PrecisionModel, get_model
from ..oracle.transforms import ALGORITHMS
from ..targets.backends import get_backend
from ..targets.target import Target
from .conv_geometry import resolve_geometry
from .torch_targets import _has, _pinned

__all__ = ["CudnnMode", "cudnn_flags", "cudnn_claim", "conv2d", "TARGETS"]

_NO_CONTEXT_WARNING = "Attempting to run cuBLAS, but there was no current CUDA context"


@dataclass(frozen=True)
class CudnnMode:
    """How a cuDNN conv2d target computes.

    Parameters
    ----------
    tf32 : bool
        Let cuDNN round fp32 inputs to TF32.
    deterministic : bool
        ``torch.backends.cudnn.deterministic``.
    channels_last : bool
        Convert the inputs to ``torch.channels_last`` before the call.
    """

    tf32: bool = False
    deterministic: bool = False
    channels_last: bool = False

    @property
    def target_name(self) -> str:
        """``torch-cuda-fp32``, ``torch-cuda-tf32-cl-det``, ..."""
        return ("torch-cuda-" + ("tf32" if self.tf32 else "fp32")
                + ("-cl" if self.channels_last else "") + ("-det" if self.deterministic else ""))


@contextmanager
def cudnn_flags(mode: CudnnMode) -> Iterator[None]:
    """Pin cuDNN's global flags to what ``mode`` claims, for the block.

    Every flag is restored on exit, exceptions included.

    Examples
    --------
    >>> import torch
    >>> before = torch.backends.cudnn.deterministic
    >>> with cudnn_flags(CudnnMode(deterministic=True)):
    ...     torch.backends.cudnn.deterministic
    True
    >>> torch.backends.cudnn.deterministic == before
    True
    """
    import torch

    cudnn = torch.backends.cudnn
    with ExitStack() as stack:
        stack.enter_context(_pinned(cudnn, "enabled", True))
        stack.enter_context(_pinned(cudnn, "benchmark", False))
        stack.enter_context(_pinned(cudnn, "deterministic", mode.deterministic))
        conv = getattr(cudnn, "conv", None)
        if conv is not None and _has(conv, "fp32_precision"):
            stack.enter_context(_pinned(conv, "fp32_precision", "tf32" if mode.tf32 else "ieee"))
        else:
            stack.enter_context(_pinned(cudnn, "allow_tf32", mode.tf32))
        yield


def _check_tensors(mode: CudnnMode, **tensors: Any) -> None:
    import torch

    for name, t in tensors.items():
        if t is None:
            continue
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float32 or t.device.type != "cuda":
            got = f"{t.dtype} on {t.device}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise InvalidArgument(
                f"{mode.target_name}: input {name!r} must be a float32 tensor on cuda, got "
                f"{got}; make inputs with get_backend('torch-cuda').to_device(host, 'fp32', "
                "layout)"
            )


def conv2d(
    x: Any,
    weight: Any,
    grad_output: Any,
    bias: Any = None,
    *,
    params: Mapping[str, Any] | None = None,
    stride: Any = None,
    padding: Any = None,
    dilation: Any = None,
    groups: int | None = None,
    mode: CudnnMode,
    **sizes: Any,
) -> dict[str, Any]:
    """``y = F.conv2d(x, weight, bias, ...)`` and its gradients for ``grad_output``.

    ``x`` ``(N, C, H, W)``, ``weight`` ``(O, C/groups, kH, kW)``, ``grad_output``
    ``(N, O, Ho, Wo)``, ``bias`` ``(O,)`` or None: float32 CUDA tensors, any
    strides. The geometry comes from ``params`` (the case's op parameters, as
    the runner passes them) or the keywords, which win: ``stride``,
    ``padding``, ``dilation`` ints or ``(h, w)`` pairs (default 1, 0, 1);
    ``groups`` (default ``C // weight.shape[1]``). Sizes and the ``bias`` flag
    in ``params`` or ``sizes`` must match the tensors.

    Returns tensors ``y``, ``grad_input``, ``grad_weight`` and, with a bias,
    ``grad_bias`` (channels-last strided for the ``-cl`` modes).
    """
    import torch
    import torch.nn.functional as F

    _check_tensors(mode, x=x, weight=weight, grad_output=grad_output, bias=bias)
    geom = resolve_geometry(
        tuple(x.shape), tuple(weight.shape), has_bias=bias is not None, layout="NCHW",
        params=params, stride=stride, padding=padding, dilation=dilation, groups=groups,
        **sizes,
    )
    if tuple(grad_output.shape) != geom.shape("y"):
        raise InvalidArgument(
            f"{mode.target_name}: grad_output.shape={tuple(grad_output.shape)} must be "
            f"{geom.shape('y')}"
        )
    if bias is not None and tuple(bias.shape) != (geom.O,):
        raise InvalidArgument(f"{mode.target_name}: bias.shape={tuple(bias.shape)} must be "
                              f"({geom.O},)")
    if mode.channels_last:
        x, weight, grad_output = (
            t.to(memory_format=torch.channels_last) for t in (x, weight, grad_output)
        )
    with cudnn_flags(mode), torch.enable_grad(), warnings.catch_warnings():
        # autograd runs CUDA backward ops on its own thread, which may have no
        # CUDA context yet; torch says so in a harmless UserWarning
        warnings.filterwarnings("ignore", _NO_CONTEXT_WARNING, UserWarning)
        inputs = (x, weight) if bias is None else (x, weight, bias)
        leaves = [t.detach().requires_grad_(True) for t in inputs]
        y = F.conv2d(
            leaves[0], leaves[1], leaves[2] if bias is not None else None,
            stride=(geom.sh, geom.sw), padding=(geom.ph, geom.pw),
            dilation=(geom.dh, geom.dw), groups=geom.G,
        )
        grads = torch.autograd.grad(y, leaves, grad_outputs=grad_output)
    out = {"y": y.detach(), "grad_input": grads[0], "grad_weight": grads[1]}
    if bias is not None:
        out["grad_bias"] = grads[2]
    return out


#: canonical axis orders in any memory order (torch reads any strides)
_LAYOUTS: dict[str, tuple[str, ...]] = {
    "x": ("NCHW", "NCHW:F", "S"),
    "weight": ("OIHW", "OIHW:F", "S"),
    "grad_output": ("NCHW", "NCHW:F", "S"),
    "bias": ("C", "S"),
}


def algorithm_of(kernels: Iterable[str]) -> str:
    """The algorithm classes a set of CUDA kernel names shows: ``winograd``,
    ``fft``, ``gemm`` (implicit GEMM and other summations), joined by ``+``."""
    text = " ".join(kernels).lower()
    found = [name for name, keys in (("winograd", ("winograd",)), ("fft", ("fft",)),
                                     ("gemm", ("gemm", "xmma", "implicit", "convolve")))
             if any(k in text for k in keys)]
    return "+".join(found) or "unknown"


def launched_kernels(call: Callable[[], Any]) -> tuple[Any, list[str]]:
    """``call()``'s result and the names of the CUDA kernels it launched (torch's
    profiler; copies and fills left out)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        result = call()
        torch.cuda.synchronize()
    names = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"
                    and not any(k in e.name.lower() for k in ("memcpy", "memset"))})
    return result, names


def cuda_kernels(call: Callable[[], Any]) -> str:
    """Run ``call`` and name the algorithm classes and the CUDA kernels it
    launched (cuDNN's engine choice, as the kernels show it)."""
    _, names = launched_kernels(call)
    shown = ", ".join(n[:60] for n in names[:6]) + (", ..." if len(names) > 6 else "")
    return f"{algorithm_of(names)} ({shown})"


def cudnn_claim(tf32: bool) -> PrecisionModel:
    """What cuDNN's fp32 convolutions may do with TF32 off or on (the targets'
    claim before ``deterministic_runs``): any engine its heuristics choose among
    implicit GEMM, Winograd and FFT; with TF32 on, inputs rounded to TF32 in an
    undocumented way, truncating tensor-core sums, and NaN spreading between the
    groups of a grouped convolution (an Inf in one group may turn another group's
    finite ``y`` or ``grad_input`` into NaN, as if the groups ran as one GEMM with
    zero blocks: a finding with repros,
    ``benchmarks/results/findings/cudnn-tf32-grouped-conv-nan-spreads``)."""
    if tf32:
        return get_model("tf32", accumulate_rounding="rz", algorithms=ALGORITHMS,
                         nan_spreads=True)
    return get_model("fp32", algorithms=ALGORITHMS)


def _targets() -> tuple[Target, ...]:
    available = get_backend("torch-cuda").available
    out = []
    for tf32 in (False, True):
        base = cudnn_claim(tf32)
        for channels_last in (False, True):
            for det in (False, True):
                mode = CudnnMode(tf32=tf32, deterministic=det, channels_last=channels_last)
                out.append(
                    Target(
                        name=mode.target_name,
                        op="conv2d",
                        backend="torch-cuda",
                        precision=base.with_(deterministic_runs=True) if det else base,
                        fn=partial(conv2d, mode=mode),
                        layouts=_LAYOUTS,
                        available=available,
                        engine=cuda_kernels,
                        description=(
                            f"torch CUDA float32 F.conv2d forward, autograd backward (cuDNN), "
                            f"TF32 {'on' if tf32 else 'off'}, "
                            f"{'channels_last' if channels_last else 'contiguous'} memory, "
                            f"cudnn.deterministic={det}; all outputs"
                        ),
                    )
                )
    return tuple(out)


#: the cuDNN conv2d targets: fp32 / tf32, contiguous / channels_last, deterministic or not
TARGETS: tuple[Target, ...] = _targets()
