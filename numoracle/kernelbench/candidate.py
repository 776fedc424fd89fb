"""A candidate (``ModelNew``) run on one case, with the adversarial checks.

:func:`run_case` is what the candidate's process (:mod:`.sandbox`) does for
one case. The reference ``Model`` never runs here: the judge ran it in its own
process (:mod:`.reference`) and sends what the outputs must be (shape, dtype,
device, the aliasing torch's own outputs have). For one case it

1. builds ``ModelNew`` from the problem's init arguments and binds the case's
   parameter values: the reference's ``state_dict`` loaded strictly, or,
   where the names differ, by position among tensors of equal shapes
   (reported), so that parameter values are the case's, not an RNG stream's;
2. calls the candidate on a first draw of the inputs (recording the ATen ops
   it dispatches), poisons what it returned (NaN, through raw memory) and a
   block of the output's size, writes a second draw into the *same* input
   tensors (same addresses, same strides) and calls it again: a kernel that
   returns a result cached by address, or reads an output buffer it never
   wrote, answers the second call with the first call's or with NaN. The
   second call is the one judged; on a GPU the first call's CUDA kernel
   launches are recorded too (:class:`~.reference.KernelRecorder`);
3. after every call into the candidate, asks the pins (:class:`~.guard.Pins`)
   whether a function the worker relies on was replaced: a replaced one is a
   fault that names it;
4. checks that each output is a plain ``torch.Tensor`` of the reference's
   shape, dtype and device, shares memory with no input and no other output
   (unless torch's own outputs do the same), copies its bytes through raw
   memory into the judge's shared buffer and, on a GPU, synchronises the
   device and reads them again: an output still being written on another
   stream after the forward returned is a fault;
5. compares every input's bytes with their value before the call (input
   mutation).

The inputs come from the judge as host arrays, or, where the judge sends how it
drew them, are drawn here again on the case's device and fingerprinted for the
judge to compare with its own (:mod:`.draws`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..checking.call import cuda_error
from .draws import regenerate
from .guard import Pins, RawMemory, span_bytes
from .problem import BadFile, load_module
from .reference import DTYPES, KernelRecorder, OpRecorder, overlaps, place

__all__ = ["run_case", "load_candidate", "bind_state", "MissingPackage", "OpRecorder",
           "KernelRecorder"]

_TB = torch._C.TensorBase
_Tensor = torch.Tensor
_data_ptr, _stride, _itemsize = _TB.data_ptr, _TB.stride, _TB.element_size
_copy_, _contiguous, _isfloat = _TB.copy_, _TB.contiguous, _TB.is_floating_point
_shape = _TB.shape.__get__  # type: ignore[attr-defined]
_dtype = _TB.dtype.__get__  # type: ignore[attr-defined]
_device = _TB.device.__get__  # type: ignore[attr-defined]
_type, _len, _tuple, _str = type, len, tuple, str


class MissingPackage(Exception):
    """The candidate imports a package this machine does not have (not its fault)."""


#: how loading a candidate says the machine lacks what it needs: a package, or the
#: CUDA toolkit or build tool its inline extension is compiled with
_MACHINE_LACKS = ("raised ModuleNotFoundError", "raised ImportError",
                  "CUDA_HOME environment variable is not set", "Ninja is required")


def load_candidate(path: str | Path) -> type[torch.nn.Module]:
    """The ``ModelNew`` class of a candidate file.

    Raises
    ------
    MissingPackage
        When importing it needs a package that is not installed, or its inline
        extension a CUDA toolkit or build tool this machine lacks.
    BadFile
        When it raises while loading or ``ModelNew`` is not a module class.
    """
    try:
        module = load_module(path, needs=("ModelNew",), what="candidate")
    except BadFile as exc:
        text = str(exc)
        if any(m in text for m in _MACHINE_LACKS):
            raise MissingPackage(text) from None
        raise
    cls = module.ModelNew
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise BadFile(f"candidate file {Path(path).name}: ModelNew is "
                      f"{type(cls).__name__}, not a torch.nn.Module subclass")
    return cls


def bind_state(candidate: torch.nn.Module, state: Mapping[str, torch.Tensor]) -> str:
    """Load ``state`` (the reference's) into ``candidate``; a sentence saying how.

    Strict loading first; where the names differ, tensors are matched by
    position among those of equal shape and dtype kind. A candidate with no
    parameters and a reference with none binds trivially.
    """
    own = candidate.state_dict()
    if not state and not own:
        return ""
    try:
        candidate.load_state_dict(dict(state), strict=True)
        return ""
    except (RuntimeError, KeyError):
        theirs = [k for k in state if k not in own]
        ours = [k for k in own if k not in state]
        strict_error = (f"the reference's names {', '.join(theirs) or '-'} are not ModelNew's "
                        f"{', '.join(ours) or '-'}")
    ref_items = [(k, v) for k, v in state.items() if v.is_floating_point()]
    own_items = [(k, v) for k, v in own.items() if v.is_floating_point()]
    mapped: dict[str, torch.Tensor] = {}
    used: set[int] = set()
    for name, tensor in own_items:
        for i, (_, ref) in enumerate(ref_items):
            if i not in used and ref.shape == tensor.shape:
                mapped[name] = ref
                used.add(i)
                break
    if len(used) == len(ref_items) and len(mapped) == len(own_items):
        candidate.load_state_dict({**own, **mapped}, strict=True)
        return (f"parameters bound by position and shape ({strict_error}): "
                + ", ".join(f"{n}<-{ref_items[i][0]}" for n, i in
                            zip(mapped, sorted(used), strict=False)))
    return (f"parameters NOT bound ({strict_error}); no match by shape either: the "
            "candidate keeps its own values")


def _outputs(result: Any) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _range(t: torch.Tensor) -> tuple[int, int]:
    """The bytes ``[start, end)`` of a plain tensor, read through pinned methods."""
    start = _data_ptr(t)
    return (start, start + span_bytes(_tuple(_shape(t)), _tuple(_stride(t)), _itemsize(t)))


def _replaced(pins: Pins, during: str) -> dict[str, str] | None:
    changed = pins.changed()
    if not changed:
        return None
    return {"fault": f"the candidate replaced what the judge's worker relies on ("
                     f"{', '.join(changed[:6])}{', ...' if len(changed) > 6 else ''}) "
                     f"{during}", "fault_kind": "tamper"}


def _check_output(i: int, got: Any, spec: Sequence[Any]) -> str | None:
    where = f"output {i}"
    if _type(got) is not _Tensor:
        t = _type(got)
        return f"{where} is a {t.__module__}.{t.__qualname__}, not a plain torch.Tensor"
    shape, dtype, device = _tuple(spec[0]), spec[1], spec[2]
    if _tuple(_shape(got)) != shape:
        return f"{where} has shape {_tuple(_shape(got))}; the reference's is {shape}"
    if _str(_dtype(got)).removeprefix("torch.") != dtype:
        return f"{where} has dtype {_dtype(got)}; the reference's is torch.{dtype}"
    if _str(_device(got)) != device:
        return f"{where} is on {_device(got)}; the reference's is on {device}"
    return None


class _Shared:
    """The judge's buffer, filled piece by piece through raw memory."""

    def __init__(self, buf: Any, memory: RawMemory) -> None:
        self.buf, self.memory, self.used = buf, memory, 0
        #: (output, source address, offset here, bytes) of every piece copied
        self.sources: list[tuple[int, int, int, int]] = []
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(buf)) if len(buf) else 0

    def put(self, i: int, t: torch.Tensor, offset: int = 0, shape: Sequence[int] | None = None,
            strides: Sequence[int] | None = None) -> list[Any]:
        """Copy the bytes of ``t`` (or of its sub-tensor at byte ``offset`` with
        ``shape`` and ``strides``) here; (offset here, shape, strides) to rebuild it."""
        shape = _tuple(_shape(t)) if shape is None else _tuple(shape)
        strides = _tuple(_stride(t)) if strides is None else _tuple(strides)
        n = span_bytes(shape, strides, _itemsize(t))
        if self.used + n > _len(self.buf):
            raise MemoryError(f"the judge's buffer ({_len(self.buf)} bytes) has no room for "
                              f"an output spanning {n} bytes")
        self.memory.copy_to_host(self.base + self.used, _data_ptr(t) + offset, n)
        self.sources.append((i, _data_ptr(t) + offset, self.used, n))
        piece = [self.used, shape, strides]
        self.used += n
        return piece


