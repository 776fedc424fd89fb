"""What numoracle says about five kernels whose cause of failure is known.

Each kernel claims fp32 and breaks it in one known way:

* ``fp16_accumulation``: a linear layer whose partial sums live in fp16;
* ``fp16_inputs``: a linear layer that rounds its inputs to fp16, fp32 accumulation;
* ``tf32_inputs``: a linear layer that rounds its inputs to TF32 (round to nearest);
* ``ulp_noise``: a correct linear layer whose outputs get random +-1-ulp noise on every call;
* ``kan_upper_edge``: efficient-kan's KAN layer whose cell index is one too small at
  and beyond the grid's upper edge;
* ``mixed_logic``: a linear layer whose ``y`` rounds its inputs to fp16 (what a
  coarser precision explains) and whose ``grad_weight`` has a logic bug (one
  element off by 1) in batches of 2 or more: the failure is a logic bug, and must
  shrink to a case that still shows it.

For each: a drawn run (:func:`numoracle.running.runner.run_target`, ``diagnose=True``,
shrinking on, a fresh store) gives the headline diagnosis, ``effective()``, the
stored repro's signature class and its shrunk shape; and one fixed 16x512 linear
case (:func:`numoracle.checking.check.check_case`) gives the worst ratio under every
candidate model, then the cases that tell the candidates apart
(:func:`numoracle.checking.discriminate.discriminate`).

    python -m benchmarks diagnoses [--examples 60] [--only NAME ...]
                                   [--out benchmarks/results/cpu/verdicts] [--label NAME]

Writes ``DIR/diagnoses-LABEL.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

import numoracle.kernels.torch_kan as host
from benchmarks.record import meta, write_json
from numoracle.cases.case import Case
from numoracle.targets.target import Target
from numoracle.checking.check import check_case
from numoracle.checking.discriminate import discriminate
from numoracle.kernels.torch_targets import TorchMode, precision_flags
from numoracle.oracle.formats import quantize
from numoracle.oracle.precision import get_model
from numoracle.running.runner import run_target
from numoracle.store.store import entries

__all__ = ["add_parser", "run", "KERNELS"]


def _linear(x: np.ndarray, weight: np.ndarray, grad_output: np.ndarray,
            bias: np.ndarray | None, mm: Any) -> dict[str, np.ndarray]:
    y = mm(x, weight.T)
    if bias is not None:
        y = (y + bias).astype(np.float32)
    out = {"y": y, "grad_input": mm(grad_output, weight), "grad_weight": mm(grad_output.T, x)}
    if bias is not None:
        out["grad_bias"] = grad_output.sum(axis=0, dtype=np.float32)
    return out


def _mm32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


def _mm_acc16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Products in fp32, each partial sum rounded to fp16, sequentially."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float16)
    for i in range(a.shape[1]):
        acc = (acc.astype(np.float32)
               + np.outer(a[:, i], b[i, :]).astype(np.float32)).astype(np.float16)
    return acc.astype(np.float32)


def fp16_accumulation(x, weight, grad_output, bias=None):
    """Partial sums in fp16 although fp32 accumulation is claimed."""
    return _linear(x, weight, grad_output, bias, _mm_acc16)


def _round_inputs(fmt: str):
    def mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        qa = quantize(np.asarray(a, np.float64), fmt)
        qb = quantize(np.asarray(b, np.float64), fmt)
        return (qa @ qb).astype(np.float32)
    return mm


def fp16_inputs(x, weight, grad_output, bias=None):
    """Inputs rounded to fp16 before the multiply, fp32 accumulation."""
    return _linear(x, weight, grad_output, bias, _round_inputs("fp16"))


def tf32_inputs(x, weight, grad_output, bias=None):
    """Inputs rounded to TF32 (nearest) before the multiply, fp32 accumulation."""
    return _linear(x, weight, grad_output, bias, _round_inputs("tf32"))


_NOISE = np.random.default_rng(12345)


def ulp_noise(x, weight, grad_output, bias=None):
    """A correct result with random +-1 ulp on every element, new on every call."""
    out = _linear(x, weight, grad_output, bias, _mm32)
    for k, v in out.items():
        step = _NOISE.integers(-1, 2, size=v.shape)
        out[k] = np.where(step > 0, np.nextafter(v, np.float32(np.inf)),
                          np.where(step < 0, np.nextafter(v, np.float32(-np.inf)), v)
                          ).astype(np.float32)
    return out


def kan_upper_edge(x, grid, coef, base_weight, spline_weight, grad_output):
    """efficient-kan's layer with the cell index one too small at and beyond the
    grid's upper edge: the last interior piece is extrapolated over the extension."""
    k = int(grid.shape[1] - coef.shape[2] - 1)
    g_int = grid.shape[1] - 2 * k - 1
    edge = grid[:, k + g_int]

    def bases(xx: Any, gg: Any, order: int) -> Any:
        xe = xx.unsqueeze(-1)
        b = ((xe >= gg[:, :-1]) & (xe < gg[:, 1:])).to(xx.dtype)
        moved = torch.zeros_like(b)
        moved[..., k + g_int - 1] = 1.0
        b = torch.where(((xx >= edge) & (xx < gg[:, -1])).unsqueeze(-1), moved, b)
        for p in range(1, order + 1):
            b = ((xe - gg[:, :-(p + 1)]) / (gg[:, p:-1] - gg[:, :-(p + 1)]) * b[:, :, :-1]
                 + (gg[:, p + 1:] - xe) / (gg[:, p + 1:] - gg[:, 1:-p]) * b[:, :, 1:])
        return b

    saved, host.b_splines = host.b_splines, bases
    try:
        with precision_flags(TorchMode("cpu", "fp32")):
            return host.kan_forward_backward(x, grid, coef, base_weight, spline_weight,
                                             grad_output)
    finally:
        host.b_splines = saved


