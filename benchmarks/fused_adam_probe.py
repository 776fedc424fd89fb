"""What torch's fused CUDA Adam/AdamW computes: effective scalars and bit-exact formulas.

    python benchmarks/fused_adam_probe.py [--out FILE.json] [--cases 200]

For random problems (Adam and AdamW, weight decay 0 or 0.01, lr 0.1/0.01/0.001,
eps 1e-8/1e-3, amsgrad on and off) one step of ``torch.optim`` with
``fused=True`` and with ``foreach=True`` runs on the GPU from the same float32
parameter and gradient, and then a second step from the first's state. For
each implementation and tensor (``exp_avg``, ``exp_avg_sq``, ``param``) the
probe reports

* the largest relative error against the float64 evaluation of torch's
  formula, in units of u = 2^-24;
* the share of elements that each candidate float32 emulation reproduces bit
  for bit: scalars (``1 - beta``, ``lr / bc1``, ...) in float64 and rounded once
  at the end, or rounded to float32 first, with and without fused multiply-adds;
* the median of ``exp_avg / g`` and ``exp_avg_sq / g^2`` after step 1 (no
  L2 decay): the ``1 - beta`` the kernel really used (0.1 and 0.001 exactly,
  or computed from float32 betas: 0.100000024 and 0.00099998713);
* the teacher-forced verdict of :func:`numoracle.trajectory.check_optimizer_trajectory`
  (fp32 claim) on 3-step trajectories, worst ratio and first failing tensor.

``--device cpu`` probes torch's fused CPU kernel the same way.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

F32 = np.float32
U = 2.0**-24


def _f(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).astype(F32).astype(np.float64)


def _run(cfg: Any, p0: np.ndarray, grads: list[np.ndarray], impl: str, device: str
         ) -> list[dict[str, np.ndarray]]:
    import torch  # noqa: PLC0415 - the probe needs torch, the module docstring does not

    from numoracle.kernels.optim_targets import torch_optimizer  # noqa: PLC0415

    p = torch.nn.Parameter(torch.as_tensor(p0, device=device).clone())
    opt = torch_optimizer(cfg, [p], impl)
    out = []
    for g in grads:
        p.grad = torch.as_tensor(g, device=device).clone()
        opt.step()
        st = opt.state[p]
        out.append({"param": p.detach().cpu().numpy().astype(np.float64),
                    "exp_avg": st["exp_avg"].cpu().numpy().astype(np.float64),
                    "exp_avg_sq": st["exp_avg_sq"].cpu().numpy().astype(np.float64)})
    return out


def _candidates(cfg: Any, p: np.ndarray, g: np.ndarray, m0: np.ndarray, v0: np.ndarray
                ) -> dict[str, dict[str, np.ndarray]]:
    """Step-1-style moment updates under several evaluation strategies (float64 in,
    float32 rounding emulated)."""
    b1, b2, wd = cfg.beta1, cfg.beta2, cfg.weight_decay
    out: dict[str, dict[str, np.ndarray]] = {}
    exact_scalars, f32_scalars = (lambda c: c), (lambda c: float(F32(c)))
    for name, scal in (("double scalars", exact_scalars), ("float32 scalars", f32_scalars)):
        gg = g if not (wd and cfg.optimizer == "adam") else _f(g + p * scal(wd))
        w1 = 1.0 - scal(b1) if name == "double scalars" else float(F32(1.0) - F32(b1))
        w2 = 1.0 - scal(b2) if name == "double scalars" else float(F32(1.0) - F32(b2))
        # one rounding of the whole expression (double evaluation)
        out[f"{name}, one rounding"] = {
            "exp_avg": _f(scal(b1) * m0 + w1 * gg),
            "exp_avg_sq": _f(scal(b2) * v0 + w2 * gg * gg)}
        # float32 operations, each rounded
        out[f"{name}, float32 ops"] = {
            "exp_avg": _f(_f(scal(b1) * m0) + _f(w1 * gg)),
            "exp_avg_sq": _f(_f(scal(b2) * v0) + _f(_f(w2 * gg) * gg))}
        # lerp (torch's m.lerp_(g, 1 - b1)) in float32
        out[f"{name}, lerp"] = {
            "exp_avg": _f(m0 + _f(w1 * _f(gg - m0))),
            "exp_avg_sq": _f(_f(scal(b2) * v0) + _f(w2 * _f(gg * gg)))}
    return out


def _exact(cfg: Any, p: np.ndarray, g: np.ndarray, m0: np.ndarray, v0: np.ndarray
           ) -> dict[str, np.ndarray]:
    gg = g + cfg.weight_decay * p if cfg.optimizer == "adam" else g
    return {"exp_avg": cfg.beta1 * m0 + (1 - cfg.beta1) * gg,
            "exp_avg_sq": cfg.beta2 * v0 + (1 - cfg.beta2) * gg * gg}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    args = ap.parse_args()
    import torch  # noqa: PLC0415

    from numoracle.kernels.optim_targets import torch_optimizer_step  # noqa: PLC0415
    from numoracle.oracle.optim_math import OptimConfig  # noqa: PLC0415
    from numoracle.trajectory import check_optimizer_trajectory  # noqa: PLC0415

    rng = np.random.default_rng(0)
    device = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    stats: dict[str, Any] = {"device": device, "torch": torch.__version__,
                             "max_rel_err_u": {}, "bit_exact_share": {}, "verdicts": {},
                             "effective_weight": {}}
    for _ in range(args.cases):
        opt = str(rng.choice(["adam", "adamw"]))
        cfg = OptimConfig(opt, lr=float(rng.choice([0.1, 0.01, 0.001])),
                          weight_decay=float(rng.choice([0.0, 0.01])),
                          eps=float(rng.choice([1e-8, 1e-3])), amsgrad=bool(rng.integers(2)))
        n = int(rng.integers(1, 300))
        p0 = rng.standard_normal(n).astype(F32)
        grads = [(rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 1)).astype(F32)
                 for _ in range(3)]
        key = f"{opt} wd={cfg.weight_decay}"
        for impl in ("fused", "foreach"):
            runs = _run(cfg, p0, grads[:2], impl, args.device)
            for k, (prev, now) in enumerate(zip([None] + runs[:-1], runs, strict=True)):
                p = p0.astype(np.float64) if prev is None else prev["param"]
                m0 = np.zeros(n) if prev is None else prev["exp_avg"]
                v0 = np.zeros(n) if prev is None else prev["exp_avg_sq"]
                g = grads[k].astype(np.float64)
                if opt == "adamw" and cfg.weight_decay:
                    p = _f(p * (1 - cfg.lr * cfg.weight_decay))
                ex = _exact(cfg, p, g, m0, v0)
                if k == 0 and not (opt == "adam" and cfg.weight_decay):
                    nz = g != 0
                    for t, den in (("exp_avg", g), ("exp_avg_sq", g * g)):
                        w = now[t][nz] / den[nz]
                        ek = f"{impl} {t}"
                        lo, hi = stats["effective_weight"].get(ek, (np.inf, -np.inf))
                        stats["effective_weight"][ek] = (min(lo, float(np.median(w))),
                                                         max(hi, float(np.median(w))))
                for t in ("exp_avg", "exp_avg_sq"):
                    with np.errstate(all="ignore"):
                        rel = np.abs(now[t] - ex[t]) / np.maximum(np.abs(ex[t]), 1e-30) / U
                    kk = f"{impl} {key} step{k + 1} {t}"
                    stats["max_rel_err_u"][kk] = max(stats["max_rel_err_u"].get(kk, 0.0),
                                                     float(np.max(rel)))
                    for cname, cand in _candidates(cfg, p, g, m0, v0).items():
                        ck = f"{impl} {t}: {cname}"
                        hit = float(np.mean(cand[t] == now[t]))
                        s = stats["bit_exact_share"].setdefault(ck, [0.0, 0])
                        s[0] += hit
                        s[1] += 1
            v = check_optimizer_trajectory(torch_optimizer_step(cfg, args.device, impl), cfg, p0,
                                           np.stack(grads))
            ff = v.first_failure
            vk = f"{impl} {key} amsgrad={cfg.amsgrad}"
            agg = stats["verdicts"].setdefault(vk, {"runs": 0, "failed": 0, "worst": 0.0,
                                                    "first": {}})
            agg["runs"] += 1
            agg["failed"] += int(not v.passed)
            agg["worst"] = max(agg["worst"], float(v.worst_ratio))
            if ff is not None:
                fk = f"step {ff.step} {ff.tensor}"
                agg["first"][fk] = agg["first"].get(fk, 0) + 1
    stats["bit_exact_share"] = {k: round(a / b, 4) for k, (a, b) in
                                sorted(stats["bit_exact_share"].items())}
    text = json.dumps(stats, indent=1, sort_keys=True)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
