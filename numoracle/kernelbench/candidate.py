"""A candidate (``ModelNew``) run on one case, with the adversarial checks.

:func:`run_case` is what the kernel's process does for one case; the judge
calls it through :func:`numoracle.checking.isolate.call_isolated`, in a worker
process started afresh for each candidate file (a crash, a CUDA error or an
extension whose name clashes with another candidate's stays with that
candidate). Only host NumPy arrays and plain values cross the boundary.

For one case it

1. builds the reference ``Model`` and the candidate ``ModelNew`` from the same
   init arguments, and binds the case's parameter values into both: the
   reference's ``state_dict`` loaded into the candidate strictly, or, where the
   names differ, by position among tensors of equal shapes (reported), so that
   parameter values are the case's, not an RNG stream's;
2. runs the reference module as torch does it (KernelBench's own check compares
   with that output: ``torch.allclose`` at 1e-2 and 1e-4, the column beside the
   oracle's verdict);
3. calls the candidate on a first draw of the inputs, poisons what it returned
   (NaN) and a block of the output's size, writes a second draw into the *same*
   input tensors (same addresses, same strides) and calls it again: a kernel
   that returns a result cached by address, or reads an output buffer it never
   wrote, answers the second call with the first call's or with NaN. The
   second call is the one judged;
4. compares every input with its value before the call (input mutation) and
   checks that each output is a plain ``torch.Tensor`` of the reference's shape,
   dtype and device.

Inputs reach the candidate in the case's layout: ``"C"`` contiguous, ``"T"``
the transpose of a contiguous tensor of the reversed last two axes, ``"S"``
every other element of a buffer twice as wide (non-contiguous strides).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .problem import BadFile, Problem, load_module, load_problem

__all__ = ["run_case", "load_candidate", "bind_state", "place", "INPUT_LAYOUTS",
           "KERNELBENCH_TOLERANCES"]

#: layouts an input can be handed over in
INPUT_LAYOUTS = ("C", "T", "S")
#: the tolerances of KernelBench's ``torch.allclose(atol=tol, rtol=tol)``
KERNELBENCH_TOLERANCES = (1e-2, 1e-4)

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
           "float64": torch.float64}
_loaded: dict[str, Any] = {}


def _problem(path: str) -> Problem:
    """The problem file at ``path``, loaded once per process."""
    key = "problem:" + str(Path(path).resolve())
    if key not in _loaded:
        _loaded[key] = load_problem(path)
    return _loaded[key]


def load_candidate(path: str | Path) -> type[torch.nn.Module]:
    """The ``ModelNew`` class of a candidate file (loaded once per process)."""
    key = str(Path(path).resolve())
    if key not in _loaded:
        module = load_module(path, needs=("ModelNew",), what="candidate")
        cls = module.ModelNew
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            raise BadFile(f"candidate file {Path(path).name}: ModelNew is "
                          f"{type(cls).__name__}, not a torch.nn.Module subclass")
        _loaded[key] = cls
    return _loaded[key]


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


def place(value: np.ndarray, layout: str, dtype: torch.dtype, device: str) -> torch.Tensor:
    """``value`` as a tensor of ``dtype`` on ``device`` in ``layout`` (:data:`INPUT_LAYOUTS`)."""
    t = torch.from_numpy(np.ascontiguousarray(value))
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


def _host(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()  # exact: every bf16/fp16 value is a float32 value
    return t.cpu().numpy()


def _outputs(result: Any) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _same(a: torch.Tensor, b: torch.Tensor) -> int:
    """How many elements of ``a`` and ``b`` differ (NaN equals NaN)."""
    if a.shape != b.shape:
        return a.numel()
    same = (a == b) | (torch.isnan(a) & torch.isnan(b)) if a.is_floating_point() else a == b
    return int(a.numel() - same.sum().item())


def _check_output(i: int, got: Any, ref: torch.Tensor) -> str | None:
    where = f"output {i}"
    if type(got) is not torch.Tensor:
        return (f"{where} is a {type(got).__module__}.{type(got).__qualname__}, not a plain "
                "torch.Tensor")
    if tuple(got.shape) != tuple(ref.shape):
        return f"{where} has shape {tuple(got.shape)}; the reference's is {tuple(ref.shape)}"
    if got.dtype != ref.dtype:
        return f"{where} has dtype {got.dtype}; the reference's is {ref.dtype}"
    if got.device != ref.device:
        return f"{where} is on {got.device}; the reference's is on {ref.device}"
    return None


def _poison_block(nbytes: int, device: str) -> None:
    """Allocate ``nbytes`` filled with NaN and free them: memory an unwritten output
    may be given next holds NaN, not an earlier answer."""
    if nbytes > 0:
        block = torch.empty(nbytes // 4 + 1, dtype=torch.float32, device=device)
        block.fill_(float("nan"))
        del block


def _kernelbench_rule(got: Any, ref: torch.Tensor) -> dict[str, bool]:
    ok = isinstance(got, torch.Tensor) and got.shape == ref.shape
    return {f"{tol:g}": bool(ok and torch.allclose(ref.float(), got.float().to(ref.device),
                                                    atol=tol, rtol=tol))
            for tol in KERNELBENCH_TOLERANCES}


def run_case(*, problem: str, candidate: str, overrides: Mapping[str, Any],
             state: Mapping[str, np.ndarray], first: Sequence[Any], second: Sequence[Any],
             layouts: Sequence[str], device: str = "cpu", dtype: str = "float32",
             tf32: bool = False, seed: int = 0, calls: int = 2,
             rows: Sequence[int] = ()) -> dict[str, Any]:
    """Run the reference and the candidate on one case (see the module's docstring).

    Parameters
    ----------
    problem, candidate : str
        Paths of the problem and candidate files.
    overrides : mapping
        Values of the problem's module constants (size knobs, ``dropout_p``).
    state : mapping of str to numpy.ndarray
        The parameter and buffer values of the reference's ``state_dict``.
    first, second : sequence
        The forward pass's arguments of the first (priming) and the second
        (judged) call: arrays, or plain values.
    layouts : sequence of str
        Each argument's layout (:data:`INPUT_LAYOUTS`).
    device, dtype : str
        Where and in which storage format the models run.
    tf32 : bool
        Whether torch may use TF32 in matmuls and convolutions. cuBLAS's
        reduced-precision reductions of bf16 and fp16 products are always off
        (the claims accumulate in fp32).
    calls : int
        2 (prime, poison, judge) or 1 (judge the only call).
    rows : sequence of int
        Return only these rows (axis 0) of each output and of torch's
        reference (an instance judged on a sample of its rows); () all.

    Returns
    -------
    dict
        ``outputs`` (host arrays of the judged call) or ``fault`` (a sentence)
        with ``fault_kind`` (``oom`` where the device ran out of memory: not
        the candidate's fault); ``torch_reference`` (torch's own outputs),
        ``kernelbench`` (allclose per tolerance), ``notes`` (sentences).
    """
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    # a bf16/fp16 claim accumulates in fp32: cuBLAS's reduced-precision reductions off
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    prob = _problem(problem)
    cls = load_candidate(candidate)
    tdtype = _DTYPES[dtype]
    init = prob.init_args(overrides)
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        ref_model = prob.model_class(*init)
    tensors = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}
    ref_model.load_state_dict(tensors, strict=True)
    ref_model = ref_model.to(device=device, dtype=tdtype)
    notes: list[str] = []
    answer: dict[str, Any] = {"notes": notes}
    try:
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(seed)
            cand_model = cls(*init)
    except Exception as exc:  # noqa: BLE001 - a candidate that cannot be built fails
        return {**answer, "fault": f"ModelNew({len(init)} init args) raised "
                                   f"{type(exc).__name__}: {exc}", "fault_kind": "raise"}
    how = bind_state(cand_model, ref_model.state_dict())
    if how:
        notes.append(how)
    cand_model = cand_model.to(device=device, dtype=tdtype)

    def args_of(values: Sequence[Any]) -> list[Any]:
        return [place(v, lay, tdtype, device) if isinstance(v, np.ndarray) else v
                for v, lay in zip(values, layouts, strict=True)]

    try:
        judged = args_of(second)
        with torch.no_grad():
            ref_out = [o.detach().clone() for o in _outputs(ref_model(*[
                a.clone() if isinstance(a, torch.Tensor) else a for a in judged]))]
    except torch.OutOfMemoryError as exc:
        return {**answer, **_out_of_memory("the reference Model", exc)}
    answer["torch_reference"] = [_host(_rows(o, rows)) for o in ref_out]
    args = args_of(first) if calls == 2 else judged
    try:
        with torch.no_grad():
            if calls == 2:
                primed = _outputs(cand_model(*args))
                for o in primed:
                    if isinstance(o, torch.Tensor) and o.is_floating_point():
                        o.fill_(float("nan"))  # a cached result returned again shows NaN
                del primed
                for a, b in zip(args, judged, strict=True):
                    if isinstance(a, torch.Tensor):
                        a.copy_(b)  # the second draw at the first draw's addresses
                for o in ref_out:
                    _poison_block(o.numel() * o.element_size(), device)
            before = [a.clone() if isinstance(a, torch.Tensor) else None for a in args]
            got = _outputs(cand_model(*args))
            if device.startswith("cuda"):
                torch.cuda.synchronize()
    except torch.OutOfMemoryError as exc:  # the device, not the candidate: not judged
        return {**answer, **_out_of_memory("the candidate", exc)}
    except Exception as exc:  # noqa: BLE001 - a raising candidate is a failing verdict
        text = str(exc).splitlines()[0] if str(exc) else ""
        return {**answer, "fault": f"the candidate raised {type(exc).__name__}: {text}",
                "fault_kind": "raise"}
    if len(got) != len(ref_out):
        return {**answer, "fault": f"the candidate returned {len(got)} outputs; the reference "
                                   f"returns {len(ref_out)}", "fault_kind": "output"}
    answer["kernelbench"] = [_kernelbench_rule(g, r) for g, r in zip(got, ref_out, strict=True)]
    for i, (a, b) in enumerate(zip(args, before, strict=True)):
        if isinstance(a, torch.Tensor) and b is not None:
            changed = _same(a, b)
            if changed:
                name = prob.input_names[i] if i < len(prob.input_names) else str(i)
                return {**answer, "fault": f"the candidate wrote to its input {name!r} at "
                                           f"{changed} of {a.numel()} elements: inputs must "
                                           "not be changed", "fault_kind": "input"}
    for i, (g, r) in enumerate(zip(got, ref_out, strict=True)):
        problem_text = _check_output(i, g, r)
        if problem_text:
            return {**answer, "fault": problem_text, "fault_kind": "output"}
    answer["outputs"] = [_host(_rows(g, rows)) for g in got]
    return answer


def _out_of_memory(who: str, exc: BaseException) -> dict[str, str]:
    """The answer of a case the device had no memory for (``fault_kind`` ``oom``):
    the judge does not count it against the candidate."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return {"fault": f"{who} ran out of device memory on this case ({text})",
            "fault_kind": "oom"}


def _rows(t: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
    """Rows ``rows`` of ``t`` along axis 0 (all where none are named)."""
    return t[list(rows)] if rows else t
