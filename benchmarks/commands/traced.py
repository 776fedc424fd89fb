"""``traced``: the traced oracle's soundness sweep and its cost.

    python -m benchmarks traced sweep [--families a,b] [--examples 1000]
                                      [--targets torch-cpu-fp32,torch-cpu-bf16] [--out DIR]
    python -m benchmarks traced cost [--repeats 5] [--out DIR]

``sweep`` checks torch running each reference of
:mod:`benchmarks.traced_references` (one per op family: the correct targets of
:mod:`numoracle.kernels.torch_traced`) on ``--examples`` drawn cases per family
and target: every alarm is a false alarm of the oracle (or a kernel of torch's
outside its claim). Writes ``DIR/soundness.json`` and ``DIR/soundness.md``
(cases, alarms, worst ratio, seconds, and the first alarm's message).

``cost`` times, per family at a fixed mid-size case, the traced reference (the
capture of a new signature, and the interpreter on a kept graph), torch
float64 eager on the same inputs, and the hand-written op where one exists
(linear, conv2d, Adam). Writes ``DIR/cost.json`` and ``DIR/cost.md``.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.record import meta, write_json, write_text


def _sweep_one(family: str, target_name: str, examples: int, seed: int,
               grads: bool) -> dict[str, Any]:
    from benchmarks.traced_references import make_op  # noqa: PLC0415 - torch-heavy
    from numoracle.api import add_listener, check_kernel, remove_listener  # noqa: PLC0415
    from numoracle.errors import NumoracleError  # noqa: PLC0415
    from numoracle.kernels.torch_traced import reference_targets  # noqa: PLC0415

    op = make_op(family, grads=grads)
    target = next(t for t in reference_targets(op.name) if t.name == target_name)
    row: dict[str, Any] = {"family": family, "grads": grads, "op": op.name, "target": target_name,
                           "precision": target.precision.name, "examples": examples}
    reason = target.unavailable_reason()
    if reason is not None:
        return {**row, "status": f"skipped: {reason}"}
    results: list[Any] = []
    add_listener(results.append)
    start = time.perf_counter()
    try:
        check_kernel(target.fn, op=op.name, precision=target.precision,
                     backend=target.backend, examples=examples, seed=seed, store=None,
                     name=target.name, max_overlays=0)
        status = "pass"
    except NumoracleError as exc:  # an alarm (KernelMismatch) or a refusal (NoRule)
        status = f"{type(exc).__name__}: {str(exc)[:1500]}"
    finally:
        remove_listener(results.append)
    r = results[-1] if results else None
    return {**row, "status": "pass" if status == "pass" else "alarm", "message": status,
            "cases": getattr(r, "cases", 0), "failures": getattr(r, "failures", 0),
            "cases_to_catch": getattr(r, "cases_to_catch", None),
            "worst_ratio": getattr(r, "worst_ratio", None),
            "seconds": round(time.perf_counter() - start, 1)}


def sweep(args: argparse.Namespace) -> int:
    from benchmarks.traced_references import FAMILIES  # noqa: PLC0415

    families = [f for f in args.families.split(",") if f] or list(FAMILIES)
    targets = [t for t in args.targets.split(",") if t]
    rows = []
    for family in families:
        for target in targets:
            row = _sweep_one(family, target, args.examples, args.seed, not args.forward_only)
            rows.append(row)
            print(f"{family:14s} {target:16s} {row.get('status')} cases={row.get('cases')} "
                  f"worst={row.get('worst_ratio')} {row.get('seconds')}s", flush=True)
            out = Path(args.out)
            write_json(out / "soundness.json", {"meta": meta(args.argv), "rows": rows})
            write_text(out / "soundness.md", _sweep_md(rows, args.argv))
    return 0


def _sweep_md(rows: list[dict[str, Any]], argv: list[str]) -> str:
    lines = ["# Traced oracle: soundness of torch running each reference", "",
             f"`{meta(argv)['command']}`", "",
             "| family | grads | target | cases | alarms | worst ratio | seconds | status |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        worst = r.get("worst_ratio")
        lines.append(f"| {r['family']} | {'yes' if r['grads'] else 'no'} | {r['target']} | "
                     f"{r.get('cases', 0)} | "
                     f"{r.get('failures', 0)} | "
                     f"{'-' if worst is None else f'{worst:.3g}'} | {r.get('seconds', '-')} | "
                     f"{r['status']} |")
    alarms = [r for r in rows if r["status"] == "alarm"]
    if alarms:
        lines += ["", "## Alarms", ""]
        for r in alarms:
            lines += [f"### {r['family']} on {r['target']}", "", "```", r["message"], "```", ""]
    return "\n".join(lines) + "\n"


# -- cost ------------------------------------------------------------------------------
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


def cost(args: argparse.Namespace) -> int:
    import torch  # noqa: PLC0415

    from benchmarks.traced_references import FAMILIES, make_op  # noqa: PLC0415
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
            return capture(op.ref, {n: inputs[n] for n in op.ref.names}, cots)

        graph = fresh()

        def interpret(graph: Any = graph, inputs: dict[str, Any] = inputs,
                      ctx: Any = ctx) -> Any:
            return evaluate(graph, inputs, ctx)

        device = args.device
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

        row = {"family": family, "params": params, "eager_device": device,
               "capture_s": _median(fresh, args.repeats),
               "interpret_s": _median(interpret, args.repeats),
               "torch_float64_eager_s": _median(eager, args.repeats)}
        hand = _hand(family, inputs, params)
        if hand is not None:
            row["hand_written_s"] = _median(hand, args.repeats)
        row["interpret_over_eager"] = row["interpret_s"] / row["torch_float64_eager_s"]
        rows.append(row)
        print(family, {k: (round(v, 5) if isinstance(v, float) else v) for k, v in row.items()
                       if k != "family"}, flush=True)
    out = Path(args.out)
    write_json(out / "cost.json", {"meta": meta(args.argv), "rows": rows})
    lines = ["# Traced oracle: cost per case (median seconds)", "",
             f"`{meta(args.argv)['command']}`", "",
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


def _run(args: argparse.Namespace) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's notes on degenerate draws (var of one)
        return sweep(args) if args.what == "sweep" else cost(args)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``traced`` to the harness's subcommands."""
    ap = sub.add_parser("traced", help="traced oracle: soundness sweep of torch running "
                                       "each reference, and the cost of a traced reference")
    ap.add_argument("what", choices=("sweep", "cost"))
    ap.add_argument("--families", default="", help="comma-separated (default: all)")
    ap.add_argument("--targets", default="torch-cpu-fp32,torch-cpu-bf16")
    ap.add_argument("--examples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--forward-only", action="store_true",
                    help="sweep: the references without their gradients (cheaper cases)")
    ap.add_argument("--out", default="benchmarks/results/cpu/traced")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="cost: where torch's float64 eager run of the reference runs (the "
                         "oracle runs on the host)")
    ap.set_defaults(func=_run)
