"""Recorded evaluations: one case's bound evaluation kept as a straight-line ATen
graph with guards, and replayed for the later cases of the same signature.

The interpreter (:mod:`.interpret`) evaluated in torch's namespace makes hundreds to
thousands of small tensor operations per case, and a few dozen decisions on the
values (``bool(xp.any(need))``: is there an element to escalate, a NaN radius, a
special point?). On a GPU each operation costs a launch and each decision a
synchronisation, so the case costs the host's time, not the device's.

:func:`record` runs the evaluation once under :func:`torch.fx.experimental.proxy_tensor.make_fx`
on real tensors: every ATen operation is kept, in order, in one graph whose inputs are
the case's floating-point inputs. Every read of a device value into Python (a
decision: ``__bool__``, ``item``, ``float``, ``int``, ``tolist``, a copy to the host)
is answered with the value this case had, and kept as a *guard*: a boolean the graph
computes, true where a later case's value equals the recorded one. A
:class:`Recording` replays the graph for a later case with the same shapes, dtypes,
integer inputs and precision model; it reads the guards once (one synchronisation)
and, where one fails (a later case took another branch), answers ``None``: the
caller evaluates that case afresh. A replay whose guards all hold made every
decision the evaluation would have made, on the same operations in the same order,
so its values and radii are the evaluation's, bit for bit.

The graph can be compiled (:func:`torch.compile`: fused kernels, fewer launches);
a compiled replay's values and radii agree with the evaluation's within the
oracle's own rounding, which the tests measure. Integer and boolean inputs (class
labels, masks) are read on the host by the rules, so they are constants of the
graph: the signature holds their bytes.
"""

from __future__ import annotations

import hashlib
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import torch
from torch import fx
from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing, make_fx
from torch.overrides import TorchFunctionMode

from ..recording_mode import MODE_VARIABLE, MODES, mode
from ..tracked import Tracked, bounded
from ..xp import thoroughly

__all__ = ["Recording", "Recordings", "Unrecordable", "record", "signature", "mode", "READS",
           "MODES", "MODE_VARIABLE", "COMPILED_SLACK"]

#: a compiled replay's radii are raised by this share of themselves: its float64 sums
#: may be made in another order than the evaluation's (each radius within a few units
#: in the last place of it; a sum of n terms reordered moves by less than n 2^-53 of
#: its magnitude, below this share for n < 2^23)
COMPILED_SLACK = 2.0**-30
#: the radii a compiled replay raises
_RADII = ("ref_err", "det", "prob")

#: the tensor methods that bring a device value into Python
READS = frozenset({"__bool__", "item", "__float__", "__int__", "__index__", "tolist",
                   "numpy", "cpu", "__array__"})
#: the fields of a :class:`Tracked` that hold arrays (``n`` may be one too)
_FIELDS = tuple(f.name for f in fields(Tracked))


class Unrecordable(Exception):
    """An evaluation that cannot be kept as a straight-line graph (an operation the
    tracer refuses, a read it cannot answer): the case is evaluated as it is."""


def _same(t: torch.Tensor, v: Any) -> torch.Tensor:
    """A 0-d boolean tensor: whether ``t`` holds ``v`` again (NaN equal to NaN)."""
    if t.dim() == 0 and isinstance(v, (bool, int, float)):  # (a number: no tensor of it)
        if t.dtype == torch.bool:  # (the flag itself, or its negation)
            return t if bool(v) else ~t
        held = float(v) if t.is_floating_point() else int(v)
        return t.isnan() if held != held else t == held
    ref = torch.as_tensor(np.asarray(v), device=t.device).to(t.dtype)
    eq = t == ref
    if t.is_floating_point():
        eq = eq | (t.isnan() & ref.isnan())
    return eq.all().reshape(())


