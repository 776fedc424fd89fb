"""CuPy kernels that train the MLP in the fixed design of seed 003.

Phase 1, :data:`ACCUMULATE_SOURCE`: one thread per sample runs the forward
pass, the softmax cross-entropy and the backward pass of its sample and adds
its (unscaled) gradient into zeroed buffers with ``atomicAdd`` (legitimately
nondeterministic: the order of the additions varies). Phase 2,
:data:`UPDATE_SOURCE`: one optimizer update per batch, one thread per
parameter element, dividing the buffers by the batch size (SGD, SGD with
momentum and Nesterov, Adam and AdamW with amsgrad; torch's formulas in
float32, scalars computed in float64 on the host).

``bugs`` (see :mod:`~numoracle.kernels.mlp_numpy` for the names) plants the
zoo's defects on the GPU: ``per_sample_update`` (the update after every
sample), ``not_averaged``, ``buffers_not_zeroed``, ``phase_race`` (the update
launched on a second stream without waiting for the accumulation: a real
race), ``bias_correction_off``, ``eps_in_sqrt``, ``momentum_init_zero``.

The race needs a slow accumulation to show: on small problems the
accumulation kernel takes a few microseconds and mostly finishes before the
update kernel on the other stream starts. So the
accumulation kernel takes ``spin`` (clock cycles): after its forward pass,
sample ``s`` of ``B`` waits ``spin (s + 1) / B`` cycles before adding its
gradient, so the sums build up over ``spin`` cycles. This changes no value:
with the phases ordered (one stream) the slow trainer computes exactly what
the fast one does; it only widens the window in which an unordered update
reads partial sums. ``phase_race`` runs with :data:`RACE_SPIN_CYCLES` unless
``spin_cycles`` says otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..oracle.mlp import PARAMS
from ..oracle.optim_math import OptimConfig
from ..oracle.precision import get_model
from ..targets.backends import get_backend
from ..targets.target import Target
from .mlp_numpy import BUGS, UPDATE_BUGS

__all__ = ["ACCUMULATE_SOURCE", "UPDATE_SOURCE", "RACE_SPIN_CYCLES", "cupy_mlp_step",
           "TARGETS"]

#: clock cycles over which the ``phase_race`` trainer's accumulation spreads its
#: additions (milliseconds on current GPUs), so the update on the other stream reads
#: partial sums
RACE_SPIN_CYCLES = 1 << 22

ACCUMULATE_SOURCE = r"""
extern "C" __global__ void mlp_accumulate(
    const float* __restrict__ x, const int* __restrict__ labels, int B, int I, int H1,
    int H2, int C, const float* w1, const float* b1, const float* w2, const float* b2,
    const float* w3, const float* b3, float* a1, float* a2, float* z, float* d2,
    float* gw1, float* gb1, float* gw2, float* gb2, float* gw3, float* gb3, float* loss,
    long long spin)
{
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= B) return;
    const float* xs = x + (long long)s * I;
    float* A1 = a1 + (long long)s * H1;
    float* A2 = a2 + (long long)s * H2;
    float* Z = z + (long long)s * C;
    float* D2 = d2 + (long long)s * H2;
    for (int j = 0; j < H1; ++j) {
        float acc = b1[j];
        for (int i = 0; i < I; ++i) acc += w1[j * I + i] * xs[i];
        A1[j] = acc;
    }
    for (int j = 0; j < H2; ++j) {
        float acc = b2[j];
        for (int i = 0; i < H1; ++i) acc += w2[j * H1 + i] * fmaxf(A1[i], 0.f);
        A2[j] = acc;
    }
    float mx = __int_as_float(0xff800000);
    for (int j = 0; j < C; ++j) {
        float acc = b3[j];
        for (int i = 0; i < H2; ++i) acc += w3[j * H2 + i] * fmaxf(A2[i], 0.f);
        Z[j] = acc;
        mx = fmaxf(mx, acc);
    }
    int lab = labels[s];
    float sl = Z[lab] - mx, se = 0.f;
    for (int j = 0; j < C; ++j) { float e = expf(Z[j] - mx); Z[j] = e; se += e; }
    loss[s] = logf(se) - sl;
    if (spin > 0) {                        // a slow accumulation: sample s adds its
        long long until = spin * (s + 1) / B;   // gradient (s + 1) / B of the way
        long long t0 = clock64();          // through ``spin`` clock cycles
        while (clock64() - t0 < until) { }
    }
    for (int j = 0; j < C; ++j) {
        float dz = Z[j] / se - (j == lab ? 1.f : 0.f);
        Z[j] = dz;
        atomicAdd(&gb3[j], dz);
        for (int i = 0; i < H2; ++i) atomicAdd(&gw3[j * H2 + i], dz * fmaxf(A2[i], 0.f));
    }
    for (int i = 0; i < H2; ++i) {
        float acc = 0.f;
        for (int j = 0; j < C; ++j) acc += Z[j] * w3[j * H2 + i];
        float d = A2[i] > 0.f ? acc : 0.f;
        D2[i] = d;
        atomicAdd(&gb2[i], d);
        for (int k = 0; k < H1; ++k) atomicAdd(&gw2[i * H1 + k], d * fmaxf(A1[k], 0.f));
    }
    for (int k = 0; k < H1; ++k) {
        float acc = 0.f;
        for (int i = 0; i < H2; ++i) acc += D2[i] * w2[i * H1 + k];
        float d = A1[k] > 0.f ? acc : 0.f;
        atomicAdd(&gb1[k], d);
        for (int i = 0; i < I; ++i) atomicAdd(&gw1[k * I + i], d * xs[i]);
    }
}
"""

UPDATE_SOURCE = r"""
extern "C" __global__ void optim_update(
    float* p, const float* gbuf, float* gout, float* s1, float* s2, float* s3, long long n,
    int mode, int first, int nesterov, int amsgrad, int eps_in_sqrt, float div, float lr,
    float wd, float mu, float damp1, float beta1, float w1, float beta2, float w2,
    float step_size, float bc2s, float bc2, float eps, float decay)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = gbuf[i] / div;
    gout[i] = g;
    float q = p[i];
    if (mode <= 1) {                       // SGD (1: with momentum)
        if (wd != 0.f) g = g + wd * q;
        if (mode == 1) {
            float buf = first ? g : mu * s1[i] + damp1 * g;
            s1[i] = buf;
            g = nesterov ? g + mu * buf : buf;
        }
        p[i] = q - lr * g;
        return;
    }
    if (wd != 0.f) {
        if (mode == 3) q = q * decay; else g = g + wd * q;
    }
    float m = first ? 0.f : s1[i], v = first ? 0.f : s2[i];
    m = m + w1 * (g - m);
    v = beta2 * v + w2 * g * g;
    s1[i] = m;
    s2[i] = v;
    if (amsgrad) { v = fmaxf(first ? 0.f : s3[i], v); s3[i] = v; }
    float denom = eps_in_sqrt ? sqrtf(v / bc2 + eps) : sqrtf(v) / bc2s + eps;
    p[i] = q - step_size * (m / denom);
}
"""

_BLOCK = 128
_CACHE: dict[int, dict[str, Any]] = {}


def _kernels() -> dict[str, Any]:
    import cupy as cp

    dev = cp.cuda.runtime.getDevice()
    if dev not in _CACHE:
        _CACHE[dev] = {
            "acc": cp.RawKernel(ACCUMULATE_SOURCE, "mlp_accumulate"),
            "upd": cp.RawKernel(UPDATE_SOURCE, "optim_update"),
        }
    return _CACHE[dev]


def _update(cfg: OptimConfig, p: Any, gbuf: Any, gout: Any, st: dict[str, Any], t: int,
            div: float, bugs: frozenset[str], stream: Any = None) -> None:
    import cupy as cp

    tc = t + 1 if "bias_correction_off" in bugs else t
    bc1, bc2 = 1.0 - cfg.beta1**tc, 1.0 - cfg.beta2**tc
    mode = (1 if cfg.momentum else 0) if cfg.optimizer == "sgd" else (
        3 if cfg.optimizer == "adamw" else 2)
    first = int(t == 1 and "momentum_init_zero" not in bugs)
    dummy = st.get("_dummy")
    if dummy is None:
        dummy = st["_dummy"] = cp.zeros(1, dtype=cp.float32)
    s1 = st.get("momentum_buffer", st.get("exp_avg", dummy))
    s2 = st.get("exp_avg_sq", dummy)
    s3 = st.get("max_exp_avg_sq", dummy)
    f = np.float32
    args = (p, gbuf, gout, s1, s2, s3, np.int64(p.size), np.int32(mode), np.int32(first),
            np.int32(cfg.nesterov), np.int32(cfg.amsgrad), np.int32("eps_in_sqrt" in bugs),
            f(div), f(cfg.lr), f(cfg.weight_decay), f(cfg.momentum), f(1.0 - cfg.dampening),
            f(cfg.beta1), f(1.0 - cfg.beta1), f(cfg.beta2), f(1.0 - cfg.beta2), f(cfg.lr / bc1),
            f(math.sqrt(bc2)), f(bc2), f(cfg.eps), f(1.0 - cfg.lr * cfg.weight_decay))
    grid = ((p.size + _BLOCK - 1) // _BLOCK,)
    if stream is None:
        _kernels()["upd"](grid, (_BLOCK,), args)
    else:
        _kernels()["upd"](grid, (_BLOCK,), args, stream=stream)


def cupy_mlp_step(cfg: OptimConfig, bugs: Any = (), *, spin_cycles: int | None = None
                  ) -> Callable[..., dict[str, np.ndarray]]:
    """``step(params, state, x, labels, k)``: one two-phase training step on the
    GPU from host float32 arrays (teacher forcing); returns loss, the averaged
    gradients, the parameters and the optimizer state (host arrays).

    ``spin_cycles`` slows the accumulation down (see the module docstring);
    None: :data:`RACE_SPIN_CYCLES` with the ``phase_race`` bug, else 0."""
    import cupy as cp

    from ..errors import InvalidArgument

    bugs = frozenset(bugs)
    unknown = bugs - set(BUGS) - set(UPDATE_BUGS)
    if unknown:
        raise InvalidArgument(f"bugs={sorted(unknown)} are unknown; use {BUGS + UPDATE_BUGS}")
    if spin_cycles is None:
        spin_cycles = RACE_SPIN_CYCLES if "phase_race" in bugs else 0
    if isinstance(spin_cycles, bool) or not isinstance(spin_cycles, (int, np.integer)) \
            or not 0 <= spin_cycles <= 1 << 32:
        raise InvalidArgument(f"{spin_cycles=} must be an int in [0, 2**32] (clock cycles); "
                              f"e.g. spin_cycles={RACE_SPIN_CYCLES}")
    spin = np.int64(spin_cycles)
    kept: dict[str, Any] = {}

    def step(params: Mapping[str, np.ndarray], state: Mapping[str, np.ndarray], x: np.ndarray,
             labels: np.ndarray, k: int) -> dict[str, np.ndarray]:
        dp = {n: cp.asarray(np.asarray(params[n], dtype=np.float32)) for n in PARAMS}
        st = {n: {s: cp.asarray(np.asarray(state[f"{n}.{s}"], dtype=np.float32))
                  for s in cfg.state_names if f"{n}.{s}" in state} for n in PARAMS}
        for n in PARAMS:
            for s in cfg.state_names:
                st[n].setdefault(s, cp.zeros_like(dp[n]))
        xd = cp.asarray(np.asarray(x, dtype=np.float32))
        ld = cp.asarray(np.asarray(labels, dtype=np.int32))
        batch, inp = xd.shape
        h1, h2, c = dp["w1"].shape[0], dp["w2"].shape[0], dp["w3"].shape[0]
        if "buffers_not_zeroed" in bugs and "bufs" in kept:
            bufs = kept["bufs"]
        else:
            bufs = {n: cp.zeros_like(dp[n]) for n in PARAMS}
        kept["bufs"] = bufs
        gout = {n: cp.full(dp[n].shape, cp.nan, dtype=cp.float32) for n in PARAMS}
        loss = cp.full(batch, cp.nan, dtype=cp.float32)

        def accumulate(lo: int, hi: int, stream: Any = None) -> None:
            nb = hi - lo
            scratch = [cp.empty(nb * w, dtype=cp.float32) for w in (h1, h2, c, h2)]
            args = (xd[lo:hi], ld[lo:hi], np.int32(nb), np.int32(inp), np.int32(h1),
                    np.int32(h2), np.int32(c), *(dp[n] for n in PARAMS), *scratch,
                    *(bufs[n] for n in PARAMS), loss[lo:hi], spin)
            grid = ((nb + _BLOCK - 1) // _BLOCK,)
            if stream is None:
                _kernels()["acc"](grid, (_BLOCK,), args)
            else:
                _kernels()["acc"](grid, (_BLOCK,), args, stream=stream)

        div = 1.0 if "not_averaged" in bugs else float(batch)
        if "per_sample_update" in bugs:
            for j in range(batch):
                for n in PARAMS:
                    bufs[n].fill(0)
                accumulate(j, j + 1)
                for n in PARAMS:
                    _update(cfg, dp[n], bufs[n], gout[n], st[n], k, div, bugs)
        elif "phase_race" in bugs:
            s1 = cp.cuda.Stream(non_blocking=True)
            s2 = cp.cuda.Stream(non_blocking=True)
            cp.cuda.Device().synchronize()
            accumulate(0, batch, s1)
            for n in PARAMS:
                _update(cfg, dp[n], bufs[n], gout[n], st[n], k, div, bugs, stream=s2)
            s1.synchronize()
            s2.synchronize()
        else:
            accumulate(0, batch)
            for n in PARAMS:
                _update(cfg, dp[n], bufs[n], gout[n], st[n], k, div, bugs)
        cp.cuda.Device().synchronize()
        out: dict[str, np.ndarray] = {"loss": np.asarray(
            cp.asnumpy(loss).astype(np.float64).sum() / batch, dtype=np.float32)}
        for n in PARAMS:
            out[n] = cp.asnumpy(dp[n])
            out[f"grad_{n}"] = cp.asnumpy(gout[n])
            for s in cfg.state_names:
                out[f"{n}.{s}"] = cp.asnumpy(st[n][s])
        return out
    return step


def _mlp_fn(params: Mapping[str, Any], **inputs: Any) -> dict[str, Any]:
    from .optim_targets import run_mlp_steps

    cfg = OptimConfig.from_params(params)
    host = {k: v.get() if hasattr(v, "get") else np.asarray(v) for k, v in inputs.items()}
    import cupy as cp

    out = run_mlp_steps(cupy_mlp_step(cfg), params, host)
    return {k: cp.asarray(v) for k, v in out.items()}


TARGETS = (Target(name="cupy-fp32", op="mlp_train", backend="cupy", precision=get_model("fp32"),
                  fn=_mlp_fn, layouts=("C",), available=get_backend("cupy").available,
                  description="CuPy two-phase trainer (seed 003 fixed): per-sample gradients "
                              "by atomicAdd, one optimizer update per batch"),)
