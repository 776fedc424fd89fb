"""torch's own output of the reference ``Model``, made in the judge's process.

The reference never runs in the candidate's process (a candidate could read
its output there, or change the functions it runs through). The judge runs
``Model`` itself, as torch does it, on the judged inputs in the case's layout:
its outputs give KernelBench's own rule (``torch.allclose`` at 1e-2 and 1e-4,
the column beside the oracle's verdict), the shape, dtype and device every
output of the candidate must have, and which outputs share memory with an input
or with each other (an aliasing the candidate may repeat, and no other).

:class:`OpRecorder` records the ATen ops a forward dispatches; the judge records
the reference's and the candidate's, and notes a candidate that calls the very
ops the problem's ``Model`` calls (a wrapper of torch, not a kernel of its own).
:class:`KernelRecorder` records the CUDA kernels a forward launches (its own
compiled ones and torch's), through torch's profiler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .problem import Problem

__all__ = ["TorchReference", "OpRecorder", "KernelRecorder", "torch_reference", "place", "INPUT_LAYOUTS",
           "KERNELBENCH_TOLERANCES", "DTYPES", "kernelbench_rule", "compute_ops", "RULE_PIECE",
           "overlaps", "span"]

#: layouts an input can be handed over in
INPUT_LAYOUTS = ("C", "T", "S")
#: the tolerances of KernelBench's ``torch.allclose(atol=tol, rtol=tol)``
KERNELBENCH_TOLERANCES = (1e-2, 1e-4)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "float64": torch.float64}
#: ATen ops that move, view or allocate, and compute nothing a problem asks for
_PLUMBING = ("view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand",
             "unsqueeze", "squeeze", "select", "slice", "as_strided", "alias", "detach",
             "clone", "copy_", "contiguous", "_to_copy", "to", "empty", "empty_like",
             "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
             "lift_fresh", "lift_fresh_copy", "new_empty", "new_zeros", "new_empty_strided",
             "_reshape_alias", "fill_", "zero_", "resize_", "set_", "split", "unbind",
             "split_with_sizes", "chunk", "flatten", "unflatten", "view_as", "expand_as",
             "_local_scalar_dense", "scalar_tensor", "arange", "item")


class OpRecorder(TorchDispatchMode):
    """Records the name of every ATen op dispatched within the block (in order, once)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: dict[str, None] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        self.ops.setdefault(str(func.overloadpacket.__name__), None)
        return func(*args, **(kwargs or {}))


class KernelRecorder:
    """Records the CUDA kernels (and copies, sets) launched within the block on a GPU,
    by name with their counts, in launch order (torch's profiler with CUDA
    activities); on the CPU, or where the profiler is not available, nothing.

    ``kernels``: name -> launches; ``error``: why nothing was recorded, if so.
    """

    def __init__(self, device: str) -> None:
        self.device = device
        self.kernels: dict[str, int] = {}
        self.error = ""
        self._prof: Any = None

    def __enter__(self) -> KernelRecorder:
        if not self.device.startswith("cuda"):
            return self
        from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415 - GPU only

        try:
            self._prof = profile(activities=[ProfilerActivity.CUDA])
            self._prof.__enter__()
        except Exception as exc:  # noqa: BLE001 - a profiler that cannot start records nothing
            self._prof, self.error = None, f"{type(exc).__name__}: {exc}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._prof is None:
            return
        try:
            torch.cuda.synchronize()
            self._prof.__exit__(None, None, None)
            for event in self._prof.events():
                if event.device_type == torch.autograd.DeviceType.CUDA:
                    self.kernels[event.name] = self.kernels.get(event.name, 0) + 1
        except Exception as exc:  # noqa: BLE001 - what could not be read is said
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._prof = None

    def summary(self, most: int = 8) -> str:
        """``name x count, ...`` (the first ``most``), or why none was recorded."""
        if not self.kernels:
            return f"none recorded ({self.error})" if self.error else "none"
        items = [f"{_short_kernel(k)} x{n}" for k, n in list(self.kernels.items())[:most]]
        more = len(self.kernels) - most
        return ", ".join(items) + (f", and {more} more" if more > 0 else "")


def _short_kernel(name: str) -> str:
    """A kernel's name without its template arguments and parameter list."""
    head = name.split("(", 1)[0]
    return (head.split("<", 1)[0] or head)[:80]


def compute_ops(ops: Sequence[str]) -> list[str]:
    """``ops`` without those that only move, view or allocate."""
    return [op for op in ops if op.rstrip("_") not in _PLUMBING and op not in _PLUMBING]


def place(value: np.ndarray | torch.Tensor, layout: str, dtype: torch.dtype,
          device: str) -> torch.Tensor:
    """``value`` (a host array, or a tensor) as a tensor of ``dtype`` on ``device`` in
    ``layout`` (:data:`INPUT_LAYOUTS`): ``"C"`` contiguous, ``"T"`` the transpose of a
    contiguous tensor of the reversed last two axes, ``"S"`` every other element of a
    buffer twice as wide."""
    t = value if isinstance(value, torch.Tensor) else \
        torch.from_numpy(np.ascontiguousarray(value))
    if t.is_floating_point():
        t = t.to(dtype)
    t = t.to(device)
    if layout == "T" and t.ndim >= 2:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "S" and t.ndim >= 1:
        wide = torch.empty(t.shape[:-1] + (2 * t.shape[-1],), dtype=t.dtype, device=device)
        view = wide[..., ::2]
        view.copy_(t)
        return view
    return t


