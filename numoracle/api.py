"""The user-facing checks: :func:`check_kernel` and the :func:`validate` decorator.

Both wrap a kernel function in a :class:`~numoracle.targets.target.Target`, draw cases
with Hypothesis (:func:`numoracle.running.runner.run_target`), judge every output
against the oracle's bound under the claimed precision model, shrink the
first failure to a minimal case and save it as a repro.

A kernel takes the op's inputs as keyword arguments (backend arrays named as
the op names them) and returns a dict of its outputs by name. For ``linear``::

    def my_linear(x, weight, grad_output, bias=None):
        y = x @ weight.T + bias
        return {"y": y, "grad_input": grad_output @ weight,
                "grad_weight": grad_output.T @ x, "grad_bias": grad_output.sum(0)}

    numoracle.check_kernel(my_linear, op="linear", precision="fp32")

    # or, as a pytest test of its own
    test_my_linear = numoracle.validate(op="linear", precision="fp32")(my_linear)

Results are also handed to every listener added with :func:`add_listener`;
the pytest plugin summarises them at the end of a run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .callables import default_name
from .cases.layouts import AXIS_ORDERS
from .checking.check import isolation as isolation_scope
from .errors import InvalidArgument, KernelMismatch, NumoracleError
from .oracle.ops import get_op
from .oracle.ops.plan import Choice, Derived, Flag, Widths
from .oracle.precision import PrecisionModel, get_model
from .outcome import RunVerdict
from .settings import RunSettings
from .targets.target import BACKENDS, GPU_BACKENDS, Target

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from .cases.case import Case
    from .running.runner import TargetResult

__all__ = ["check_kernel", "validate", "op_outputs", "add_listener", "remove_listener",
           "run_settings", "RunSettings", "FROM_SETTINGS", "GPU_BACKENDS"]


Listener = Callable[["TargetResult"], None]

class _FromSettings:
    """The default of a check's ``seed=`` and ``store=``: the value of its
    ``settings=`` (or ``profile=``, or the loaded profile)."""

    def __repr__(self) -> str:
        return "<from the settings>"


#: a keyword left to the check's settings
FROM_SETTINGS: Any = _FromSettings()


def run_settings(*, settings: RunSettings | None = None, profile: str | None = None,
                 examples: int | None = None, seed: Any = FROM_SETTINGS,
                 store: Any = FROM_SETTINGS, isolate: bool | None = None,
                 timeout: float | None = None) -> RunSettings:
    """The :class:`~numoracle.settings.RunSettings` a check runs with: ``settings``,
    else the registered ``profile``, else the loaded profile
    (:meth:`RunSettings.default`), with the keywords given changed (``examples``,
    ``isolate`` and ``timeout`` None, ``seed`` and ``store`` left out: the
    settings' own).

    Examples
    --------
    >>> run_settings(examples=5, seed=3, store=None) == RunSettings.default().replace(
    ...     examples=5, seed=3, store=None)
    True
    """
    if settings is not None and profile is not None:
        raise InvalidArgument(f"give settings= or profile={profile!r}, not both")
    if settings is not None and not isinstance(settings, RunSettings):
        raise InvalidArgument(f"settings={settings!r} must be a numoracle.RunSettings, e.g. "
                              "settings=RunSettings(examples=200)")
    base = settings if settings is not None else (
        RunSettings.get_profile(profile) if profile is not None else RunSettings.default())
    given = {"examples": examples, "seed": seed, "store": store, "isolate": isolate,
             "timeout": timeout}
    unset = {"examples": None, "isolate": None, "timeout": None}
    return base.replace(**{k: v for k, v in given.items()
                           if v is not FROM_SETTINGS and not (k in unset and v is None)})


_listeners: list[Listener] = []


def add_listener(listener: Listener) -> None:
    """Call ``listener(result)`` after every :func:`check_kernel`, pass or fail."""
    if not callable(listener):
        raise InvalidArgument(f"listener={listener!r} must be callable: listener(result)")
    _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    """Stop calling a listener added with :func:`add_listener` (no-op if absent)."""
    if listener in _listeners:
        _listeners.remove(listener)


def op_outputs(op: str) -> tuple[str, ...]:
    """Every output ``op`` can have: its outputs with each flag parameter on
    (``linear`` has ``grad_bias`` only with ``bias=True``).

    Examples
    --------
    >>> op_outputs("linear")
    ('y', 'grad_input', 'grad_weight', 'grad_bias')
    """
    o = get_op(op)
    return o.outputs(_fullest_params(op))


def op_inputs(op: str) -> tuple[str, ...]:
    """Every input ``op`` can have (each flag parameter on).

    Examples
    --------
    >>> op_inputs("linear")
    ('x', 'weight', 'grad_output', 'bias')
    """
    return tuple(get_op(op).input_shapes(_fullest_params(op)))


def _fullest_params(op: str) -> dict[str, Any]:
    """Valid parameters of ``op`` with every flag on and the deepest chain."""
    o = get_op(op)
    plan = o.plan
    params: dict[str, Any] = dict.fromkeys(o.param_names, 1)
    params.update({s.name: True if isinstance(s, Flag) else s.smallest
                   for s in plan if not isinstance(s, (Widths, Derived))})
    for s in plan:  # a chain's outputs are per layer: the deepest chain has them all
        if isinstance(s, Widths):
            depth = [c for c in plan if isinstance(c, Choice) and c.name == s.count]
            if depth:
                params[s.count] = max(depth[0].options)
            params[s.name] = s.least(params)
    return o.validate(params)


def _check_outputs(op: str, outputs: Sequence[str]) -> tuple[str, ...]:
    names = _check_names("outputs", outputs)
    known = op_outputs(op)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidArgument(f"outputs={names!r} names {unknown}, which {op} does not "
                              f"compute; its outputs are {known}")
    return names


def _check_names(what: str, value: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise InvalidArgument(
            f"{what}={value!r} must be a tuple of names, e.g. {what}=('y',), not a string"
        )
    return tuple(value)


def _check_layouts(op: str, layouts: Sequence[str] | Mapping[str, Sequence[str] | str],
                   ) -> tuple[tuple[str, ...] | dict[str, tuple[str, ...]], dict[str, str]]:
    """``layouts`` as a target takes them: the accepted layouts of the inputs (one
    tuple for all, or per input), and the axis order of each output the mapping
    names (``{"x": ("NHWC",), "y": "NHWC"}``: y comes back as NHWC)."""
    if not isinstance(layouts, Mapping):
        return _check_names("layouts", layouts), {}
    inputs, outputs = op_inputs(op), op_outputs(op)
    accepted: dict[str, tuple[str, ...]] = {}
    returned: dict[str, str] = {}
    axes = get_op(op).output_axes
    for key, value in layouts.items():
        if key in inputs:
            accepted[key] = (value,) if isinstance(value, str) else \
                _check_names(f"layouts[{key!r}]", value)
        elif key in outputs:
            order = value if isinstance(value, str) else tuple(value)
            if isinstance(order, tuple) and len(order) == 1 and isinstance(order[0], str):
                order = order[0]
            if not isinstance(order, str) or key not in axes:
                raise InvalidArgument(
                    f"layouts[{key!r}]={value!r}: an output is returned in one axis order, "
                    f"and only outputs with named axes ({sorted(axes) or 'none in ' + op}) "
                    f"take one, e.g. layouts={{{key!r}: 'NHWC'}}")
            returned[key] = order
        else:
            raise InvalidArgument(f"layouts names {key!r}, which is neither an input of {op} "
                                  f"{inputs} nor one of its outputs {outputs}")
    return accepted, returned


def _make_target(
    fn: Callable[..., Any],
    *,
    op: str,
    precision: str | PrecisionModel = "fp32",
    backend: str = "numpy",
    outputs: Sequence[str] = (),
    layouts: Sequence[str] | Mapping[str, Sequence[str] | str] = ("C",),
    name: str | None = None,
) -> Target:
    """The :class:`~numoracle.targets.target.Target` :func:`check_kernel` runs ``fn`` as.

    Its availability is the backend's: a ``cupy`` target is unavailable where
    cupy or a GPU is missing.
    """
    from .targets.backends import get_backend  # noqa: PLC0415 - kernels load on first use

    get_op(op)
    if not isinstance(backend, str):
        raise InvalidArgument(f"{backend=} must be a backend name, one of {BACKENDS}")
    model = get_model(precision)
    note = ""
    if backend == "triton":  # torch CUDA arrays, Triton's elementwise accuracy by default
        backend = "torch-cuda"
        if isinstance(precision, str) and model.accuracy == "ieee":
            model = get_model(model, accuracy="triton")
            note = ("a Triton target: claims Triton's default fp32 elementwise accuracy "
                    "(div.full.f32, ex2.approx, lg2.approx, rsqrt.approx); claim "
                    "precision=get_model(..., accuracy='ieee') for correctly rounded maths")
    if name is None:  # a lambda's carries its content hash: two lambdas are two kernels
        name = default_name(fn)
    if not isinstance(name, str) or not name:
        raise InvalidArgument(f"{name=} must be a non-empty str naming the kernel")
    accepted, output_layouts = _check_layouts(op, layouts)
    return Target(
        name=name, op=op, backend=backend, precision=model, fn=fn,
        outputs=_check_outputs(op, outputs), layouts=accepted, output_layouts=output_layouts,
        available=get_backend(backend).available,
        description=note or (getattr(fn, "__doc__", None) or "").strip().split("\n")[0],
    )


def _traced_name(op: str | None, reference: Any, traced: Mapping[str, Any]) -> str:
    """The op a check runs: ``op``, or the traced op made from ``reference``
    (:func:`numoracle.oracle.traced.op.traced_op`, registered under ``op`` when
    given, else ``traced_<reference name>``)."""
    given = {k: v for k, v in traced.items() if v is not None and v != ()}
    if reference is None:
        if op is None:
            raise InvalidArgument("give op= (a built-in op, e.g. op='linear') or reference= "
                                  "(a PyTorch function or module, with inputs=)")
        if given:
            raise InvalidArgument(f"{sorted(given)} describe a reference; give reference= "
                                  "with them, or drop them for op=" + repr(op))
        return op
    if "inputs" not in given:
        raise InvalidArgument("reference= needs inputs=, e.g. inputs={'x': ('batch', 'n')} "
                              "or example tensors")
    from .oracle.traced.op import traced_op  # noqa: PLC0415 - torch only for traced references

    kwargs = {("params" if k == "reference_params" else k): v for k, v in given.items()}
    return traced_op(reference, name=op, **kwargs).name


def _traced_axes(reference: Any, layouts: Any) -> dict[str, str] | None:
    """The canonical axis order (``NCHW``, ``OIHW``) of each input of a traced
    reference that ``layouts`` hands over in another axis order (``{"x":
    ("NHWC",)}``: x is NCHW for the reference, NHWC for the kernel)."""
    if reference is None:
        return None
    if not isinstance(layouts, Mapping):
        named = [lay for lay in (layouts,) if isinstance(lay, str)] or list(layouts or ())
        orders = [lay for lay in named if isinstance(lay, str) and ":" + lay not in ":C:F:T:S"]
        if orders:
            raise InvalidArgument(
                f"layouts={layouts!r} names axis orders {orders}, which a traced reference "
                "takes per input (its inputs have no named axes): give them by input, e.g. "
                f"layouts={{'x': ({orders[0]!r},)}}")
        return None
    axes: dict[str, str] = {}
    for key, value in layouts.items():
        names = (value,) if isinstance(value, str) else tuple(value)
        found = {canonical for lay in names if isinstance(lay, str)
                 for canonical, orders in AXIS_ORDERS.items() if lay.partition(":")[0] in orders}
        if len(found) > 1:
            raise InvalidArgument(f"layouts[{key!r}]={value!r} mixes the axis orders of "
                                  f"{sorted(found)}; an input has one canonical order")
        if found:
            axes[str(key)] = found.pop()
    return axes or None


#: cases() arguments a check sets from its own: the op and the claimed precision's storage
_FIXED_BY_CHECK = {"op": "op=", "storage": "precision="}


def _strategy(target: Target, overrides: dict[str, Any]) -> SearchStrategy[Case]:
    """Cases for ``target``, built now so that a bad override fails here, not mid-run."""
    from .running.runner import default_strategy  # noqa: PLC0415 - hypothesis only when checking
    from .strategies import cases  # noqa: PLC0415 - hypothesis only when checking

    allowed = [p for p in inspect.signature(cases).parameters if p not in _FIXED_BY_CHECK]
    for key in overrides:
        if key in _FIXED_BY_CHECK:
            raise InvalidArgument(f"{key}= is set by the check itself; use "
                                  f"{_FIXED_BY_CHECK[key]} instead")
        if key not in allowed:
            raise InvalidArgument(f"{key}={overrides[key]!r} is not an argument of the check "
                                  f"or of its case strategy; the strategy takes {allowed}")
    return default_strategy(target, **overrides)


def _edges(target: Target, seed: int | None, overrides: Mapping[str, Any]) -> list[Case]:
    """The cases a check judges first, as a run's rows do: one at every edge of the
    target's sizes (the top of each range, a partial tile), in the small regime; a
    traced reference's as a built-in op's."""
    from .running.draws import edge_cases  # noqa: PLC0415 - hypothesis only when checking

    if overrides.get("regime", "small") != "small":
        return []
    return edge_cases(target, seed or 0, **overrides)


def _run(target: Target, strategy: SearchStrategy[Case], run: RunSettings,
         overrides: Mapping[str, Any] | None = None) -> TargetResult:
    """Replay the target's stored repros, run new cases (with ``overrides``, the
    strategy's: those at the edges of the sizes first), tell the listeners, raise
    when the kernel failed."""
    __tracebackhide__ = True  # pytest shows the failure, not numoracle's own source
    from .running.runner import run_target  # noqa: PLC0415 - hypothesis only when checking

    run = run.replace(isolate=bool(run.isolate))  # a check's kernel runs here unless told
    with isolation_scope(run.isolate, run.timeout):  # the stored repros replay isolated too
        result = _replay_stored(target, run.store)
    if result.verdict is not RunVerdict.FAIL:
        replayed, fixed = result.replayed, result.fixed
        result = run_target(target, run, strategy=strategy,
                            edges=[] if overrides is None else _edges(target, run.seed,
                                                                      overrides))
        result.replayed, result.fixed = replayed, fixed
    for listener in tuple(_listeners):
        listener(result)
    if result.verdict is RunVerdict.FAIL:
        raise KernelMismatch(result.message or result.diagnosis, result.failure)
    if result.verdict is RunVerdict.SKIPPED:
        raise NumoracleError(f"kernel {target.name!r} cannot run here: {result.diagnosis}")
    if result.verdict is not RunVerdict.PASS:
        raise NumoracleError(f"checking {target.name!r} did not complete: {result.diagnosis}")
    if result.cases == 0:
        raise NumoracleError(
            f"no case of {target.name!r} could be checked: the oracle found every drawn case "
            "unsupported; draw smaller cases (max_elements=..., max_reduction=...)"
        )
    return result


def _run_test(target: Target, strategy: SearchStrategy[Case], run: RunSettings,
              overrides: Mapping[str, Any] | None) -> None:
    """The body of a :func:`validate` test: skip where the backend cannot run,
    else :func:`_run` (hidden from pytest's traceback, as ``_run`` is)."""
    __tracebackhide__ = True
    reason = target.unavailable_reason()
    if reason is not None:
        import pytest  # noqa: PLC0415 - only a test run skips

        pytest.skip(f"{target.name} on {target.backend}: {reason}")
    _run(target, strategy, run, overrides)


def _replay_stored(target: Target, store: Path | str | None) -> TargetResult:
    """Replay the repros the store holds for ``target`` (as Hypothesis replays its
    example database): a FAIL result for the first that still fails, else a
    pass result naming those that pass now (fixed)."""
    from .checking.replay import replay_for_target  # noqa: PLC0415 - only when checking
    from .running.runner import TargetResult  # noqa: PLC0415 - hypothesis only when checking

    result = TargetResult(target.name, target.op, target.precision.name)
    if target.unavailable_reason() is not None:
        return result
    failing, fixed = replay_for_target(target, store)
    result.replayed = len(failing) + len(fixed)
    result.fixed = [str(e.path) for e in fixed]
    if failing:
        v = failing[0]
        result.cases = result.failures = result.cases_to_catch = 1
        result.verdict, result.worst_ratio, result.repro = RunVerdict.FAIL, v.worst_ratio, v.repro
        result.diagnosis = v.diagnosis
        result.failure = v
        result.repro_shape = ", ".join(f"{k}{tuple(s)}" for k, s in v.case.shapes().items())
        result.message = v.message() + "\n  (a stored repro of this kernel: it still fails)"
    return result


def check_kernel(
    fn: Callable[..., Any],
    *,
    op: str | None = None,
    reference: Any = None,
    inputs: Any = None,
    dims: Mapping[str, Any] | None = None,
    grads: Sequence[str] = (),
    reference_params: Mapping[str, Any] | None = None,
    claims: Any = None,
    integers: Mapping[str, Any] | None = None,
    booleans: Sequence[str] = (),
    precision: str | PrecisionModel = "fp32",
    backend: str = "numpy",
    outputs: Sequence[str] = (),
    layouts: Sequence[str] | Mapping[str, Sequence[str] | str] = ("C",),
    name: str | None = None,
    examples: int | None = None,
    seed: int | None = FROM_SETTINGS,
    store: Path | str | None = FROM_SETTINGS,
    isolate: bool | None = None,
    timeout: float | None = None,
    settings: RunSettings | None = None,
    profile: str | None = None,
    **strategy_overrides: Any,
) -> TargetResult:
    """Check a kernel against the oracle on Hypothesis-drawn cases.

    Every output element is judged by ``|got - ref| / bound < 1``, with the
    bound the claimed precision model gives (DESIGN §2): for a reduction of
    ``n`` terms of magnitude sum ``S``, ``(c_in + gamma_h(u_acc)) S + u_out |y|``
    plus the oracle's own error; in the exact regime the bound is 0 and any
    deviation fails.

    Parameters
    ----------
    fn : callable
        ``fn(**inputs) -> dict``: the op's inputs as backend arrays, by name;
        returns the outputs it computes, by name.
    op : str or None
        The op ``fn`` computes (``"linear"``, ``"matmul"``); with ``reference``,
        the name the traced op is registered under.
    reference : callable, nn.Module or str, optional
        A PyTorch reference ``f(*inputs, **reference_params)`` that *is* the op
        (:class:`numoracle.oracle.traced.op.TracedOp`): traced to ATen per case
        and bounded one rule per ATen op. Its outputs are ``out`` (one tensor),
        ``out0``, ``out1``, ... (a tuple) or a dict's keys.
    inputs : mapping or sequence, optional
        With ``reference``: ``{"x": ("batch", "n")}`` (dimension names and ints)
        or example tensors (fixed shapes).
    dims : mapping, optional
        With ``reference``: ``{"n": (1, 4096)}``, the range of each dimension.
    grads : tuple of str
        With ``reference``: inputs whose gradients ``fn`` returns as
        ``grad_<input>``; it is then also given ``grad_<output>``.
    reference_params : mapping, optional
        With ``reference``: fixed non-tensor keyword arguments of the reference.
    claims : Claims, optional
        With ``reference``: :class:`numoracle.oracle.traced.Claims` (ulps of
        transcendentals, variance, per-op or fused rounding).
    integers : mapping, optional
        With ``reference``: ``{"labels": (0, "n")}``, inputs that hold integers
        (class labels, indices) drawn in ``[lo, hi)``, ends ints or dimension
        names; ``fn`` gets them as int64 arrays.
    booleans : tuple of str
        With ``reference``: inputs that hold booleans (masks).
    precision : str or PrecisionModel
        The precision model ``fn`` claims (``"fp32"``, ``"tf32"``, ``"bf16"``,
        ``"triton"``...; :func:`numoracle.oracle.precision.get_model` makes
        others, e.g. ``get_model("bf16", accuracy="cuda-fast",
        accumulate="bf16")``): formats, order, and the elementwise accuracy
        profile (``ieee``, ``cuda-fast``, ``triton``).
    backend : str
        Where its arrays live: ``"numpy"``, ``"torch-cpu"``, ``"torch-cuda"``
        or ``"cupy"``; ``"triton"`` is ``"torch-cuda"`` for a Triton kernel, and
        a precision given by name then claims the ``triton`` accuracy profile
        (the verdict names it: ``fp32+triton``).
    outputs : tuple of str
        The outputs ``fn`` returns; empty means every output of the op.
    layouts : tuple of str, or mapping of name to layouts
        The input layouts ``fn`` accepts (``"C"``, ``"F"``, ``"T"``, ``"S"``);
        inputs drawn in other layouts are made contiguous first. A mapping
        gives them per input (``{"x": ("NHWC",), "weight": ("HWIO",)}``; inputs
        left out take ``"C"``) and names the axis order of outputs with named
        axes that ``fn`` returns (``{"y": "NHWC", "grad_weight": "HWIO"}``).
    name : str or None
        Name in reports and repros; defaults to ``fn.__qualname__``
        (``lambda_<content hash>`` for a lambda). A repro records where ``fn``
        lives (module or file, and name) so that ``numoracle replay`` runs it
        again; a given ``name`` is the kernel's identity in the store, else
        the function's (:func:`numoracle.callables.identity`).
    examples, seed, store, isolate, timeout : optional
        How the check runs, as :class:`numoracle.RunSettings` names them
        (given here, they change ``settings``): ``examples``, cases to draw
        (None: the active Hypothesis profile's ``max_examples``, 100 by
        default; the pytest plugin's profiles set it); ``seed``, the Hypothesis
        seed (0 by default: the same cases every run; None draws at random);
        ``store``, the folder for the repro of a failure (None saves none);
        ``isolate``, run the kernel in a worker process
        (:mod:`numoracle.checking.isolate`): a segfault, abort, ``os._exit``, a
        kill or a CUDA error fails the case (naming the signal, exit code or
        error) instead of ending the run; the kernel must then be defined at
        module level (default False; the pytest option ``--numoracle-isolate``
        turns it on); ``timeout``, seconds the kernel may take on one case
        before it counts as hung (the verdict says so; 120 s by default, or
        the pytest option ``--numoracle-timeout``); isolated, a hung worker is
        killed.
    settings : RunSettings, optional
        The settings to start from (default: the loaded profile's,
        :meth:`RunSettings.default`).
    profile : str, optional
        The name of a profile registered with
        :meth:`RunSettings.register_profile` to start from instead.
    **strategy_overrides
        Passed to :func:`numoracle.strategies.cases` (``families=``,
        ``max_elements=``, ``max_reduction=``, ...).

    Returns
    -------
    TargetResult
        Cases checked, worst ratio, time, when every case passed.

    Raises
    ------
    KernelMismatch
        When an output left its bound (or the kernel raised, or returned a
        wrong shape, dtype or device). The message gives the worst elements,
        the diagnosis, the repro path and ``numoracle replay PATH``.
    InvalidArgument
        For a bad argument.
    NumoracleError
        When the backend cannot run here, or no case could be checked.

    Examples
    --------
    >>> import numpy as np
    >>> def mm(a, b):
    ...     return {"out": np.matmul(a, b)}
    >>> print(check_kernel(mm, op="matmul", examples=5, store=None).verdict)
    pass
    """
    __tracebackhide__ = True  # pytest shows the failure, not numoracle's own source
    check = _Check.make(op=op, reference=reference, inputs=inputs, dims=dims, grads=grads,
                        reference_params=reference_params, claims=claims, integers=integers,
                        booleans=booleans, precision=precision, backend=backend,
                        outputs=outputs, layouts=layouts, name=name, examples=examples,
                        seed=seed, store=store, isolate=isolate, timeout=timeout,
                        settings=settings, profile=profile, **strategy_overrides)
    target = check.target(fn)
    return _run(target, _strategy(target, check.overrides), check.settings(),
                check.edge_overrides)


@dataclass(frozen=True)
class _Check:
    """A check's arguments, read once for :func:`check_kernel` and :func:`validate`:
    the op (a traced reference's, registered), what makes the target, the case
    strategy's overrides and the keywords that make the run settings."""

    op: str
    target_args: Mapping[str, Any]
    overrides: Mapping[str, Any]
    run_args: Mapping[str, Any]

    @property
    def edge_overrides(self) -> Mapping[str, Any]:
        """The strategy's overrides for the cases at the edges of the sizes
        (:func:`_edges`)."""
        return self.overrides

    @classmethod
    def make(cls, *, op: str | None = None, reference: Any = None, inputs: Any = None,
             dims: Mapping[str, Any] | None = None, grads: Sequence[str] = (),
             reference_params: Mapping[str, Any] | None = None, claims: Any = None,
             integers: Mapping[str, Any] | None = None, booleans: Sequence[str] = (),
             precision: str | PrecisionModel = "fp32", backend: str = "numpy",
             outputs: Sequence[str] = (),
             layouts: Sequence[str] | Mapping[str, Sequence[str] | str] = ("C",),
             name: str | None = None, examples: int | None = None,
             seed: int | None = FROM_SETTINGS, store: Path | str | None = FROM_SETTINGS,
             isolate: bool | None = None, timeout: float | None = None,
             settings: RunSettings | None = None, profile: str | None = None,
             **strategy_overrides: Any) -> _Check:
        run_args = {"settings": settings, "profile": profile, "examples": examples,
                    "seed": seed, "store": store, "isolate": isolate, "timeout": timeout}
        run_settings(**run_args)  # a bad value fails now (at collection, for validate)
        name_ = _traced_name(op, reference, {
            "inputs": inputs, "dims": dims, "grads": tuple(grads),
            "reference_params": reference_params, "claims": claims, "integers": integers,
            "booleans": tuple(booleans), "axes": _traced_axes(reference, layouts)})
        return cls(name_, {"precision": precision, "backend": backend, "outputs": outputs,
                           "layouts": layouts, "name": name},
                   dict(strategy_overrides), run_args)

    def target(self, fn: Callable[..., Any]) -> Target:
        """The target ``fn`` is checked as."""
        return _make_target(fn, op=self.op, **self.target_args)

    def settings(self) -> RunSettings:
        """The run settings, over the profile loaded now."""
        return run_settings(**self.run_args)


def validate(**arguments: Any) -> Callable[[Callable[..., Any]], Callable[[], None]]:
    """Turn a kernel into a zero-argument pytest test that runs :func:`check_kernel`.

    The arguments are :func:`check_kernel`'s and are checked at once, so a bad
    one fails at collection. The test skips when the backend cannot run here;
    tests of GPU backends (``torch-cuda``, ``cupy``) carry the ``gpu`` marker.

    Examples
    --------
    Keep the kernel and add a test for it::

        test_my_linear = numoracle.validate(op="linear", precision="fp32")(my_linear)

    The returned test is named ``test_<kernel name>`` and keeps the kernel as
    its ``kernel`` attribute, the target as ``target`` and the run settings
    (as the profile loaded at collection makes them) as ``settings``.
    """
    check = _Check.make(**arguments)  # a bad argument fails at collection

    def decorate(fn: Callable[..., Any]) -> Callable[[], None]:
        target = check.target(fn)
        strategy = _strategy(target, check.overrides)

        def test() -> None:
            _run_test(target, strategy, check.settings(), check.edge_overrides)

        fname = getattr(fn, "__name__", target.name)
        test.__name__ = fname if fname.startswith("test") else f"test_{fname}"
        test.__qualname__ = test.__name__
        test.__module__ = getattr(fn, "__module__", __name__)
        test.__doc__ = f"{target.name} computes {check.op} within {target.precision.name}."
        test.kernel = fn  # type: ignore[attr-defined]
        test.target = target  # type: ignore[attr-defined]
        test.settings = check.settings()  # type: ignore[attr-defined]
        if target.on_gpu:
            import pytest  # noqa: PLC0415 - the marker only matters under pytest

            return pytest.mark.gpu(test)
        return test

    return decorate
