"""Mutants of the optimizers (op ``optim``) and of the MLP training step (op ``mlp_train``).

Optimizer defects, planted in the float32 update of
:func:`numoracle.kernels.mlp_numpy.update` (run over every step of a case):

* ``bias_correction_off``: Adam's bias corrections use step ``t + 1``;
* ``eps_in_sqrt``: ``sqrt(v_hat + eps)`` instead of ``sqrt(v_hat) + eps``;
* ``momentum_init_zero``: SGD's momentum buffer starts at 0, so the first step
  damps the gradient (torch skips dampening on the first step).

Training-step defects, planted in the two-phase trainer of seed 003
(:class:`numoracle.kernels.mlp_numpy.Trainer`):

* ``per_sample_update``: the optimizer runs once per sample (the seed's bug);
* ``grad_not_divided_by_batch``: the summed gradient is not divided by the batch size;
* ``grad_buffers_not_zeroed``: the buffers keep the previous batch's sum;
* ``update_before_accumulation``: the update reads the buffers when half of the
  batch has been added (a race between the phases, made deterministic here;
  :mod:`numoracle.kernels.cupy_mlp` has the real one on the GPU).

``STEP_MUTANTS`` gives, for the teacher-forced check, the step at which each
must first fail (``numoracle.trajectory.steps``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np

from numoracle.targets.target import Target
from numoracle.kernels.mlp_numpy import update
from numoracle.kernels.optim_targets import _numpy_mlp_fn
from numoracle.oracle.optim_math import OptimConfig
from numoracle.oracle.precision import get_model


def _optim(param0: np.ndarray, grads: np.ndarray, params: Mapping[str, Any],
           bugs: frozenset[str] = frozenset()) -> dict[str, np.ndarray]:
    cfg = OptimConfig.from_params(params)
    p = np.asarray(param0, dtype=np.float32)
    state: dict[str, np.ndarray] = {}
    rows: dict[str, list[np.ndarray]] = {n: [] for n in ("param",) + cfg.state_names}
    for k in range(grads.shape[0]):
        p = update(cfg, p, np.asarray(grads[k]), state, k + 1, bugs)
        rows["param"].append(p)
        for n in cfg.state_names:
            rows[n].append(state[n].copy())
    return {n: np.stack(v) for n, v in rows.items()}


_OPTIM_BUGS = {"bias_correction_off": "bias_correction_off", "eps_in_sqrt": "eps_in_sqrt",
               "momentum_init_zero": "momentum_init_zero"}
_STEP_BUGS = {"per_sample_update": "per_sample_update",
              "grad_not_divided_by_batch": "not_averaged",
              "grad_buffers_not_zeroed": "buffers_not_zeroed",
              "update_before_accumulation": "phase_race"}

TARGETS: list[Target] = [
    Target(name=name, op="optim", backend="numpy", precision=get_model("fp32"),
           fn=partial(_optim, bugs=frozenset([bug])), layouts=("C",),
           source=__name__, description=f"float32 optimizer update with {bug}")
    for name, bug in _OPTIM_BUGS.items()
] + [
    Target(name=name, op="mlp_train", backend="numpy", precision=get_model("fp32"),
           fn=partial(_numpy_mlp_fn, bugs=(bug,)), layouts=("C",), source=__name__,
           description=f"two-phase trainer with {bug}")
    for name, bug in _STEP_BUGS.items()
]

#: mutant -> (optimizer config it shows under, trainer/update defect, first failing step)
STEP_MUTANTS: dict[str, tuple[OptimConfig, str, int]] = {
    "bias_correction_off": (OptimConfig("adam", lr=0.01), "bias_correction_off", 1),
    "eps_in_sqrt": (OptimConfig("adam", lr=0.01, eps=1e-3), "eps_in_sqrt", 1),
    "momentum_init_zero": (OptimConfig("sgd", lr=0.1, momentum=0.9, dampening=0.1),
                           "momentum_init_zero", 1),
    "per_sample_update": (OptimConfig("adam", lr=0.01), "per_sample_update", 1),
    "grad_not_divided_by_batch": (OptimConfig("sgd", lr=0.1), "not_averaged", 1),
    "grad_buffers_not_zeroed": (OptimConfig("sgd", lr=0.1), "buffers_not_zeroed", 2),
    "update_before_accumulation": (OptimConfig("sgd", lr=0.1, momentum=0.9), "phase_race", 1),
}


def _cupy_mlp(params: Mapping[str, Any], bugs: tuple[str, ...] = (), **inputs: Any
              ) -> dict[str, Any]:
    import cupy as cp  # noqa: PLC0415 - only where a GPU is

    from numoracle.kernels.cupy_mlp import cupy_mlp_step  # noqa: PLC0415
    from numoracle.kernels.optim_targets import run_mlp_steps  # noqa: PLC0415

    host = {k: v.get() if hasattr(v, "get") else np.asarray(v) for k, v in inputs.items()}
    out = run_mlp_steps(cupy_mlp_step(OptimConfig.from_params(params), bugs), params, host)
    return {k: cp.asarray(v) for k, v in out.items()}


def _cupy_available() -> str | None:
    from numoracle.targets import get_backend  # noqa: PLC0415

    return get_backend("cupy").available()


#: the training-step defects in the CuPy kernels (GPU only; skipped elsewhere)
TARGETS += [
    Target(name=f"cupy_{name}", op="mlp_train", backend="cupy", precision=get_model("fp32"),
           fn=partial(_cupy_mlp, bugs=(bug,)), layouts=("C",), source=__name__,
           available=_cupy_available, description=f"CuPy two-phase trainer with {bug}")
    for name, bug in _STEP_BUGS.items()
]