def mixed_logic(x, weight, grad_output, bias=None):
    """y from fp16-rounded inputs; grad_weight[0, 0] off by 1 from a batch of 2 on."""
    out = _linear(x, weight, grad_output, bias, _mm32)
    out["y"] = _linear(x, weight, grad_output, bias, _round_inputs("fp16"))["y"]
    if x.shape[0] >= 2:
        out["grad_weight"] = out["grad_weight"].copy()
        out["grad_weight"][0, 0] += np.float32(1.0)
    return out


KERNELS = {
    "fp16_accumulation": ("linear", "numpy", fp16_accumulation),
    "fp16_inputs": ("linear", "numpy", fp16_inputs),
    "tf32_inputs": ("linear", "numpy", tf32_inputs),
    "ulp_noise": ("linear", "numpy", ulp_noise),
    "kan_upper_edge": ("kan", "torch-cpu", kan_upper_edge),
    "mixed_logic": ("linear", "numpy", mixed_logic),
}


def _target(name: str) -> Target:
    op, backend, fn = KERNELS[name]
    return Target(name=name, op=op, backend=backend, precision=get_model("fp32"), fn=fn)


def _fixed_case(target: Target) -> dict[str, Any] | None:
    """The 16x512 linear case (normal values), every candidate model's worst ratio."""
    if target.op != "linear":
        return None
    case = Case("linear", {"batch": 16, "in_features": 512, "out_features": 16,
                           "bias": False}, storage="fp32", family="normal", seed=1)
    v = check_case(case, target, with_diagnosis=True)
    first = {"case": case.describe(), "passed": v.passed, "headline": v.diagnosis,
             "per_output": {k: {"diagnosis": str(o.diagnosis), "per_model": o.per_model}
                            for k, o in v.outputs.items()}}
    found = discriminate(v, target)
    first["after_discrimination"] = {
        "headline": v.diagnosis, "probes": found.probes, "probe_per_model": found.per_model,
        "per_output": {k: o.diagnosis.to_dict() for k, o in v.outputs.items()}}
    return first


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``diagnoses`` to the harness's subcommands."""
    ap = sub.add_parser("diagnoses", help="what numoracle says about kernels whose cause of "
                                          "failure is known (fp16, tf32, noise, a KAN bug)")
    ap.add_argument("--examples", type=int, default=60)
    ap.add_argument("--only", nargs="*", default=list(KERNELS))
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu/verdicts"))
    ap.add_argument("--label", default="current")
    ap.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write ``diagnoses-LABEL.json`` under ``--out``."""
    rows = []
    for name in args.only:
        target = _target(name)
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as store:
            res = run_target(target, examples=args.examples, seed=0, store=store, diagnose=True)
            stored = [{"class": e.signature["diagnosis"], "outputs": e.signature["outputs"],
                       "shapes": e.signature["shapes"]} for e in entries(store)]
        row = {"kernel": name, "op": target.op, "verdict": res.verdict,
               "cases_to_catch": res.cases_to_catch, "headline": res.diagnosis,
               "effective": res.effective(), "stored": stored, "repro_shape": res.repro_shape,
               "seconds": round(time.perf_counter() - t0, 2), "fixed_case": _fixed_case(target)}
        rows.append(row)
        print(json.dumps({k: row[k] for k in ("kernel", "headline", "effective")}, indent=1),
              flush=True)
    write_json(args.out / f"diagnoses-{args.label}.json",
               {"meta": meta(args.argv, examples=args.examples, seed=0), "rows": rows})
    return 0
