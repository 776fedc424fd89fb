"""The cost of the traced oracle per case, beside torch's float64 and the hand-written ops.

Per op family of :mod:`benchmarks.traced.references`, at a fixed mid-size case:
the capture of a new signature, the interpreter on a kept graph, torch float64
eager on the same inputs (on the CPU or a CUDA device; the oracle runs on the
host), and the hand-written op where one exists (linear, Adam). Medians of
``repeats`` runs after one warm-up.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.record import meta, write_json, write_text

__all__ = ["cost"]

_COST_PARAMS = {
    "contraction": {"batch": 16, "i": 64, "o": 32},
    "convolution": {"batch": 4, "h": 12, "w": 12, "o": 8},
    "softmax_loss": {"batch": 16, "n": 64},
    "normalisation": {"batch": 8, "h": 8, "w": 8},
    "activation": {"batch": 16, "n": 256},
    "reduction": {"batch": 16, "n": 256},
    "pooling": {"batch": 4, "c": 4, "h": 16, "w": 16},
    "attention": {"batch": 4, "s": 16, "t": 16, "d": 32, "e": 16},
    "optimizer": {"n": 1024},
}


def _median(fn: Any, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _hand(family: str, inputs: dict[str, np.ndarray], params: dict[str, Any]) -> Any:
    """The hand-written op's reference call on the same case, where one exists."""
    from numoracle.oracle.ops import get_op  # noqa: PLC0415
    from numoracle.oracle.precision import get_model  # noqa: PLC0415

    fp32 = get_model("fp32")
    if family == "contraction":
        p = {"batch": params["batch"], "in_features": params["i"],
             "out_features": params["o"], "bias": True}
        ins = {"x": inputs["x"], "weight": inputs["weight"], "bias": inputs["bias"],
               "grad_output": inputs["grad_out"]}
        return lambda: get_op("linear").reference(ins, p, fp32)
    if family == "optimizer":
        p = {"optimizer": "adam", "lr": 0.01, "momentum": 0.0, "dampening": 0.0,
             "nesterov": False, "weight_decay": 0.0, "eps": 1e-8, "amsgrad": False,
             "steps": 1, "numel": params["n"]}
        ins = {"param0": inputs["param0"], "grads": inputs["grads"]}
        return lambda: get_op("optim").reference(ins, p, fp32)
    return None


def cost(repeats: int, device: str, out: Path, argv: Sequence[str]) -> int:
    """Time every family at its fixed case; write ``cost.json`` and ``cost.md`` to ``out``."""
    import torch  # noqa: PLC0415

    from benchmarks.traced.references import FAMILIES, make_op  # noqa: PLC0415
    from numoracle.cases.case import Case  # noqa: PLC0415
    from numoracle.oracle.precision import get_model  # noqa: PLC0415
    from numoracle.oracle.traced.capture import capture  # noqa: PLC0415
    from numoracle.oracle.traced.interpret import evaluate  # noqa: PLC0415

    rows = []
    for family in FAMILIES:
        op = make_op(family)
        params = _COST_PARAMS[family]
        case = Case(op.name, params, seed=1)
        inputs = case.inputs()
        names = op.ref.names
        cots = {k: v for k, v in inputs.items() if k not in names}
        ctx = op.context(get_model("fp32"))

        def fresh(op: Any = op, inputs: dict[str, Any] = inputs,
                  cots: dict[str, Any] = cots) -> Any:
            op.ref._graphs.clear()
            op.ref._symbolic.clear()  # a first capture, not a kept graph specialised
            return capture(op.ref, {n: inputs[n] for n in op.ref.names}, cots)

        graph = fresh()

        def interpret(graph: Any = graph, inputs: dict[str, Any] = inputs,
                      ctx: Any = ctx) -> Any:
            return evaluate(graph, inputs, ctx)

        tensors = {k: torch.tensor(v, device=device) for k, v in inputs.items()}
        ref = copy.copy(op.ref)
        if ref.module is not None:
            ref.module = copy.deepcopy(ref.module).to(device)

        def eager(ref: Any = ref, tensors: dict[str, Any] = tensors,
                  device: str = device) -> Any:
            if not ref.grads:
                with torch.no_grad():
                    out = ref.flat(tensors)
            else:
                leaves = {n: tensors[n].detach().requires_grad_(n in ref.grads)
                          for n in ref.names}
                outs, onames = ref.flat(leaves)
                out = torch.autograd.grad(outs, [leaves[g] for g in ref.grads],
                                          [tensors[f"grad_{n}"] for n in onames],
                                          allow_unused=True)
            if device != "cpu":
                torch.cuda.synchronize()
            return out

        row: dict[str, Any] = {"family": family, "params": params, "eager_device": device,
                               "capture_s": _median(fresh, repeats),
                               "interpret_s": _median(interpret, repeats),
                               "torch_float64_eager_s": _median(eager, repeats)}
        hand = _hand(family, inputs, params)
        if hand is not None:
            row["hand_written_s"] = _median(hand, repeats)
        row["interpret_over_eager"] = row["interpret_s"] / row["torch_float64_eager_s"]
        rows.append(row)
        print(family, {k: (round(v, 5) if isinstance(v, float) else v) for k, v in row.items()
                       if k != "family"}, flush=True)
    write_json(out / "cost.json", {"meta": meta(argv), "rows": rows})
    lines = ["# Traced oracle: cost per case (median seconds)", "",
             f"`{meta(argv)['command']}`", "",
             "| family | params | capture | interpret | torch f64 eager | interpret/eager | "
             "hand-written |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        hand_s = r.get("hand_written_s")
        lines.append(f"| {r['family']} | {r['params']} | {r['capture_s']:.4f} | "
                     f"{r['interpret_s']:.4f} | {r['torch_float64_eager_s']:.5f} | "
                     f"{r['interpret_over_eager']:.0f}x | "
                     f"{'-' if hand_s is None else f'{hand_s:.4f}'} |")
    write_text(out / "cost.md", "\n".join(lines) + "\n")
    return 0
