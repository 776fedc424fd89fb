"""Checking one case on one target: inputs in, kernel run, outputs judged.

:func:`check_case` never raises for a misbehaving kernel: a kernel that
raises, hangs, returns the wrong shape, dtype or device, or leaves outputs
unwritten gets a failing :class:`~numoracle.checking.verdict.Verdict` that says so.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import numpy as np

from ..cases.case import Case
from ..cases.layouts import accepts, from_order, layouts_for, parse, shape_in, to_order
from ..cases.target import Target
from ..errors import InvalidArgument
from ..kernels.backends import get_backend
from ..oracle.ops import get_op
from ..oracle.precision import PrecisionModel
from ..oracle.tracked import Tracked
from .verdict import Verdict, compare, diagnose

__all__ = ["check_case", "run_kernel", "judge", "earlier_parameters", "DEFAULT_TIMEOUT"]

#: seconds a kernel may run before it counts as hung
DEFAULT_TIMEOUT = 120.0


class _Hung(Exception):
    pass


class _Worker:
    """One long-lived worker thread for kernel calls (thread-local state of the
    array libraries is set up once); replaced when a call hangs in it."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="numoracle-kernel")

    def call(self, fn: Any, kwargs: Mapping[str, Any], timeout: float) -> Any:
        def work() -> Any:
            with np.errstate(all="ignore"):  # IEEE exceptions of a kernel are not failures
                return fn(**kwargs)

        future = self.pool.submit(work)
        try:
            return future.result(timeout)
        except FutureTimeout:
            self.pool.shutdown(wait=False)  # the hung thread is left behind, not reused
            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="numoracle-kernel")
            raise _Hung(f"the kernel did not return within {timeout:g} s (hung?)") from None


_WORKER = _Worker()


def _call_with_timeout(fn: Any, kwargs: Mapping[str, Any], timeout: float) -> Any:
    """Run ``fn(**kwargs)`` in the worker thread; raise _Hung past ``timeout``."""
    return _WORKER.call(fn, kwargs, timeout)


def run_kernel(case: Case, target: Target, inputs: Mapping[str, np.ndarray],
               timeout: float = DEFAULT_TIMEOUT) -> tuple[dict[str, np.ndarray] | None, str | None]:
    """Run ``target`` on the case's inputs; return (host outputs, None) or
    (None, a sentence saying what went wrong)."""
    op = get_op(case.op)
    backend = get_backend(target.backend)
    storage = target.precision.storage
    args = {name: _to_target(backend, storage, arr, case.layout(name),
                             target.accepted_layouts(name), op.input_axes.get(name))
            for name, arr in inputs.items()}
    if op.passes_params:
        args["params"] = dict(case.params)
    try:
        out = _call_with_timeout(target.fn, args, timeout)
        backend.synchronize()
    except _Hung as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - a raising kernel is a failing verdict
        return None, f"the kernel raised {type(exc).__name__}: {exc}"
    if not isinstance(out, Mapping):
        return None, (f"the kernel returned {type(out).__name__}; it must return a dict "
                      "of outputs by name")
    defined = op.outputs(case.params)  # e.g. no grad_bias for a case without a bias
    wanted = [k for k in (target.outputs or defined) if k in defined]
    missing = [k for k in wanted if k not in out]
    if missing:
        return None, f"the kernel did not return {missing} (returned {sorted(out)})"
    expected = op.output_shapes(case.params)
    host: dict[str, np.ndarray] = {}
    for name in wanted:
        arr = out[name]
        axes = op.output_axes.get(name)
        order = target.output_layouts.get(name) if axes is not None else None
        problem = backend.check_output(arr, storage=storage,
                                       shape=shape_in(expected[name], axes, order))
        if problem:
            where = f" (in the target's axis order {order})" if order not in (None, axes) else ""
            return None, f"output {name!r}{where}: {problem}"
        host[name] = np.ascontiguousarray(from_order(backend.to_host(arr), axes, order))
    return host, None