def _take(shared: _Shared, i: int, t: torch.Tensor, rows: Sequence[int]) -> list[list[Any]]:
    """Pieces of ``t`` in the shared buffer: the whole tensor, or its rows ``rows``."""
    if not rows:
        if span_bytes(_tuple(_shape(t)), _tuple(_stride(t)), _itemsize(t)) > \
                2 * max(_itemsize(t), 1) * max(t.numel(), 1):
            t = _contiguous(t)  # a sparse, strided output: its elements, packed
        return [shared.put(i, t)]
    shape, strides = _tuple(_shape(t)), _tuple(_stride(t))
    return [shared.put(i, t, r * strides[0] * _itemsize(t), shape[1:], strides[1:])
            for r in rows]


def run_case(cls: type[torch.nn.Module], request: Mapping[str, Any], *, memory: RawMemory,
             buf: Any, pins: Pins) -> dict[str, Any]:
    """Run the candidate on one case (see the module's docstring).

    Parameters
    ----------
    cls : type
        The candidate's ``ModelNew``.
    request : mapping
        ``init`` (``ModelNew``'s arguments), ``state`` (the reference's
        parameter values, host arrays), ``first`` and ``second`` (the two
        draws of the forward's arguments) or ``draws`` (how to draw them here:
        :func:`~.draws.regenerate`), ``layouts``, ``device``, ``dtype``,
        ``tf32``, ``seed``, ``calls`` (2: prime, poison, judge; 1: judge the
        only call), ``rows`` (the output rows to take; () all), ``outputs``
        (shape, dtype, device per output, from torch's reference),
        ``input_aliases`` and ``output_aliases`` (the sharing torch's own
        outputs have).
    memory : RawMemory
        How bytes are read and written on the case's device.
    buf : writable buffer
        The judge's shared buffer for the outputs.
    pins : Pins
        The worker's pinned functions.

    Returns
    -------
    dict
        ``pieces`` (per output, where its bytes lie in ``buf``: offset, shape,
        strides in elements) or ``fault`` (a sentence) with ``fault_kind``
        (``raise``, ``output``, ``input``, ``tamper``, ``oom``, ``stream``);
        ``notes``; ``drawn`` (with ``draws``: the fingerprints of what was drawn
        here); ``ops`` (the ATen ops of the first call); ``kernels`` (the CUDA
        kernels it launched, by name with counts; on a GPU).
    """
    device, tdtype = request["device"], DTYPES[request["dtype"]]
    torch.backends.cuda.matmul.allow_tf32 = request["tf32"]
    torch.backends.cudnn.allow_tf32 = request["tf32"]
    # a bf16/fp16 claim accumulates in fp32: cuBLAS's reduced-precision reductions off
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    notes: list[str] = []
    answer: dict[str, Any] = {"notes": notes, "ops": []}
    try:
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(request["seed"])
            model = cls(*request["init"])
    except Exception as exc:  # noqa: BLE001 - a candidate that cannot be built fails
        return {**answer, "fault": f"ModelNew({len(request['init'])} init args) raised "
                                   f"{type(exc).__name__}: {exc}", "fault_kind": "raise"}
    tampered = _replaced(pins, "while ModelNew was built")
    if tampered:
        return {**answer, **tampered}
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in request["state"].items()}
    how = bind_state(model, state)
    if how:
        notes.append(how)
    model = model.to(device=device, dtype=tdtype)

    def args_of(values: Sequence[Any]) -> list[Any]:
        return [place(v, lay, tdtype, device) if isinstance(v, (np.ndarray, _Tensor)) else v
                for v, lay in zip(values, request["layouts"], strict=True)]

    two = request["calls"] == 2
    specs = request["outputs"]
    draws: tuple[Any, Any] = (request.get("first"), request.get("second"))
    if request.get("draws") is not None:  # drawn here again, on the judge's description
        try:
            first, second, answer["drawn"] = regenerate(request["draws"], DTYPES)
            draws = (first, second)
            del first, second
        except torch.OutOfMemoryError as exc:
            return {**answer, "fault": f"drawing the inputs ran out of device memory "
                                       f"({(str(exc).splitlines() or [''])[0]})",
                    "fault_kind": "oom"}
        except Exception as exc:  # noqa: BLE001 - the judge's draw, not the candidate
            return {**answer, "fault": f"the candidate's process could not draw the "
                                       f"inputs: {type(exc).__name__}: {exc}",
                    "fault_kind": "judge"}
    try:
        judged = args_of(draws[1])
        args = args_of(draws[0]) if two else judged
        del draws
        if two:
            recorder, launches = OpRecorder(), KernelRecorder(device)
            with torch.no_grad(), recorder, launches:
                primed = _outputs(model(*args))
            answer["ops"] = list(recorder.ops)
            answer["kernels"] = dict(launches.kernels)
            if device.startswith("cuda"):
                notes.append(f"CUDA kernels its forward launched: {launches.summary()}")
            tampered = _replaced(pins, "in its first call")
            if tampered:
                return {**answer, **tampered}
            for o in primed:
                if _type(o) is _Tensor and _isfloat(o):
                    memory.poison(*_start_size(o))  # a cached result returned again: NaN
            del primed
            for a, b in zip(args, judged, strict=True):
                if _type(a) is _Tensor:
                    _copy_(a, b)  # the second draw at the first draw's addresses
            for shape, dtype, _ in specs:
                block = torch.empty(int(np.prod(shape)) + 1, dtype=DTYPES.get(dtype, tdtype),
                                    device=device)
                memory.poison(_data_ptr(block), block.numel() * _itemsize(block))
                del block  # memory an unwritten output may be given next holds NaN
        before = [memory.snapshot(*_start_size(a)) if _type(a) is _Tensor else None
                  for a in args]
        with torch.no_grad():
            got = _outputs(model(*args))
    except torch.OutOfMemoryError as exc:  # the device, not the candidate: not judged
        text = str(exc).splitlines()[0] if str(exc) else ""
        return {**answer, "fault": f"the candidate ran out of device memory on this case "
                                   f"({text})", "fault_kind": "oom"}
    except Exception as exc:  # noqa: BLE001 - a raising candidate: a refusal or a failure
        name = cuda_error(exc)
        if name is not None:  # the process's CUDA context is lost: it ends after this
            return {**answer, "fault": f"the candidate raised a CUDA error: {name}",
                    "fault_kind": "cuda"}
        text = str(exc).splitlines()[0] if str(exc) else ""
        return {**answer, "fault": f"the candidate raised {type(exc).__name__}: {text}",
                "fault_kind": "raise", "exception": type(exc).__name__}
    tampered = _replaced(pins, "in the judged call")
    if tampered:
        return {**answer, **tampered}
    collected = _collect(got, args, before, specs, request, memory, buf)
    if "pieces" not in collected or not request.get("backward"):
        return {**answer, **collected}
    del got
    return {**answer, **collected,
            **_backward(model, args, state, request, memory, buf, pins, collected)}


