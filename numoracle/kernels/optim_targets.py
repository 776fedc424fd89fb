"""Targets of ``optim`` and ``mlp_train``: ``torch.optim`` (for-loop, foreach and
fused implementations, CPU and CUDA), torch MLP training, and the host
float32 two-phase trainer of :mod:`~numoracle.kernels.mlp_numpy`.

Each comes in two shapes: a runner target (``fn(**inputs, params)``, all
steps at once, one optimizer object kept across them) and a step function
for the teacher-forced checks of :mod:`numoracle.trajectory.steps`
(:func:`torch_optimizer_step`, :func:`torch_mlp_step`, :func:`numpy_mlp_step`),
which loads the optimizer state it is handed before each step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np

from ..oracle.mlp import PARAMS
from ..oracle.ops.mlp_train import SIZE_NAMES
from ..oracle.optim_math import OptimConfig
from ..oracle.precision import get_model
from ..targets.backends import get_backend
from ..targets.target import Target
from .mlp_numpy import Trainer

__all__ = ["IMPLS", "torch_optimizer", "torch_optimizer_step", "torch_mlp_step",
           "numpy_mlp_step", "TARGETS"]

#: torch.optim implementations: the per-tensor loop, foreach (multi-tensor) and fused
IMPLS = ("for", "foreach", "fused")
FP32 = get_model("fp32")


def _np(a: Any) -> np.ndarray:
    if hasattr(a, "detach"):
        return np.asarray(a.detach().cpu().numpy())
    return np.asarray(a)


def torch_optimizer(cfg: OptimConfig, tensors: list[Any], impl: str) -> Any:
    """The ``torch.optim`` optimizer of ``cfg`` over ``tensors``, implementation ``impl``."""
    import torch

    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
    kw = cfg.torch_kwargs()
    kw.update(foreach=impl == "foreach", fused=impl == "fused")
    return cls[cfg.optimizer](tensors, **kw)


def _load_state(opt: Any, p: Any, cfg: OptimConfig, state: Mapping[str, Any], step: int,
                impl: str) -> None:
    """Put the state after step ``step - 1`` into ``opt`` for parameter ``p``."""
    import torch

    if step == 1:
        return
    st: dict[str, Any] = {n: torch.as_tensor(np.asarray(state[n], dtype=np.float32),
                                             device=p.device).clone()
                          for n in cfg.state_names}
    if cfg.optimizer != "sgd":
        dev = p.device if impl == "fused" else "cpu"
        st["step"] = torch.tensor(float(step - 1), dtype=torch.float32, device=dev)
    opt.state[p] = st


def _read_state(opt: Any, p: Any, cfg: OptimConfig) -> dict[str, np.ndarray]:
    st = opt.state[p]
    return {n: _np(st[n]).copy() for n in cfg.state_names}


def torch_optimizer_step(cfg: OptimConfig, device: str = "cpu", impl: str = "for"
                         ) -> Callable[..., dict[str, np.ndarray]]:
    """``step(param, grad, state, step) -> {"param", *state}``: one ``torch.optim``
    step from the given parameter and state (float32), for teacher forcing."""
    import torch

    def step(param: np.ndarray, grad: np.ndarray, state: Mapping[str, np.ndarray],
             k: int) -> dict[str, np.ndarray]:
        p = torch.nn.Parameter(torch.as_tensor(np.asarray(param, dtype=np.float32),
                                               device=device).clone())
        opt = torch_optimizer(cfg, [p], impl)
        _load_state(opt, p, cfg, state, k, impl)
        p.grad = torch.as_tensor(np.asarray(grad, dtype=np.float32), device=device).clone()
        opt.step()
        return {"param": _np(p).copy(), **_read_state(opt, p, cfg)}
    return step


def _optim_fn(param0: Any, grads: Any, params: Mapping[str, Any], *, impl: str) -> dict[str, Any]:
    import torch

    cfg = OptimConfig.from_params(params)
    p = torch.nn.Parameter(param0.detach().clone())
    opt = torch_optimizer(cfg, [p], impl)
    rows: dict[str, list[Any]] = {n: [] for n in ("param",) + cfg.state_names}
    for k in range(grads.shape[0]):
        p.grad = grads[k].detach().clone()
        opt.step()
        rows["param"].append(p.detach().clone())
        for n in cfg.state_names:
            rows[n].append(opt.state[p][n].detach().clone())
    return {n: torch.stack(v) for n, v in rows.items()}


# -- the MLP ---------------------------------------------------------------------------------
def _torch_mlp_grads(tp: Mapping[str, Any], x: Any, labels: Any) -> Any:
    import torch
    import torch.nn.functional as F

    with torch.enable_grad():
        h = F.relu(F.linear(x, tp["w1"], tp["b1"]))
        h = F.relu(F.linear(h, tp["w2"], tp["b2"]))
        loss = F.cross_entropy(F.linear(h, tp["w3"], tp["b3"]), labels)
        loss.backward()
    return loss


def torch_mlp_step(cfg: OptimConfig, device: str = "cpu", impl: str = "for"
                   ) -> Callable[..., dict[str, np.ndarray]]:
    """``step(params, state, x, labels, k)``: one torch training step of the MLP
    (autograd, ``F.cross_entropy``, ``torch.optim``) from the given parameters
    and state, for teacher forcing; returns loss, gradients, parameters, state."""
    import torch

    def step(params: Mapping[str, np.ndarray], state: Mapping[str, np.ndarray], x: np.ndarray,
             labels: np.ndarray, k: int) -> dict[str, np.ndarray]:
        tp = {n: torch.nn.Parameter(torch.as_tensor(np.asarray(params[n], dtype=np.float32),
                                                    device=device).clone()) for n in PARAMS}
        opt = torch_optimizer(cfg, [tp[n] for n in PARAMS], impl)
        for n in PARAMS:
            _load_state(opt, tp[n], cfg, {s: state[f"{n}.{s}"] for s in cfg.state_names
                                          if f"{n}.{s}" in state}, k, impl)
        loss = _torch_mlp_grads(tp, torch.as_tensor(np.asarray(x, dtype=np.float32),
                                                    device=device),
                                torch.as_tensor(np.asarray(labels), device=device))
        out = {"loss": _np(loss).copy()}
        out.update({f"grad_{n}": _np(tp[n].grad).copy() for n in PARAMS})
        opt.step()
        for n in PARAMS:
            out[n] = _np(tp[n]).copy()
            out.update({f"{n}.{s}": v for s, v in _read_state(opt, tp[n], cfg).items()})
        return out
    return step


def _mlp_fn(params: Mapping[str, Any], *, impl: str, **inputs: Any) -> dict[str, Any]:
    import torch

    cfg = OptimConfig.from_params(params)
    tp = {n: torch.nn.Parameter(inputs[n].detach().clone()) for n in PARAMS}
    opt = torch_optimizer(cfg, [tp[n] for n in PARAMS], impl)
    labels = torch.argmax(inputs["labels"], dim=-1)
    rows: dict[str, list[Any]] = {n: [] for n in ("loss",) + PARAMS}
    for k in range(inputs["x"].shape[0]):
        opt.zero_grad(set_to_none=True)
        rows["loss"].append(_torch_mlp_grads(tp, inputs["x"][k], labels[k]).detach())
        opt.step()
        for n in PARAMS:
            rows[n].append(tp[n].detach().clone())
    return {n: torch.stack(v) for n, v in rows.items()}


def numpy_mlp_step(cfg: OptimConfig, bugs: Any = ()) -> Callable[..., dict[str, np.ndarray]]:
    """``step(params, state, x, labels, k)`` of the host two-phase trainer
    (:class:`~numoracle.kernels.mlp_numpy.Trainer`, its buffers kept across calls)."""
    trainer = Trainer(cfg, bugs)

    def step(params: Mapping[str, np.ndarray], state: Mapping[str, np.ndarray], x: np.ndarray,
             labels: np.ndarray, k: int) -> dict[str, np.ndarray]:
        return trainer.step(params, state, x, labels, k)
    return step


def run_mlp_steps(step: Callable[..., Mapping[str, Any]], params: Mapping[str, Any],
                  inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The ``mlp_train`` outputs of a step function run over every step of a case."""
    host = {k: _np(v).astype(np.float32) for k, v in inputs.items()}
    labels = np.argmax(host["labels"], axis=-1)
    cur: dict[str, Any] = {n: host[n] for n in PARAMS}
    rows: dict[str, list[np.ndarray]] = {n: [] for n in ("loss",) + PARAMS}
    for k in range(int(params["steps"])):
        out = step(cur, cur, host["x"][k], labels[k], k + 1)
        for n in rows:
            rows[n].append(np.asarray(_np(out[n]), dtype=np.float32).reshape(
                () if n == "loss" else host[n].shape))
        cur = {n: v for n, v in out.items() if n in PARAMS or "." in n}
    return {n: np.stack(v) for n, v in rows.items()}