class _Decisions(TorchFunctionMode):
    """During :func:`record`: every read of a device value answered with this case's
    value (computed outside the trace) and kept as a guard the graph computes."""

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.device = device
        self.guards: list[torch.Tensor] = []
        self.sources: list[str] = []

    def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (),
                           kwargs: Mapping[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        host_copy = name == "to" and _to_host(args, kwargs)
        if name not in READS and not host_copy:
            mask = _selection(name, args)
            if mask is not None and mask.device == self.device:
                # (a count of the case's values decides a shape: the graph keeps this one)
                with disable_proxy_modes_tracing():
                    count = int(torch.count_nonzero(mask))
                self._kept(torch.count_nonzero(mask) == count)
            return func(*args, **kwargs)
        t = args[0]
        with disable_proxy_modes_tracing():
            value = func(*args, **kwargs)
        if isinstance(t, torch.Tensor) and t.device == self.device:
            self._guard(t, value)  # (a host copy's read was guarded where it was copied)
        return value

    def _guard(self, t: torch.Tensor, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            held = value.detach().cpu().numpy()
        else:
            held = value if isinstance(value, (bool, int, float)) else np.asarray(value)
        self._kept(_same(t, held))

    def _kept(self, guard: torch.Tensor) -> None:
        self.guards.append(guard if guard.dim() == 0 else guard.reshape(()))
        frame = next((f for f in reversed(traceback.extract_stack()[:-3])
                      if "numoracle" in f.filename and "recording.py" not in f.filename
                      and "xp.py" not in f.filename), None)
        self.sources.append("?" if frame is None else
                            f"{frame.filename.rsplit('numoracle/', 1)[-1]}:{frame.lineno}")


def _selection(name: str, args: Sequence[Any]) -> torch.Tensor | None:
    """The tensor whose nonzero elements decide the shape of ``name``'s result
    (``nonzero``, a boolean mask's indexing or selection), or None."""
    if name in ("nonzero", "argwhere", "masked_select") and args:
        t = args[1] if name == "masked_select" and len(args) > 1 else args[0]
        return t if isinstance(t, torch.Tensor) else None
    if name == "__getitem__" and len(args) > 1:
        index = args[1] if isinstance(args[1], tuple) else (args[1],)
        masks = [i for i in index if isinstance(i, torch.Tensor) and i.dtype == torch.bool]
        return masks[0] if len(masks) == 1 else None
    return None


def _to_host(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """Whether ``Tensor.to(...)`` moves a device tensor to the host."""
    t = args[0] if args else None
    if not isinstance(t, torch.Tensor) or t.device.type == "cpu":
        return False
    target = kwargs.get("device", args[1] if len(args) > 1 else None)
    return (isinstance(target, (str, torch.device)) and torch.device(target).type == "cpu")


@dataclass(frozen=True)
class _Slot:
    """Where a flat output of the graph goes: output ``name``'s field ``field``."""

    name: str
    field: str


@dataclass
class Recording:
    """One evaluation kept as a graph (see the module docstring).

    ``module(*floats)`` returns the tensors of :attr:`slots` then one guard tensor
    per read (:attr:`sources` says where each read was made); :attr:`shells` holds
    each output's non-array fields (``n``, ``escalated``) and its host arrays.
    """

    module: fx.GraphModule
    inputs: tuple[str, ...]
    slots: tuple[_Slot, ...]
    shells: dict[str, Any]
    sources: tuple[str, ...]
    wrap: Callable[[torch.Tensor], Any]
    compiled: Callable[..., Any] | None = None
    replays: int = 0
    refused: int = 0
    failed_sources: dict[str, int] = field(default_factory=dict)

    @property
    def nodes(self) -> int:
        """The graph's ATen operations."""
        return sum(1 for n in self.module.graph.nodes if n.op == "call_function")

    def compile(self, graphs: bool = False) -> None:
        """Compile the graph (:func:`torch.compile`: Inductor's fused kernels, without
        contracting a product and a sum into one fused multiply-add, which would change
        the evaluation's roundings; ``graphs``: replayed as a CUDA graph); replays use it."""
        options = {"emulate_precision_casts": True, "triton.cudagraphs": graphs}
        self.compiled = torch.compile(self.module, dynamic=False, options=options)

    def run(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, Any] | None:
        """The outputs for ``inputs`` (tensors by name, as recorded), or None where a
        guard fails or the replay raises: the case must be evaluated afresh."""
        fn = self.module if self.compiled is None else self.compiled
        try:
            flat = fn(*(inputs[k] for k in self.inputs))
        except Exception as e:  # (a shape decided by the recorded case's values, now other)
            self.refused += 1
            first = str(e).splitlines()[0] if str(e) else ""
            why = f"the replay raised {type(e).__name__}: {first}"
            self.failed_sources[why] = self.failed_sources.get(why, 0) + 1
            return None
        values, guards = flat[:len(self.slots)], flat[len(self.slots):]
        if guards:
            ok = torch.stack([g.reshape(()) for g in guards])
            held = ok.cpu().numpy()  # (the one synchronisation)
            if not held.all():
                self.refused += 1
                for i in np.flatnonzero(~held):
                    src = self.sources[i]
                    self.failed_sources[src] = self.failed_sources.get(src, 0) + 1
                return None
        self.replays += 1
        out: dict[str, dict[str, Any]] = {k: dict(v) for k, v in self.shells.items()}
        for slot, v in zip(self.slots, values, strict=True):
            if self.compiled is not None and slot.field in _RADII:
                v = v * (1.0 + COMPILED_SLACK)
            out[slot.name][slot.field] = self.wrap(v)
        return {k: _tracked(f) if f.pop("__tracked__") else f["__plain__"]
                for k, f in out.items()}


def _tracked(f: dict[str, Any]) -> Tracked:
    """A tracked output of its fields, made by the core's constructor."""
    t = bounded(f["value"], f["det"], f["prob"], ref_err=f["ref_err"], mag=f["mag"], n=f["n"])
    return replace(t, lo=f["lo"], escalated=f["escalated"])


def _flatten(results: Mapping[str, Any], tensor_of: Callable[[Any], torch.Tensor | None]
             ) -> tuple[list[torch.Tensor], list[_Slot], dict[str, Any]]:
    leaves: list[torch.Tensor] = []
    slots: list[_Slot] = []
    shells: dict[str, Any] = {}
    for name, r in results.items():
        if not isinstance(r, Tracked):
            if tensor_of(r) is not None:
                raise Unrecordable(f"output {name!r} is a plain array of the device")
            shells[name] = {"__tracked__": False, "__plain__": r}
            continue
        shell: dict[str, Any] = {"__tracked__": True}
        for f in _FIELDS:
            v = getattr(r, f)
            t = tensor_of(v)
            if t is None:
                shell[f] = v
            else:
                leaves.append(t)
                slots.append(_Slot(name, f))
        shells[name] = shell
    return leaves, slots, shells


def record(evaluate: Callable[[dict[str, Any]], Mapping[str, Any]],
           inputs: Mapping[str, torch.Tensor], xp: Any, *, stack_traces: bool = False
           ) -> Recording:
    """Record ``evaluate`` (inputs by name -> outputs by name, in torch's namespace
    ``xp``: :class:`~numoracle.oracle.xp.TorchNumPy`) on ``inputs`` (the
    floating-point tensors of one case); ``stack_traces``: each node keeps the Python
    stack that made it (``node.meta["stack_trace"]``), to say which code makes which
    operations.

    Raises
    ------
    Unrecordable
        Where the tracer refuses an operation or an output is not a tracked array.
    """
    names = tuple(inputs)
    if not names:
        raise Unrecordable("the evaluation has no floating-point input")
    decisions = _Decisions(inputs[names[0]].device)

    def tensor_of(v: Any) -> torch.Tensor | None:
        if isinstance(v, torch.Tensor):
            return v
        return xp.tensor(v) if type(v) is xp.ndarray else None

    kept: dict[str, Any] = {}

    def flat(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with decisions, thoroughly():
            got = evaluate(dict(zip(names, tensors, strict=True)))
        leaves, slots, shells = _flatten(got, tensor_of)
        kept.update(slots=tuple(slots), shells=shells)
        return (*leaves, *decisions.guards)

    try:
        module = make_fx(flat, tracing_mode="real", record_stack_traces=stack_traces)(
            *(inputs[k] for k in names))
    except Unrecordable:
        raise
    except Exception as e:  # the tracer's refusal, whatever its kind
        raise Unrecordable(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") \
            from e
    return Recording(module=module, inputs=names, slots=kept["slots"], shells=kept["shells"],
                     sources=tuple(decisions.sources), wrap=xp.ndarray)


def signature(graph_key: Any, inputs: Mapping[str, Any], extra: Any) -> str:
    """The key of a recording: the graph, every input's shape and dtype (the bytes of
    an integer or boolean one, a constant of the graph), and ``extra`` (the model,
    the claims, the outputs asked for)."""
    h = hashlib.sha256(repr((graph_key, extra)).encode())
    for k in sorted(inputs):
        v = inputs[k]
        shape = tuple(getattr(v, "shape", ()))
        dtype = str(getattr(v, "dtype", type(v).__name__))
        h.update(repr((k, shape, dtype)).encode())
        if isinstance(v, np.ndarray) and v.dtype.kind in "biu":
            h.update(np.ascontiguousarray(v).tobytes())
    return h.hexdigest()


class Recordings:
    """The recordings of one op, by :func:`signature`: a signature's first case is
    evaluated, its second recorded (and compiled, as :func:`mode` says), the later
    ones replayed; a signature whose recording was refused is not tried again. At
    most ``keep`` recordings are kept (the oldest dropped: each holds its graph, and a
    compiled one its kernels and, as a CUDA graph, its memory)."""

    def __init__(self, keep: int = 8) -> None:
        self.keep = keep
        self.seen: dict[str, int] = {}
        self.kept: dict[str, Recording] = {}
        self.refused: dict[str, str] = {}

    def evaluate(self, key: str, evaluate: Callable[[dict[str, Any]], Mapping[str, Any]],
                 floats: Mapping[str, torch.Tensor], xp: Any, how: str
                 ) -> Mapping[str, Any] | None:
        """The outputs of a case of signature ``key`` by its recording, or None where
        the case is to be evaluated (``evaluate`` on ``floats``: the first case of its
        signature, a refused signature, a guard that failed)."""
        rec = self.kept.get(key)
        if rec is None:
            self.seen[key] = self.seen.get(key, 0) + 1
            if self.seen[key] < 2 or key in self.refused:
                return None
            try:
                rec = record(evaluate, floats, xp)
            except Unrecordable as e:
                self.refused[key] = str(e)
                return None
            if how in ("compile", "graphs"):
                rec.compile(graphs=how == "graphs")
            if len(self.kept) >= self.keep:
                self.kept.pop(next(iter(self.kept)))
            self.kept[key] = rec
        return rec.run(floats)