def _unchanged(memory: RawMemory, t: torch.Tensor, before: Any) -> bool:
    """Whether the bytes of ``t`` equal its snapshot ``before`` (:meth:`RawMemory.snapshot`)."""
    start, n = _start_size(t)
    return memory.same(start, ctypes.addressof(ctypes.c_char.from_buffer(before)), n)


def _start_size(t: torch.Tensor) -> tuple[int, int]:
    lo, hi = _range(t)
    return lo, hi - lo


def _parameter_names(model: torch.nn.Module, state: Mapping[str, torch.Tensor]
                     ) -> dict[str, str]:
    """The reference's name of each of ``model``'s parameters, by its own name: the
    same name, else the state tensor it was bound from (equal values and shape)."""
    out = {}
    for name, p in model.named_parameters():
        if name in state:
            out[name] = name
            continue
        for ref_name, t in state.items():
            if t.shape == p.shape and ref_name not in out.values() and torch.equal(
                    t.to(p.dtype).to(p.device), p.detach()):
                out[name] = ref_name
                break
    return out


def _backward(model: torch.nn.Module, args: list[Any], state: Mapping[str, torch.Tensor],
              request: Mapping[str, Any], memory: RawMemory, buf: Any, pins: Pins,
              collected: Mapping[str, Any]) -> dict[str, Any]:
    """The candidate's gradients, w.r.t. its floating inputs and parameters, of the
    outputs against the judge's cotangents (``backward_pieces``: input ``i`` as
    ``"input:i"``, a parameter by the reference's name as ``"param:name"``); on a
    sampled instance (``grad_rows``) those of the sampled inputs, their sampled rows."""
    device, tdtype = request["device"], DTYPES[request["dtype"]]
    names = _parameter_names(model, state)
    leaves = [a.detach().requires_grad_(True) if _type(a) is _Tensor and _isfloat(a) else a
              for a in args]
    wrt = [(f"input:{k}", a) for k, a in enumerate(leaves)
           if _type(a) is _Tensor and a.requires_grad]
    wrt += [(f"param:{names[n]}", p) for n, p in model.named_parameters()
            if n in names and p.requires_grad]
    sampled = request.get("grad_rows")
    if sampled:  # only what the sampled rows determine: the sampled inputs' own rows
        wrt = [(label, t) for label, t in wrt if label.startswith("input:")
               and int(label.partition(":")[2]) in sampled["inputs"]]
    try:
        with torch.enable_grad():
            outs = _outputs(model(*leaves))
            live = [(o, c) for o, c in zip(outs, request["backward"], strict=True)
                    if _type(o) is _Tensor and o.requires_grad and c is not None]
            if not live:
                return {"backward_note": "its outputs carry no autograd graph: its "
                                         "backward is not judged"}
            cots = [torch.from_numpy(np.ascontiguousarray(c)).to(device=device, dtype=tdtype)
                    for _, c in live]
            grads = torch.autograd.grad([o for o, _ in live], [t for _, t in wrt],
                                        grad_outputs=cots, allow_unused=True)
        if memory.cuda:
            torch.cuda.synchronize()
    except torch.OutOfMemoryError as exc:
        return {"fault": f"the candidate's backward ran out of device memory ({exc})",
                "fault_kind": "oom"}
    except Exception as exc:  # noqa: BLE001 - a backward that raises fails
        text = str(exc).splitlines()[0] if str(exc) else ""
        return {"fault": f"the candidate's backward raised {type(exc).__name__}: {text}",
                "fault_kind": "backward"}
    tampered = _replaced(pins, "in its backward")
    if tampered:
        return tampered
    shared = _Shared(buf, memory)
    shared.used = max(p[0] + span_bytes(p[1], p[2], 8) for ps in collected["pieces"]
                      for p in ps) if collected["pieces"] else 0
    pieces = {}
    for (label, t), g in zip(wrt, grads, strict=True):
        g = torch.zeros_like(t) if g is None else _contiguous(g.detach())
        pieces[label] = _take(shared, -1, g, sampled["rows"] if sampled else ())
    return {"backward_pieces": pieces}