def _numpy_mlp_fn(params: Mapping[str, Any], bugs: Any = (), **inputs: Any) -> dict[str, Any]:
    return run_mlp_steps(numpy_mlp_step(OptimConfig.from_params(params), bugs), params, inputs)


def mlp_sizes(params: Mapping[str, Any]) -> tuple[int, ...]:
    """``(in_features, hidden1, hidden2, classes)`` of an ``mlp_train`` case."""
    return tuple(int(params[k]) for k in SIZE_NAMES)


def _targets() -> tuple[Target, ...]:
    out = []
    for dev in ("cpu", "cuda"):
        backend = get_backend(f"torch-{dev}")
        for impl in IMPLS:
            suffix = "" if impl == "for" else f"-{impl}"
            out.append(Target(
                name=f"torch-{dev}-fp32{suffix}", op="optim", backend=f"torch-{dev}",
                precision=FP32, fn=partial(_optim_fn, impl=impl), layouts=("C",),
                available=backend.available,
                description=f"torch.optim ({impl} implementation) on the {dev.upper()}"))
        out.append(Target(
            name=f"torch-{dev}-fp32", op="mlp_train", backend=f"torch-{dev}", precision=FP32,
            fn=partial(_mlp_fn, impl="for"), layouts=("C",), available=backend.available,
            description=f"torch MLP step (autograd, cross_entropy, torch.optim) on the "
                        f"{dev.upper()}"))
    out.append(Target(
        name="numpy-fp32", op="mlp_train", backend="numpy", precision=FP32,
        fn=_numpy_mlp_fn, layouts=("C",),
        description="host float32 two-phase trainer: per-sample gradients summed, one "
                    "update per batch"))
    return tuple(out)


TARGETS = _targets()
