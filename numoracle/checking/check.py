"""Checking one case on one target: inputs in, kernel run, outputs judged.

:func:`check_case` never raises for a misbehaving kernel: a kernel that
raises, hangs, returns the wrong shape, dtype or device, or leaves outputs
unwritten gets a failing :class:`~numoracle.checking.verdict.Verdict` that says so.
The call itself is :mod:`.call`'s (in this process) or :mod:`.isolate`'s (in a
worker process); this module chooses between them, judges and diagnoses.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from ..cases.case import Case
from ..errors import InvalidArgument, UnsupportedCase
from ..oracle.ops import get_op
from ..oracle.precision import PrecisionModel
from ..oracle.recorded import device_inputs
from ..oracle.recorded import reference as recorded_reference
from ..oracle.tracked import Tracked
from ..oracle.xp import array_module, is_torch
from ..targets.backends import get_backend
from ..targets.target import Target
from .call import (
    DEFAULT_TIMEOUT,
    call_in_thread,
    call_kernel,
    cuda_error,
    device_out_of_memory,
)
from .diagnosis import FATAL_KINDS, Fault, FaultKind
from .isolate import run_isolated
from .verdict import (
    Verdict,
    advise,
    compare,
    degenerate_note,
    degenerate_order,
    diagnose,
    zeros_pass,
)

__all__ = ["check_case", "run_kernel", "judge", "earlier_parameters", "DEFAULT_TIMEOUT", "Fault",
           "cuda_error", "isolation"]

_SCOPE: ContextVar[tuple[bool, float | None] | None] = ContextVar("numoracle_isolation",
                                                                  default=None)


@contextmanager
def isolation(isolate: bool, timeout: float | None = DEFAULT_TIMEOUT) -> Iterator[None]:
    """Within the block, :func:`check_case` calls that leave ``isolate`` and
    ``timeout`` at their defaults use these (a check's replay of stored repros,
    ``numoracle replay``): code that does not know about isolation still runs a
    hostile kernel in a worker process."""
    token = _SCOPE.set((isolate, timeout))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def run_kernel(case: Case, target: Target, inputs: Mapping[str, np.ndarray],
               timeout: float | None = DEFAULT_TIMEOUT, *,
               isolate: bool = False) -> tuple[dict[str, np.ndarray] | None, Fault | None]:
    """Run ``target`` on the case's inputs; return (host outputs, None) or
    (None, a :class:`Fault` saying what went wrong).

    Parameters
    ----------
    case, target, inputs
        The case, the kernel under test and the case's host inputs.
    timeout : float or None
        Seconds the kernel may take before it counts as hung (None: no limit).
        In-process a hung call is abandoned in its daemon thread; isolated, its
        worker process is killed.
    isolate : bool
        Run the kernel in a worker process (:mod:`numoracle.checking.isolate`):
        a segfault, abort, ``os._exit``, a kill or a sticky CUDA error ends that
        process only and comes back as a failure.

    A kernel that writes to an input fails: NumPy inputs are handed over
    read-only, and every input is compared with its values after the call.
    """
    if isolate:
        return run_isolated(case, target, inputs, timeout=timeout)
    return call_kernel(case, target, inputs, timeout, call_in_thread)


#: check_case calls made in this process, by target name (a verdict's ``calls_before``)
_CALLS: dict[str, int] = {}


#: multiply-adds above which the float64 reference runs on a GPU, when CuPy has one
GPU_REFERENCE_WORK = 1 << 26


def _reference_inputs(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, Any]:
    """The inputs where the reference should be computed: on the GPU for large cases
    when one is usable (torch's tensors where recorded evaluations are switched on,
    :mod:`~numoracle.oracle.recorded`; else CuPy's, float64), else on the host."""
    op = get_op(case.op)
    shapes = op.output_shapes(case.params)
    work = sum(int(np.prod(shapes[k])) * n for k, n in op.reductions(case.params).items())
    if work < GPU_REFERENCE_WORK:
        return inputs
    on_device = device_inputs(inputs)
    if on_device is not None:
        return on_device
    if get_backend("cupy").available() is not None:
        return inputs
    import cupy  # noqa: PLC0415 - optional, and only for large cases

    return {k: cupy.asarray(v) for k, v in inputs.items()}


def _comparable(refs: dict[str, Tracked]) -> dict[str, Tracked]:
    """``refs`` where :func:`compare` takes them: NumPy's and CuPy's as they are (a
    GPU's outputs are compared there), torch's handed to the host."""
    return {k: v.to_host() if is_torch(array_module(v.value)) else v for k, v in refs.items()}


def judge(case: Case, model: PrecisionModel, inputs: Mapping[str, np.ndarray],
          got: Mapping[str, np.ndarray], *, with_diagnosis: bool = True) -> dict[str, Any]:
    """Compare host outputs with the reference under ``model``; per output verdicts."""
    op = get_op(case.op)
    names = tuple(got)
    ref_inputs = _reference_inputs(case, inputs)

    computed: dict[PrecisionModel, dict[str, Tracked]] = {}

    def reference_for(m: PrecisionModel) -> dict[str, Tracked]:
        if m not in computed:  # every output's diagnosis tries the same models
            refs = recorded_reference(op, ref_inputs, case.params, m, names)
            computed[m] = {k: v.to_host() for k, v in refs.items()}
        return computed[m]

    # the claimed model's verdicts where the reference lives (on a GPU: the
    # outputs go there, not the reference's arrays to the host); a diagnosis,
    # which tries several models, works on the host
    claimed = _comparable(recorded_reference(op, ref_inputs, case.params, model, names))
    spread = model.nan_spreads and not all(bool(np.isfinite(v).all()) for v in inputs.values())
    verdicts = {name: compare(name, got[name], claimed[name], probabilistic=model.probabilistic,
                              nan_may_spread=spread) for name in names}
    judged_by: dict[str, PrecisionModel] = {}
    for name in names:  # a degenerate bound: judged under the order a GPU reduction keeps
        if not zeros_pass(claimed[name]):
            continue
        n = int(claimed[name].max_n)
        device = degenerate_order(model, n)
        if device is None:
            continue
        ref = _comparable(recorded_reference(op, ref_inputs, case.params, device, (name,)))[name]
        if zeros_pass(ref):
            continue  # the order is not what made it so
        verdicts[name] = compare(name, got[name], ref, probabilistic=model.probabilistic,
                                 nan_may_spread=spread)
        verdicts[name].note = degenerate_note(model, device, n)
        judged_by[name] = device
    if with_diagnosis or not all(v.passed for v in verdicts.values()):
        computed[model] = {k: v.to_host() for k, v in claimed.items()}
    del claimed
    for name, v in verdicts.items():
        if with_diagnosis or not v.passed:
            def output_reference(m: PrecisionModel, _n: str = name) -> Tracked:
                return reference_for(m)[_n]

            diagnose(v, got[name], judged_by.get(name, model), output_reference,
                     ladder=op.precision_ladder, nan_may_spread=spread)
    return verdicts


def earlier_parameters(case: Case, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The case's inputs as a target saw them before a parameter update: every
    parameter of the op (its ``parameters``: a layer's weight and bias) replaced
    by other values of the storage format (negated, zeros made ones), the
    data inputs unchanged."""
    names = get_op(case.op).parameters
    out = dict(inputs)
    for name in names:
        if name in inputs:
            arr = inputs[name]
            out[name] = np.where(arr == 0, np.ones_like(arr), -arr)
    return out


def _engine(case: Case, target: Target, inputs: Mapping[str, np.ndarray],
            timeout: float | None) -> str | None:
    """Which engine the library ran for this case: the kernel called once more,
    in this process, under the target's probe."""
    assert target.engine is not None
    try:
        return target.engine(lambda: run_kernel(case, target, inputs, timeout))
    except Exception as exc:  # noqa: BLE001 - a probe that fails only loses the note
        return f"unknown ({type(exc).__name__}: {exc})"


def check_case(case: Case, target: Target, *, timeout: float | None = DEFAULT_TIMEOUT,
               with_diagnosis: bool = False, update_first: bool = True,
               inputs: Mapping[str, np.ndarray] | None = None,
               isolate: bool | None = None) -> Verdict:
    """Run one case on one target and judge every output it returns.

    For ops with trained parameters (conv2d's weight and bias) the target is
    first called with other values of them (:func:`earlier_parameters`) and
    that result is dropped: the judged call comes after a parameter update,
    so a kernel that keeps stale parameters (a cached weight buffer or
    descriptor) fails on a single case, and its repro replays in any process.

    Parameters
    ----------
    case : Case
        The case; its storage format must be the target's.
    target : Target
        The kernel under test.
    timeout : float or None
        Seconds before a kernel counts as hung (None: no limit); left at the
        default, the enclosing :func:`isolation` block's.
    with_diagnosis : bool
        Also diagnose passing outputs (failing ones always are).
    update_first : bool
        Make the earlier call with other parameter values (ops with parameters only).
    inputs : dict of arrays, optional
        The inputs to use instead of the case's generated ones (a case supplied
        from outside, as ``numoracle shrink`` takes it); shapes must be the case's.
    isolate : bool or None
        Run the kernel in a worker process (:func:`run_kernel`); None: as the
        enclosing :func:`isolation` block says (in-process outside one).

    Raises
    ------
    UnsupportedCase
        When the oracle cannot judge the case, or the GPU ran out of memory in
        the kernel or the oracle (what else runs on the GPU decides that, not
        the kernel's arithmetic): a runner counts the case as unjudged.
    """
    if case.op != target.op:
        raise InvalidArgument(f"case is for op {case.op!r} but target {target.name!r} "
                              f"computes {target.op!r}")
    if case.storage != target.precision.storage.name:
        raise InvalidArgument(
            f"case storage {case.storage!r} differs from target {target.name!r}'s storage "
            f"{target.precision.storage.name!r}; draw cases with storage="
            f"{target.precision.storage.name!r}"
        )
    t0 = time.perf_counter()
    scope = _SCOPE.get()
    if isolate is None:
        isolate = scope is not None and scope[0]
    if scope is not None and timeout == DEFAULT_TIMEOUT:
        timeout = scope[1]
    inputs = case.inputs() if inputs is None else dict(inputs)
    calls_before = _CALLS.get(target.name, 0)
    _CALLS[target.name] = calls_before + 1
    got: dict[str, np.ndarray] | None = None
    error: Fault | None = None
    if update_first and get_op(case.op).parameters:
        _, error = run_kernel(case, target, earlier_parameters(case, inputs), timeout,
                              isolate=isolate)  # outputs dropped
        if isinstance(error, Fault) and error.kind in FATAL_KINDS:  # one timeout per case
            error = Fault(f"{error} (in the call before the judged one, with other "
                          "parameter values)", error.kind)
        else:
            error = None
    if error is None:
        got, error = run_kernel(case, target, inputs, timeout, isolate=isolate)
    if isinstance(error, Fault) and error.kind is FaultKind.OOM:
        raise UnsupportedCase(f"{error}; the case is not judged (a GPU shared by fewer "
                              "processes, or smaller cases, leave it the memory it needs)")
    if isinstance(error, Fault) and error.kind is FaultKind.UNSUPPORTED:
        raise UnsupportedCase(f"{error}; the case is not judged")
    verdict = Verdict(case=case, target=target.name, op=target.op,
                      precision=target.precision.name, passed=False, error=error, got=got,
                      model=target.precision, calls_before=calls_before)
    if got is not None:
        try:
            verdict.outputs = judge(case, target.precision, inputs, got,
                                    with_diagnosis=with_diagnosis)
        except Exception as exc:
            if not device_out_of_memory(exc):
                raise
            raise UnsupportedCase(f"the oracle ran out of GPU memory for this case "
                                  f"({type(exc).__name__}); the case is not judged") from exc
        verdict.passed = all(v.passed for v in verdict.outputs.values())
        advise(verdict, target.backend)  # e.g. CuPy's flush-to-zero: what to claim
        if not verdict.passed and target.engine is not None and not isolate:
            verdict.engine = _engine(case, target, inputs, timeout)
    verdict.seconds = time.perf_counter() - t0
    return verdict