def _name(request: Mapping[str, Any], k: int) -> str:
    names = request.get("names") or []
    return str(names[k]) if k < len(names) else str(k)


def _collect(got: list[Any], args: list[Any], before: list[Any], specs: Sequence[Any],
             request: Mapping[str, Any], memory: RawMemory, buf: Any) -> dict[str, Any]:
    """The judged call's outputs checked and copied out (see the module's docstring)."""
    if _len(got) != _len(specs):
        return {"fault": f"the candidate returned {_len(got)} outputs; the reference "
                         f"returns {_len(specs)}", "fault_kind": "output"}
    for i, g in enumerate(got):
        text = _check_output(i, g, specs[i])
        if text:
            return {"fault": text, "fault_kind": "output"}
    for k, (a, b) in enumerate(zip(args, before, strict=True)):
        if b is not None and not _unchanged(memory, a, b):
            name = _name(request, k)
            return {"fault": f"the candidate wrote to its input {name!r}: inputs must not "
                             "be changed", "fault_kind": "input"}
    ranges = [_range(g) for g in got]
    inputs = [(k, _range(a)) for k, a in enumerate(args) if _type(a) is _Tensor]
    for i, r in enumerate(ranges):
        for k, rin in inputs:
            if overlaps(r, rin) and k not in request["input_aliases"][i]:
                return {"fault": f"output {i} shares memory with input {_name(request, k)!r} "
                                 "(a view of it, or written into it); torch's own output "
                                 "does not",
                        "fault_kind": "alias"}
        for j in range(i):
            if overlaps(r, ranges[j]) and (j, i) not in [tuple(p) for p in
                                                         request["output_aliases"]]:
                return {"fault": f"outputs {j} and {i} share memory (one buffer returned "
                                 "twice); torch's own outputs are separate",
                        "fault_kind": "alias"}
    shared = _Shared(buf, memory)
    try:
        pieces = [_take(shared, i, g, request["rows"]) for i, g in enumerate(got)]
    except MemoryError as exc:
        return {"fault": str(exc), "fault_kind": "output"}
    if memory.cuda:
        torch.cuda.synchronize()
        for i, src, offset, n in shared.sources:
            if not memory.same(src, shared.base + offset, n):
                return {"fault": f"output {i} changed after the forward returned: work "
                                 "left running on another stream wrote it (an output must "
                                 "be complete on the caller's stream)", "fault_kind": "stream"}
    return {"pieces": pieces}
