"""Stepwise training check: SGD trajectories judged step by step with teacher forcing.

The model is :class:`TinyCNN`: one ``conv2d`` (any validated stride,
padding, dilation, groups; bias optional), a ReLU and the mean squared error

.. math::

    L = \\frac{1}{m} \\sum (\\mathrm{relu}(y) - t)^2, \\quad y = \\mathrm{conv2d}(x, w, b),
    \\quad m = \\mathrm{numel}(y),

trained by plain SGD, ``w' = w - lr * dL/dw`` and ``b' = b - lr * dL/db``.

The oracle writes one step once, over error-tracking arrays
(:mod:`numoracle.oracle.tracked`), so every tensor of the step gets its bound
by composition (DESIGN §2):

* ``y``: the conv2d contractions of :func:`~numoracle.oracle.ops.conv2d.conv2d_tracked`
  (``gamma_h(u_acc) S + u_out |y|`` and the rest of the contraction bound);
* ``r = relu(y)``: 1-Lipschitz, no rounding: ``y``'s radius passes through;
* ``d = r - t``: one rounding (:func:`~numoracle.oracle.tracked.sub`);
* ``loss``: ``sum(d * d)`` as a contraction of ``d`` with itself (the
  radius of ``d`` propagates as ``2 |d| r_d + r_d^2``), divided by ``m``
  (:func:`~numoracle.oracle.tracked.mul_scalar`, one rounding);
* ``grad_output = (2 / m) d * (y > 0)``: one rounding of the scaled ``d``
  (the kernel may round ``2/m`` to the storage format first), then the ReLU
  mask (:func:`~numoracle.oracle.tracked.relu_mask_mul`): where ``|y|`` is
  within its radius of 0 the kernel's mask may differ and the radius grows
  by ``|grad|``;
* ``grad_weight``, ``grad_bias``: conv2d backward contractions over the
  tracked ``grad_output``;
* ``weight``, ``bias``: ``lr * grad`` and the subtraction, one rounding each
  (the kernel may round ``lr`` to the storage format), then the store.

:func:`check_trajectory` runs a kernel's SGD step ``steps`` times. At step
``k`` the oracle starts from the kernel's *own* weights and bias after step
``k - 1`` (as exact inputs: teacher forcing), computes the step with bounds
and judges every tensor the kernel returned with
:func:`~numoracle.checking.verdict.compare` (``err / bound < 1`` passes). The first
step and tensor that break their bound are named, so a kernel that keeps
using stale weights after an update fails at step 2, tensor ``y``, instead of
diverging unexplained many steps later (seed 002). A free-running summary
compares the kernel's final parameters with the oracle's own, untethered
trajectory (informative only: rounding differences may grow along it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..checking.verdict import compare
from ..errors import InvalidArgument
from ..oracle.formats import representable
from ..oracle.ops.conv2d import Conv2d, _rearrange, conv2d_tracked
from ..oracle.precision import PrecisionModel, get_model
from ..oracle.tracked import (
    Tracked,
    exact,
    matmul,
    mul_scalar,
    relu,
    relu_mask_mul,
    store,
    sub,
)
from .core import (
    Drift,
    StepFailure,
    StepVerdict,
    TrajectoryVerdict,
    first_failure,
    host_array,
    native_array,
)

__all__ = ["TinyCNN", "StepFn", "check_trajectory", "TENSORS"]

#: what a step returns, in the order the check reads them (data flow order)
TENSORS = ("y", "loss", "grad_weight", "grad_bias", "weight", "bias")

#: a kernel's one SGD step: ``step_fn(weight, bias) -> {tensor name: array}``
StepFn = Callable[[np.ndarray, "np.ndarray | None"], Mapping[str, Any]]


def _scalar_err(c: float, model: PrecisionModel) -> float:
    """Relative error of the kernel's copy of the scalar ``c``: 0 where ``c`` is
    a value of the storage format, else its unit roundoff (the kernel may round it)."""
    return 0.0 if bool(representable(np.asarray(c), model.storage)) else model.storage.u


@dataclass(frozen=True)
class TinyCNN:
    """conv2d -> ReLU -> MSE loss and one SGD step, as a tracked reference.

    Parameters
    ----------
    params : mapping
        Validated :class:`~numoracle.oracle.ops.conv2d.Conv2d` parameters
        (see :meth:`for_arrays`).
    lr : float
        Learning rate (a float64; the kernel may use it rounded to the storage format).
    model : PrecisionModel
        The kernel's precision model: every contraction is bounded under it and
        every elementwise operation rounds once in its accumulation format (and
        is stored, where the storage format is narrower).
    """

    params: Mapping[str, Any]
    lr: float
    model: PrecisionModel

    @classmethod
    def for_arrays(cls, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, lr: float,
                   model: PrecisionModel | str = "fp32",
                   conv: Mapping[str, Any] | None = None) -> TinyCNN:
        """The model for these shapes; ``conv`` gives ``stride``, ``padding``,
        ``dilation`` and ``groups`` (defaults 1, 0, 1, 1)."""
        x, weight = np.asarray(x), np.asarray(weight)
        if x.ndim != 4 or weight.ndim != 4:
            raise InvalidArgument(f"x {x.shape} and weight {weight.shape} must be 4-D: "
                                  "(N, C, H, W) and (O, C/groups, kH, kW)")
        conv = dict(conv or {})
        unknown = set(conv) - {"stride", "padding", "dilation", "groups"}
        if unknown:
            raise InvalidArgument(f"conv={conv!r}: unknown keys {sorted(unknown)}; give "
                                  "stride, padding, dilation or groups")
        params = Conv2d().validate({
            "batch": x.shape[0], "in_channels": x.shape[1], "out_channels": weight.shape[0],
            "height": x.shape[2], "width": x.shape[3], "kernel_size": weight.shape[2:],
            "bias": bias is not None, **conv})
        if weight.shape[1] != x.shape[1] // params["groups"]:
            raise InvalidArgument(f"weight {weight.shape} must have C/groups = "
                                  f"{x.shape[1] // params['groups']} input channels for x "
                                  f"{x.shape}")
        if bias is not None and np.shape(bias) != (weight.shape[0],):
            raise InvalidArgument(f"bias {np.shape(bias)} must have shape ({weight.shape[0]},)")
        if not (isinstance(lr, (int, float, np.floating)) and np.isfinite(lr)):
            raise InvalidArgument(f"{lr=} must be a finite float, e.g. lr=0.1")
        return cls(params, float(lr), get_model(model))

    def _keep(self, t: Tracked) -> Tracked:
        """An intermediate as the kernel holds it: stored where the storage
        format is narrower than the accumulation format (one rounding each)."""
        m = self.model
        return t if m.storage.t >= m.accumulate.t else store(t, m)

    def step(self, x: Tracked, target: Tracked, weight: Tracked,
             bias: Tracked | None) -> dict[str, Tracked]:
        """One SGD step from ``weight`` and ``bias``: the tracked ``y`` (before
        the ReLU), ``loss`` (shape ``()``), ``grad_weight``, ``grad_bias``, and the
        updated ``weight`` and ``bias`` (the bias entries only with a bias)."""
        m, p = self.model, self.params
        y = conv2d_tracked(x, weight, bias, p, m, outputs=("y",))["y"]
        d = self._keep(sub(relu(y), target, m))
        numel = int(np.prod(y.shape))
        row = _rearrange(d, lambda v: v.reshape(1, numel))
        col = _rearrange(d, lambda v: v.reshape(numel, 1))
        total = self._keep(matmul(row, col, m))  # sum(d * d): a contraction of d with itself
        loss = store(mul_scalar(total, numel, m, divide=True,
                                c_rel_err=_scalar_err(1.0 / numel, m)), m)
        # dL/drelu = 2 d / numel: one rounding (the kernel may round 2/numel first)
        grad_r = self._keep(mul_scalar(d, numel / 2.0, m, divide=True,
                                       c_rel_err=_scalar_err(2.0 / numel, m)))
        grad_y = relu_mask_mul(grad_r, y)
        want = ("grad_weight", "grad_bias") if bias is not None else ("grad_weight",)
        grads = conv2d_tracked(x, weight, bias, p, m, grad_output=grad_y, outputs=want)
        lr_err = _scalar_err(self.lr, m)
        out = {"y": y, "loss": _rearrange(loss, lambda v: v.reshape(())),
               "grad_weight": grads["grad_weight"],
               "weight": store(sub(weight, self._keep(
                   mul_scalar(grads["grad_weight"], self.lr, m, c_rel_err=lr_err)), m), m)}
        if bias is not None:
            out["grad_bias"] = grads["grad_bias"]
            out["bias"] = store(sub(bias, self._keep(
                mul_scalar(grads["grad_bias"], self.lr, m, c_rel_err=lr_err)), m), m)
        return out

    def with_model(self, model: PrecisionModel) -> TinyCNN:
        """The same network under another precision model (for the diagnosis)."""
        return replace(self, model=model)


def check_trajectory(
    step_fn: StepFn,
    init_weight: np.ndarray,
    init_bias: np.ndarray | None,
    x: np.ndarray,
    target: np.ndarray,
    lr: float,
    steps: int,
    model: PrecisionModel | str = "fp32",
    *,
    conv: Mapping[str, Any] | None = None,
    probabilistic: bool = False,
    diagnose_failure: bool = True,
    free_running: bool = True,
) -> TrajectoryVerdict:
    """Check ``steps`` SGD steps of a kernel with teacher forcing.

    Parameters
    ----------
    step_fn : callable
        The kernel under test: ``step_fn(weight, bias)`` runs one SGD step of
        :class:`TinyCNN` on its own ``x``, ``target`` and ``lr`` and returns a
        mapping with ``y`` (the conv output, before the ReLU, NCHW), ``loss``
        (a scalar), ``grad_weight``, ``grad_bias``, ``weight`` and ``bias`` (the
        updated parameters); NumPy, torch or CuPy arrays. Without a bias,
        ``bias`` is None and the bias entries may be left out. It is handed
        copies of the arrays it returned at the step before.
    init_weight, init_bias : ndarray
        The starting parameters, ``(O, C/groups, kH, kW)`` and ``(O,)`` (or None),
        values of the storage format.
    x, target : ndarray
        The input ``(N, C, H, W)`` and the regression target ``(N, O, Ho, Wo)``
        the kernel uses (values of the storage format).
    lr : float
        The learning rate the kernel uses.
    steps : int
        How many steps to run (at least 1).
    model : PrecisionModel or str
        The precision the kernel claims (``"fp32"`` by default).
    conv : mapping, optional
        ``stride``, ``padding``, ``dilation``, ``groups`` of the convolution.
    probabilistic : bool
        Judge by the probabilistic bound instead of the deterministic one.
    diagnose_failure : bool
        Try the failing tensors of the first failing step under the standard
        precision models (:func:`~numoracle.checking.verdict.diagnose`).
    free_running : bool
        Also run the oracle's own trajectory and report the :class:`Drift`.

    Returns
    -------
    TrajectoryVerdict
        Per step and tensor, the worst ``err / bound``; the first step and
        tensor that broke the bound with its diagnosis; the drift.

    Notes
    -----
    At step ``k`` the oracle takes the kernel's weights and bias after step
    ``k - 1`` as exact inputs and bounds every tensor of step ``k`` by
    composing the primitives of :mod:`numoracle.oracle.tracked` (see the
    module docstring), so an error is charged to the step that made it.
    """
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise InvalidArgument(f"{steps=} must be a positive int, e.g. steps=5")
    claimed = get_model(model)
    w0 = np.asarray(init_weight)
    b0 = None if init_bias is None else np.asarray(init_bias)
    net = TinyCNN.for_arrays(np.asarray(x), w0, b0, lr, claimed, conv)
    xt, tt = exact(host_array(x)), exact(host_array(target))
    names = [n for n in TENSORS if b0 is not None or n not in ("grad_bias", "bias")]
    ref_shapes = {"y": tt.shape, "loss": (), "grad_weight": w0.shape, "weight": w0.shape,
                  "grad_bias": () if b0 is None else b0.shape,
                  "bias": () if b0 is None else b0.shape}
    out_shape = (net.params["batch"], w0.shape[0], *Conv2d._out_hw(net.params))
    if tt.shape != out_shape:
        raise InvalidArgument(f"target {tt.shape} must have the conv output's shape {out_shape}")

    w_cur: Any = w0.copy()
    b_cur: Any = None if b0 is None else b0.copy()
    records: list[StepVerdict] = []
    first: StepFailure | None = None
    final: dict[str, np.ndarray] = {}
    for k in range(1, steps + 1):
        w_in, b_in = host_array(w_cur), None if b_cur is None else host_array(b_cur)
        with np.errstate(all="ignore"):  # IEEE exceptions of a kernel are not failures
            got = step_fn(np.array(w_cur, copy=True),
                          None if b_cur is None else np.array(b_cur, copy=True))
        state = (exact(w_in), None if b_in is None else exact(b_in))
        ref = net.step(xt, tt, *state)
        rec = StepVerdict(k)
        arrays: dict[str, np.ndarray] = {}
        for name in names:
            if name not in got or got[name] is None:
                rec.problems[name] = f"the step returned no {name!r}"
                continue
            arr = host_array(got[name])
            if name == "loss":
                arr = arr.reshape(()) if arr.size == 1 else arr
            if arr.shape != tuple(ref_shapes[name]):
                rec.problems[name] = (f"shape {arr.shape}, expected {tuple(ref_shapes[name])}")
                continue
            arrays[name] = arr
            rec.outputs[name] = compare(name, arr, ref[name], probabilistic=probabilistic)
        records.append(rec)
        if first is None and not rec.passed:
            def reference(m: PrecisionModel, i: tuple[Any, ...] = (xt, tt, *state)
                          ) -> Mapping[str, Tracked]:
                return net.with_model(m).step(*i)
            first = first_failure(rec, names, arrays, claimed,
                                  reference if diagnose_failure else None)
        final = arrays
        if "weight" not in arrays or (b0 is not None and "bias" not in arrays):
            break  # no state to go on from
        w_cur = native_array(got["weight"])
        if b0 is not None:
            b_cur = native_array(got["bias"])

    drift = _drift(net, xt, tt, w0, b0, steps, final) if free_running and final else None
    return TrajectoryVerdict(claimed.name, records, first, drift)


def _drift(net: TinyCNN, xt: Tracked, tt: Tracked, w0: np.ndarray, b0: np.ndarray | None,
           steps: int, final: Mapping[str, np.ndarray]) -> Drift:
    """Run the oracle's own trajectory (float64 values, no teacher forcing)."""
    w, b = host_array(w0), None if b0 is None else host_array(b0)
    loss = float("nan")
    for _ in range(steps):
        ref = net.step(xt, tt, exact(w), None if b is None else exact(b))
        loss = float(ref["loss"].value)
        w = ref["weight"].value
        b = None if b is None else ref["bias"].value

    def gap(name: str, ours: np.ndarray | None) -> float | None:
        if ours is None or name not in final:
            return None
        with np.errstate(invalid="ignore"):
            return float(np.max(np.abs(final[name] - ours), initial=0.0))

    return Drift(steps, gap("weight", w) or 0.0, gap("bias", b),
                 gap("loss", np.asarray(loss)) or 0.0)
