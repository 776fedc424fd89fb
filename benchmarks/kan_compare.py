"""The usual gradient checks beside numoracle, on the same correct and broken KAN kernels.

Usage::

    python benchmarks/kan_compare.py OUT_DIR [CASES]

For each case (orders 1-5, batches 1, 7, 16, 64, 128 in turn, 3 -> 4 features,
grid 5, inputs from numoracle's cases: a quarter on, next to or outside the
knots) and each kernel (efficient-kan in torch on the CPU, and the bug zoo's
KAN mutants), three checks:

* **central differences in float32**, as seed 001 ran them: ``L = sum(g * y)``,
  ``(L(v + e) - L(v - e)) / 2e`` with ``e = 1e-3`` for 8 entries each of ``x``
  and ``coef``, passing when ``|num - analytic| <= 1e-2 (1 + |analytic|)``;
* ``torch.autograd.gradcheck`` in float64 (``eps = 1e-6``, ``atol = 1e-5``,
  ``rtol = 1e-3``), the kernel's forward and backward wrapped in an
  ``autograd.Function``, with respect to ``x`` and ``coef``;
* numoracle: :func:`numoracle.checking.check.check_case` on the float32 kernel.

A failure on the correct kernel is a false alarm; a pass on a mutant is a miss.
Writes ``OUT_DIR/kan_compare.json`` and ``kan_compare.md``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from numoracle.cases.case import Case
from numoracle.cases.target import Target
from numoracle.checking.check import check_case
from numoracle.oracle.precision import get_model

BATCHES = (1, 7, 16, 64, 128)
ORDERS = (1, 2, 3, 4, 5)
NAMES = ("x", "grid", "coef", "base_weight", "spline_weight", "grad_output")


def _zoo() -> Any:
    return importlib.import_module("numoracle.zoo.kan")


def _tensors(inputs: dict[str, np.ndarray], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    return {k: torch.tensor(inputs[k], dtype=dtype) for k in NAMES}


def central_differences(fn: Any, inputs: dict[str, np.ndarray], rng: np.random.Generator,
                        eps: float = 1e-3, tol: float = 1e-2, picks: int = 8) -> bool:
    """Seed 001's float32 check on ``grad_input`` and ``grad_coef``."""
    t = _tensors(inputs, torch.float32)
    out = fn(**t)
    g = t["grad_output"]
    for name, grad in (("x", out["grad_input"]), ("coef", out["grad_coef"])):
        flat = t[name].reshape(-1)
        for idx in rng.choice(flat.numel(), size=min(picks, flat.numel()), replace=False):
            vals = []
            for s in (1.0, -1.0):
                pert = dict(t)
                p = flat.clone()
                p[idx] += s * eps
                pert[name] = p.reshape(t[name].shape)
                vals.append(float((fn(**pert)["y"] * g).sum()))
            num = (vals[0] - vals[1]) / (2 * eps)
            ana = float(grad.reshape(-1)[idx])
            if not abs(num - ana) <= tol * (1 + abs(ana)):
                return False
    return True


def gradcheck(fn: Any, inputs: dict[str, np.ndarray]) -> bool:
    """``torch.autograd.gradcheck`` in float64 on the kernel's own forward and backward."""
    t = _tensors(inputs, torch.float64)

    class KernelFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, coef: Any) -> Any:
            ctx.save_for_backward(x, coef)
            return fn(**{**t, "x": x.detach(), "coef": coef.detach()})["y"]

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            x, coef = ctx.saved_tensors
            out = fn(**{**t, "x": x, "coef": coef, "grad_output": g})
            return out["grad_input"], out["grad_coef"]

    x = t["x"].clone().requires_grad_(True)
    coef = t["coef"].clone().requires_grad_(True)
    try:
        return bool(torch.autograd.gradcheck(KernelFn.apply, (x, coef), eps=1e-6, atol=1e-5,
                                             rtol=1e-3, raise_exception=False))
    except Exception:  # noqa: BLE001 - a raising check is a failing check
        return False


def main(argv: list[str]) -> int:
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    n_cases = int(argv[2]) if len(argv) > 2 else 100
    zoo = _zoo()
    kernels = {"correct": zoo.correct, **zoo.MUTANTS}
    rng = np.random.default_rng(0)
    rows: dict[str, dict[str, Any]] = {
        k: {m: {"fail": 0, "first_fail": None} for m in ("cd32", "gradcheck", "numoracle")}
        for k in kernels}
    t0 = time.time()
    for i in range(n_cases):
        params = {"batch": BATCHES[i % len(BATCHES)], "in_features": 3, "out_features": 4,
                  "grid_size": 5, "spline_order": ORDERS[(i // len(BATCHES)) % len(ORDERS)]}
        case = Case("kan", params, storage="fp32", family="normal", seed=i)
        inputs = case.inputs()
        truth = {k: v.numpy() for k, v in zoo.correct(**_tensors(inputs, torch.float64)).items()}
        for name, fn in kernels.items():
            if name == "kan_coef_grad_not_reset":
                # every call after the first adds earlier calls' coefficient gradients:
                # each check below runs after earlier calls, so a case shows the bug
                # wherever its coefficient gradient is not all zero
                bug = bool(np.any(truth["grad_coef"] != 0))
            else:
                got = {k: v.numpy() for k, v in fn(**_tensors(inputs, torch.float64)).items()}
                bug = any(np.any(np.abs(got[k] - truth[k]) > 1e-6 * (1 + np.abs(truth[k])))
                          for k in truth)
            target = Target(name=name, op="kan", backend="torch-cpu",
                            precision=get_model("fp32"), fn=fn)
            results = {"cd32": central_differences(fn, inputs, rng),
                       "gradcheck": gradcheck(fn, inputs),
                       "numoracle": check_case(case, target).passed}
            rows[name]["bug_cases"] = rows[name].get("bug_cases", 0) + int(bug)
            for method, passed in results.items():
                r = rows[name][method]
                r["alarm"] = r.get("alarm", 0) + int(not passed and not bug)
                r["miss"] = r.get("miss", 0) + int(passed and bug)
                if not passed:
                    r["fail"] += 1
                    if r["first_fail"] is None:
                        r["first_fail"] = i + 1
    lines = [f"{n_cases} cases per kernel (orders 1-5, batches 1/7/16/64/128). A case "
             "shows the bug when the kernel's float64 outputs differ from efficient-kan's "
             "(relative 1e-6); a failure on a case without the bug is a false alarm, a pass "
             "on a case with it a miss. Cells: false alarms / misses (first failing case).",
             "", "| kernel | cases with the bug | float32 central differences | "
             "gradcheck (float64) | numoracle |", "|---|---|---|---|---|"]
    for name, r in rows.items():
        cells = []
        for m in ("cd32", "gradcheck", "numoracle"):
            first = r[m]["first_fail"] or "-"
            cells.append(f"{r[m].get('alarm', 0)} / {r[m].get('miss', 0)} ({first})")
        lines.append(f"| {name} | {r.get('bug_cases', 0)} | " + " | ".join(cells) + " |")
    (out / "kan_compare.json").write_text(json.dumps({"cases": n_cases, "rows": rows,
                                                      "seconds": time.time() - t0}, indent=1))
    (out / "kan_compare.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"{time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
