"""Teacher-forced checks of optimizer and MLP training trajectories (DESIGN §4).

Like :func:`numoracle.trajectory.check_trajectory` (whose verdict types are used
here: :class:`~numoracle.trajectory.core.StepVerdict`,
:class:`~numoracle.trajectory.core.StepFailure`,
:class:`~numoracle.trajectory.core.TrajectoryVerdict`), each step ``k`` is judged from
the kernel's *own* state after step ``k - 1`` (parameters and optimizer state,
taken as exact inputs), so the first step and tensor that break their bound
are named (seed 003: an optimizer applied per sample fails at step 1; seed
002: a divergence is charged to the step that made it).

Free-running: the oracle also runs its own trajectory from the same start,
with the bounds composed over the steps (:mod:`~numoracle.oracle.tracked`
carries the radii of step ``k`` into step ``k + 1``). :class:`BoundedDrift`
reports how far the kernel's final state is from it and whether that drift is
explained by the composed per-step bounds (``|drift| <= bound`` everywhere),
and the last step through which the composed bound stayed finite.

What the two checks say about drift. Teacher forcing judges each step from
the kernel's own state, so when every step is within its bound the whole
drift, however large, is rounding accumulated through steps that are each
correct to the claimed precision: no step added a logic error. The composed
bound says more (how far a correct kernel may drift) but only while it is
finite. It is a sound worst case, and it grows fast for genuine reasons,
not from a radius counted twice (each step adds the radius of the parameter
it starts from and that of its gradient, which depends on the parameters:
a sum of two bounds of correlated errors, which first-order propagation
would make sharper but not sound for the steps below):

* a parameter radius ``r`` enters the next gradient through every
  contraction (``|a| r_b + |b| r_a``), so SGD's radius grows by about
  ``1 + lr L`` per step (``L``: how strongly the gradient depends on the
  parameters, a few to tens for the MLPs of the tests);
* a ReLU whose pre-activation lies within its radius of 0 may be on or off:
  the gradient through it gains its whole magnitude as radius
  (:func:`~numoracle.oracle.tracked.relu_mask_mul`), and more pre-activations
  fall within reach as the radii grow;
* Adam divides by ``sqrt(v)``: where a gradient's radius reaches its value
  (its sign is not known) ``m / sqrt(v)`` may be anything from ``-1`` to
  ``1`` times its scale and the bound of that element is infinite (the
  element is not judged), already at step 1 for such elements.

On the MLP of ``tests/test_optim_trajectory.py`` (8-6-5-3, batch 32, 12
steps, float32; the test checks these) the composed bound of the host
trainer stays finite through all 12 steps with SGD at lr 0.01 (drift/bound
0.05), through step 7 only at lr 0.1 (the largest relative radius grows
1.6-20x per step), through step 1 only with Adam. So long free-running
drift is often "not judged", and the teacher-forced verdict is the one to
read; :attr:`BoundedDrift.finite_steps` names how far the composed bound
reached.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checking.verdict import compare
from ..errors import InvalidArgument
from ..oracle.mlp import MLP, PARAMS
from ..oracle.optim_math import OptimConfig, optimizer_step
from ..oracle.precision import PrecisionModel, get_model
from ..oracle.tracked import Tracked, exact, store
from .core import (
    Drift,
    StepFailure,
    StepVerdict,
    TrajectoryVerdict,
    first_failure,
    host_array,
)

__all__ = ["BoundedDrift", "check_optimizer_trajectory", "check_mlp_trajectory", "check_steps",
           "mlp_problem"]

#: the oracle's step: ``ref_step(k, state, model) -> {tensor: Tracked}``
RefStep = Callable[[int, Mapping[str, Tracked], PrecisionModel], Mapping[str, Tracked]]


@dataclass(frozen=True)
class BoundedDrift(Drift):
    """:class:`~numoracle.trajectory.core.Drift` (``weight``: the largest parameter gap,
    over every parameter) with the composed bound: ``ratio`` is the largest
    ``|kernel - oracle| / bound`` over the final parameters; below 1 the drift is
    explained by the per-step bounds."""

    ratio: float = float("inf")
    #: the steps through which the composed bound of every parameter stayed finite
    finite_steps: int = 0

    @property
    def explained(self) -> bool:
        return bool(self.ratio < 1.0)

    def __str__(self) -> str:
        why = ("explained by the composed per-step bounds" if self.explained else
               "the composed bounds are no longer finite: drift not judged (a pass of "
               "every teacher-forced step means it is accumulated rounding)"
               if np.isnan(self.ratio) else "NOT explained by the composed per-step bounds")
        reach = ("" if self.finite_steps >= self.steps else
                 f"; the composed bound is finite for every parameter through step "
                 f"{self.finite_steps} only")
        return (f"free-running drift after {self.steps} steps: max |param - oracle| "
                f"{self.weight:.3g}, loss differs by {self.loss:.3g}; worst drift/bound "
                f"{self.ratio:.3g}: {why}{reach}")


def check_steps(step_fn: Callable[[Mapping[str, np.ndarray], int], Mapping[str, Any]],
                ref_step: RefStep, init: Mapping[str, np.ndarray], names: Sequence[str],
                carried: Sequence[str], steps: int, model: PrecisionModel | str = "fp32", *,
                probabilistic: bool = False, diagnose_failure: bool = True,
                free_running: bool = True) -> TrajectoryVerdict:
    """The teacher-forced check behind the two public ones.

    ``step_fn(state, k)`` runs the kernel's step ``k`` from ``state`` (float32
    host arrays) and returns every tensor of ``names`` (data-flow order); the
    tensors of ``carried`` (parameters and optimizer state) are handed to the
    next step. ``ref_step`` is the oracle's step.
    """
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise InvalidArgument(f"{steps=} must be a positive int, e.g. steps=5")
    claimed = get_model(model)
    cur = {k: np.array(v, dtype=np.float32) for k, v in init.items()}
    records: list[StepVerdict] = []
    first: StepFailure | None = None
    final: dict[str, np.ndarray] = {}
    losses: list[float] = []
    for k in range(1, steps + 1):
        with np.errstate(all="ignore"):  # IEEE exceptions of a kernel are not failures
            got = step_fn({n: v.copy() for n, v in cur.items()}, k)
        state = {n: exact(host_array(v)) for n, v in cur.items()}
        with np.errstate(all="ignore"):
            ref = ref_step(k, state, claimed)
        rec = StepVerdict(k)
        arrays: dict[str, np.ndarray] = {}
        for name in names:
            if name not in got or got[name] is None:
                rec.problems[name] = f"the step returned no {name!r}"
                continue
            arr = host_array(got[name]).reshape(ref[name].shape) if np.size(got[name]) == \
                int(np.prod(ref[name].shape)) else host_array(got[name])
            if arr.shape != ref[name].shape:
                rec.problems[name] = f"shape {arr.shape}, expected {ref[name].shape}"
                continue
            arrays[name] = arr
            rec.outputs[name] = compare(name, arr, ref[name], probabilistic=probabilistic)
        records.append(rec)
        if first is None and not rec.passed:
            def reference(m: PrecisionModel, k: int = k, st: Mapping[str, Tracked] = state
                          ) -> Mapping[str, Tracked]:
                return ref_step(k, st, m)
            first = first_failure(rec, names, arrays, claimed,
                                  reference if diagnose_failure else None, ladder=False)
        if "loss" in arrays:
            losses.append(float(arrays["loss"]))
        final = arrays
        if any(n not in arrays for n in carried):
            break
        cur = {n: np.array(host_array(got[n]), dtype=np.float32) for n in carried}
    drift = None
    if free_running and final:
        drift = _free_run(ref_step, init, carried, steps, claimed, final, losses)
    return TrajectoryVerdict(claimed.name, records, first, drift)


def _free_run(ref_step: RefStep, init: Mapping[str, np.ndarray], carried: Sequence[str],
              steps: int, model: PrecisionModel, final: Mapping[str, np.ndarray],
              losses: Sequence[float]) -> BoundedDrift:
    """The oracle's own trajectory with composed bounds, against the kernel's end."""
    state: dict[str, Tracked] = {n: exact(host_array(v)) for n, v in init.items()}
    loss = float("nan")
    params = [n for n in carried if "." not in n]
    finite = 0
    with np.errstate(all="ignore"):
        for k in range(1, steps + 1):
            out = ref_step(k, state, model)
            if "loss" in out:
                loss = float(out["loss"].value)
            state = {**state, **{n: out[n] for n in carried}}
            if finite == k - 1 and all(bool(np.all(np.isfinite(state[n].bound())))
                                       for n in params):
                finite = k
    gap, ratio = 0.0, 0.0
    with np.errstate(all="ignore"):
        for n in params:
            if n not in final:
                continue
            d = np.abs(final[n] - state[n].value)
            gap = max(gap, float(np.nanmax(d, initial=0.0)))
            b = state[n].bound()
            if bool(np.any(~np.isfinite(b) & (d > 0))):
                ratio = float("nan")  # the composed bound grew past any use
                continue
            r = np.where(d == 0, 0.0, d / np.where(b > 0, b, 0.0))
            ratio = max(ratio, float(np.max(r, initial=0.0)))
    loss_gap = abs(losses[-1] - loss) if losses else 0.0
    return BoundedDrift(steps, gap, None, loss_gap, ratio, finite)


# -- optimizers -----------------------------------------------------------------------------
def check_optimizer_trajectory(
    step_fn: Callable[..., Mapping[str, Any]], cfg: OptimConfig, param0: np.ndarray,
    grads: np.ndarray, model: PrecisionModel | str = "fp32", **kw: Any,
) -> TrajectoryVerdict:
    """Check ``len(grads)`` optimizer steps of a kernel with teacher forcing.

    Parameters
    ----------
    step_fn : callable
        ``step_fn(param, grad, state, k)``: the kernel's step ``k`` (1-based) from
        ``param`` and the optimizer ``state`` after step ``k - 1`` (a dict of
        :attr:`OptimConfig.state_names`, empty at step 1); returns ``param`` and
        the new state, by name.
    cfg : OptimConfig
        The optimizer the kernel claims to implement.
    param0 : ndarray
        The starting parameter (float32 values).
    grads : ndarray
        ``(steps, *param0.shape)``: the gradient of each step.
    model : PrecisionModel or str
        The precision claimed; ``**kw`` as :func:`check_steps`.

    Returns
    -------
    TrajectoryVerdict
        Per step the worst ``err / bound`` of ``param`` and each state tensor
        (bounds of :mod:`~numoracle.oracle.optim_math`), the first failing step
        and tensor, and the :class:`BoundedDrift`.
    """
    grads = np.asarray(grads)
    param0 = np.asarray(param0)
    if grads.ndim < 1 or grads.shape[1:] != param0.shape:
        raise InvalidArgument(f"grads {grads.shape} must be (steps, *{param0.shape})")
    names = ("param",) + cfg.state_names

    def ref(k: int, state: Mapping[str, Tracked], m: PrecisionModel) -> dict[str, Tracked]:
        p, st = optimizer_step(cfg, state["param"], exact(host_array(grads[k - 1])),
                               {n: state[n] for n in cfg.state_names if n in state}, k, m)
        return {"param": store(p, m), **{n: store(v, m) for n, v in st.items()}}

    def kernel(state: Mapping[str, np.ndarray], k: int) -> Mapping[str, Any]:
        return step_fn(state["param"], np.array(grads[k - 1], dtype=np.float32),
                       {n: state[n] for n in cfg.state_names if n in state}, k)

    return check_steps(kernel, ref, {"param": param0}, names, names, len(grads), model, **kw)


# -- the MLP --------------------------------------------------------------------------------
def mlp_problem(rng: np.random.Generator, sizes: tuple[int, int, int, int], steps: int,
                batch: int) -> tuple[dict[str, np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """A random float32 training problem for :func:`check_mlp_trajectory`:
    parameters of an MLP ``in -> h1 -> h2 -> classes`` (``sizes``; weights
    scaled by ``1/sqrt(fan_in)``, biases by 0.1) and ``steps`` batches of
    ``batch`` normal inputs with uniform labels."""
    i, h1, h2, c = sizes
    f = np.float32
    params = {"w1": (rng.standard_normal((h1, i)) / np.sqrt(i)).astype(f),
              "b1": (0.1 * rng.standard_normal(h1)).astype(f),
              "w2": (rng.standard_normal((h2, h1)) / np.sqrt(h1)).astype(f),
              "b2": (0.1 * rng.standard_normal(h2)).astype(f),
              "w3": (rng.standard_normal((c, h2)) / np.sqrt(h2)).astype(f),
              "b3": (0.1 * rng.standard_normal(c)).astype(f)}
    xs = [rng.standard_normal((batch, i)).astype(f) for _ in range(steps)]
    labels = [rng.integers(0, c, batch) for _ in range(steps)]
    return params, xs, labels


def check_mlp_trajectory(
    step_fn: Callable[..., Mapping[str, Any]], cfg: OptimConfig,
    params0: Mapping[str, np.ndarray], xs: Sequence[np.ndarray], labels: Sequence[np.ndarray],
    model: PrecisionModel | str = "fp32", *, gradients: bool = True, **kw: Any,
) -> TrajectoryVerdict:
    """Check an MLP training loop (one batch per step) with teacher forcing.

    Parameters
    ----------
    step_fn : callable
        ``step_fn(params, state, x, labels, k)``: the kernel's training step ``k``
        on the batch ``x`` (B, in), ``labels`` (B,) integers, from the parameters
        ``w1 ... b3`` and the optimizer state (``w1.exp_avg`` ...) after step
        ``k - 1``; returns ``loss``, the updated parameters and state and, with
        ``gradients``, the averaged gradients ``grad_w1`` ... it applied.
    cfg : OptimConfig
        The optimizer, applied once per batch.
    params0 : mapping
        The starting ``w1`` (hidden1, in), ``b1``, ``w2``, ``b2``, ``w3``
        (classes, hidden2), ``b3``.
    xs, labels : sequences
        The batch of each step.
    gradients : bool
        Judge the gradients the step returns (tensors ``grad_w1`` ...) too.

    Returns
    -------
    TrajectoryVerdict
        Tensors judged in data-flow order ``loss, grad_w3, grad_b3, ..., w1 ...
        b3`` and the optimizer state; bounds of :class:`~numoracle.oracle.mlp.MLP`.
    """
    missing = [p for p in PARAMS if p not in params0]
    if missing:
        raise InvalidArgument(f"params0 misses {missing}; give all of {PARAMS}")
    if len(xs) != len(labels) or not len(xs):
        raise InvalidArgument(f"xs ({len(xs)}) and labels ({len(labels)}) must give one "
                              "batch per step, at least one")
    w1, w3 = np.shape(params0["w1"]), np.shape(params0["w3"])
    sizes = (int(w1[1]), int(w1[0]), int(w3[1]), int(w3[0]))
    claimed = get_model(model)
    net = MLP(sizes, cfg, claimed)
    grads = tuple(f"grad_{p}" for p in reversed(PARAMS)) if gradients else ()
    carried = PARAMS + net.state_names()
    names = ("loss",) + grads + carried
    labels = [np.asarray(lab).astype(np.int64) for lab in labels]

    def ref(k: int, state: Mapping[str, Tracked], m: PrecisionModel) -> Mapping[str, Tracked]:
        return net.with_model(m).step(exact(host_array(xs[k - 1])), labels[k - 1], state, state, k)

    def kernel(state: Mapping[str, np.ndarray], k: int) -> Mapping[str, Any]:
        params = {p: state[p] for p in PARAMS}
        opt = {n: state[n] for n in net.state_names() if n in state}
        return step_fn(params, opt, np.asarray(xs[k - 1], dtype=np.float32), labels[k - 1], k)

    init = {p: np.asarray(params0[p]) for p in PARAMS}
    return check_steps(kernel, ref, init, names, carried, len(xs), claimed, **kw)