def span(t: torch.Tensor) -> tuple[int, int]:
    """The byte range ``[start, end)`` a tensor's elements lie in."""
    if t.numel() == 0:
        return (t.data_ptr(), t.data_ptr())
    extent = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
    return (t.data_ptr(), t.data_ptr() + extent * t.element_size())


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two byte ranges share a byte."""
    return a[0] < b[1] and b[0] < a[1] and a[0] < a[1] and b[0] < b[1]


#: elements of an output :func:`kernelbench_rule` compares at a time
RULE_PIECE = 1 << 24


def kernelbench_rule(got: Any, ref: Any, device: Any = None) -> dict[str, bool]:
    """KernelBench's check, ``torch.allclose(ref, got, atol=tol, rtol=tol)``, per
    tolerance, in float64 (both as float64: ``|ref - got| <= tol + tol |got|``, an
    infinity close only to itself, NaN to nothing), as ``numpy.allclose`` of float64
    copies: a piece of :data:`RULE_PIECE` elements at a time, by NumPy on the host or,
    given ``device`` (a GPU), by torch there, so that no float64 copy of a whole
    output is made and a large one is compared where the device's bandwidth is."""
    tols = {f"{tol:g}": tol for tol in KERNELBENCH_TOLERANCES}
    close = dict.fromkeys(tols, tuple(np.shape(got)) == tuple(np.shape(ref)))
    if not all(close.values()):
        return close
    if device is None:
        g, r = np.asarray(got).reshape(-1), np.asarray(ref).reshape(-1)
    else:
        g, r = torch.as_tensor(got).reshape(-1), torch.as_tensor(ref).reshape(-1)
    for at in range(0, int(np.size(got)), RULE_PIECE):
        if device is None:
            a = r[at:at + RULE_PIECE].astype(np.float64)
            b = g[at:at + RULE_PIECE].astype(np.float64)
        else:
            a = r[at:at + RULE_PIECE].to(device=device, dtype=torch.float64)
            b = g[at:at + RULE_PIECE].to(device=device, dtype=torch.float64)
        for name, tol in tols.items():
            close[name] = close[name] and bool(
                np.allclose(a, b, atol=tol, rtol=tol) if device is None else
                torch.allclose(a, b, atol=tol, rtol=tol))
        if not any(close.values()):
            break
    return close


@dataclass
class TorchReference:
    """torch's outputs of ``Model`` on one case, and what the candidate's must match."""

    #: outputs (the judged rows only, where rows are named): host arrays, or with
    #: ``on_device`` the tensors where torch made them
    outputs: list[Any] = field(default_factory=list)
    #: (shape, dtype name, device) per output
    specs: list[tuple[tuple[int, ...], str, str]] = field(default_factory=list)
    #: per output, the inputs it shares memory with
    input_aliases: list[list[int]] = field(default_factory=list)
    #: pairs of outputs that share memory
    output_aliases: list[tuple[int, int]] = field(default_factory=list)
    #: the ATen ops the forward dispatched
    ops: list[str] = field(default_factory=list)
    #: a sentence where torch itself could not run the case
    fault: str | None = None
    out_of_memory: bool = False


def host(t: torch.Tensor) -> np.ndarray:
    """``t`` on the host as float32 (bf16 and fp16 are exact in it) or its own dtype."""
    t = t.detach()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()
    return t.cpu().numpy()


def torch_reference(problem: Problem, *, init: Sequence[Any], state: Mapping[str, np.ndarray],
                    args: Sequence[Any], layouts: Sequence[str], device: str, dtype: str,
                    tf32: bool, seed: int, rows: Sequence[int] = (),
                    on_device: bool = False) -> TorchReference:
    """Run ``Model(*init)`` with ``state`` on ``args`` as torch does (see the module);
    ``on_device``: its outputs kept where they are (no copy to the host and back for
    :func:`kernelbench_rule` on the device)."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    tdtype = DTYPES[dtype]
    out = TorchReference()
    try:
        model = problem.model(seed=seed, init_args=init)
        model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v))
                               for k, v in state.items()}, strict=True)
        model = model.to(device=device, dtype=tdtype)
        placed = [place(v, lay, tdtype, device) if isinstance(v, np.ndarray) else v
                  for v, lay in zip(args, layouts, strict=True)]
        recorder = OpRecorder()
        with torch.no_grad(), recorder:
            result = model(*placed)
    except torch.OutOfMemoryError as exc:
        out.fault, out.out_of_memory = f"the reference Model ran out of device memory ({exc})", \
            True
        return out
    except Exception as exc:  # noqa: BLE001 - a case the reference rejects is dropped
        text = str(exc).splitlines()[0] if str(exc) else ""
        out.fault = f"the reference Model raised {type(exc).__name__}: {text}"
        return out
    got = list(result) if isinstance(result, (tuple, list)) else [result]
    out.ops = list(recorder.ops)
    spans_in = [span(a) if isinstance(a, torch.Tensor) else (0, 0) for a in placed]
    for i, o in enumerate(got):
        out.specs.append((tuple(o.shape), str(o.dtype).removeprefix("torch."), str(o.device)))
        out.input_aliases.append([k for k, s in enumerate(spans_in) if overlaps(span(o), s)])
        out.output_aliases += [(j, i) for j in range(i) if overlaps(span(got[j]), span(o))]
        picked = o[list(rows)] if rows else o
        out.outputs.append(picked.detach() if on_device else host(picked))
    return out