def _to_target(backend: Any, storage: Any, host: np.ndarray, layout: str,
               accepted: tuple[str, ...], axes: str | None) -> Any:
    """``host`` (canonical axis order ``axes``) as the target takes it: in the
    case's layout where the target accepts it, else in its first accepted one."""
    if not accepts(accepted, layout, axes):
        valid = [a for a in accepted if a in layouts_for(axes)]
        layout = valid[0] if valid else "C"
    lay = parse(layout, axes)
    return backend.to_device(to_order(host, axes, lay.order), storage, lay.memory)


#: multiply-adds above which the float64 reference runs on a GPU, when CuPy has one
GPU_REFERENCE_WORK = 1 << 26


def _reference_inputs(case: Case, inputs: Mapping[str, np.ndarray]) -> Mapping[str, Any]:
    """The inputs where the reference should be computed: on the GPU (CuPy,
    float64) for large cases when one is usable, else on the host."""
    op = get_op(case.op)
    shapes = op.output_shapes(case.params)
    work = sum(int(np.prod(shapes[k])) * n for k, n in op.reductions(case.params).items())
    if work < GPU_REFERENCE_WORK or get_backend("cupy").available() is not None:
        return inputs
    import cupy  # noqa: PLC0415 - optional, and only for large cases

    return {k: cupy.asarray(v) for k, v in inputs.items()}


def judge(case: Case, model: PrecisionModel, inputs: Mapping[str, np.ndarray],
          got: Mapping[str, np.ndarray], *, with_diagnosis: bool = True) -> dict[str, Any]:
    """Compare host outputs with the reference under ``model``; per output verdicts."""
    op = get_op(case.op)
    names = tuple(got)
    ref_inputs = _reference_inputs(case, inputs)

    computed: dict[PrecisionModel, dict[str, Tracked]] = {}

    def reference_for(m: PrecisionModel) -> dict[str, Tracked]:
        if m not in computed:  # every output's diagnosis tries the same models
            refs = op.reference(ref_inputs, case.params, m, names)
            computed[m] = {k: v.to_host() for k, v in refs.items()}
        return computed[m]

    refs = reference_for(model)
    verdicts = {}
    for name in names:
        v = compare(name, got[name], refs[name], probabilistic=model.probabilistic)
        if with_diagnosis or not v.passed:
            def output_reference(m: PrecisionModel, _n: str = name) -> Tracked:
                return reference_for(m)[_n]

            diagnose(v, got[name], model, output_reference, ladder=op.precision_ladder)
        verdicts[name] = v
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


def check_case(case: Case, target: Target, *, timeout: float = DEFAULT_TIMEOUT,
               with_diagnosis: bool = False, update_first: bool = True,
               inputs: Mapping[str, np.ndarray] | None = None) -> Verdict:
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
    timeout : float
        Seconds before a kernel counts as hung.
    with_diagnosis : bool
        Also diagnose passing outputs (failing ones always are).
    update_first : bool
        Make the earlier call with other parameter values (ops with parameters only).
    inputs : dict of arrays, optional
        The inputs to use instead of the case's generated ones (a case supplied
        from outside, as ``numoracle shrink`` takes it); shapes must be the case's.
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
    inputs = case.inputs() if inputs is None else dict(inputs)
    if update_first and get_op(case.op).parameters:
        run_kernel(case, target, earlier_parameters(case, inputs), timeout)  # result dropped
    got, error = run_kernel(case, target, inputs, timeout)
    verdict = Verdict(case=case, target=target.name, op=target.op,
                      precision=target.precision.name, passed=False, error=error, got=got)
    if got is not None:
        verdict.outputs = judge(case, target.precision, inputs, got,
                                with_diagnosis=with_diagnosis)
        verdict.passed = all(v.passed for v in verdict.outputs.values())
    verdict.seconds = time.perf_counter() - t0
    return verdict
