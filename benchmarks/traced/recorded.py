"""Recorded replays of the traced oracle's evaluation against its evaluation and
against torch float64 eager, on one device.

Per reference of :mod:`benchmarks.traced.table` (one size, forward and forward +
backward): the evaluation as the oracle makes it by default (NumPy on the host, CuPy
or torch's namespace on a GPU), the evaluation in torch's namespace, its recording
(:func:`numoracle.oracle.traced.recording.record`: the time, the graph's operations
and guards), the recorded graph replayed, and replayed compiled
(:func:`torch.compile`), each on a second case drawn apart from the recorded one: its
guards held or not, and its values and radii against the evaluation's of that case
(equal bits, or the largest relative difference and the count of elements that
differ). Replays are timed on the second case where its guards held (``timed_on``).
Rows are written as they finish (``rows.jsonl``) and the run stops at ``--deadline``
seconds.

    python -m benchmarks.traced.recorded --device cuda --out DIR [--size realistic]
        [--names softmax,mlp] [--compile default,cudagraphs] [--deadline 400]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.record import meta, write_json
from benchmarks.traced.table import REFERENCES, _inputs

__all__ = ["main"]

_FIELDS = ("value", "ref_err", "det", "prob", "mag", "lo")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _best(fn: Callable[[], Any], repeats: int, device: str) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        _sync(device)
        t = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times)


def _host_fields(res: dict[str, Any]) -> dict[str, np.ndarray]:
    from numoracle.oracle.xp import to_numpy  # noqa: PLC0415 - after torch's setup

    out = {}
    for k, t in res.items():
        for f in _FIELDS:
            v = getattr(t, f, None)
            if v is None:
                continue
            out[f"{k}.{f}"] = np.broadcast_to(np.asarray(to_numpy(v), dtype=np.float64),
                                              t.shape)
    return out


def _compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Equal bits, or per field the largest relative difference and the count of
    elements that differ (NaN equal to NaN)."""
    fa, fb = _host_fields(a), _host_fields(b)
    if fa.keys() != fb.keys():
        return {"equal": False, "fields": f"{sorted(fa)} vs {sorted(fb)}"}
    worst: dict[str, Any] = {}
    for k in fa:
        if k.endswith(".value"):  # (within the oracle's own error of the evaluation?)
            err = fb[k[:-6] + ".ref_err"] if k[:-6] + ".ref_err" in fb else 0.0
            with np.errstate(all="ignore"):
                off = np.abs(fa[k] - fb[k]) > err
            worst[k[:-6] + ".value_off_ref_err"] = int(np.sum(off & np.isfinite(fb[k])))
        elif not k.endswith(".lo"):  # (a radius smaller than the evaluation's?)
            with np.errstate(all="ignore"):
                ratio = fa[k] / fb[k]
            ratio = ratio[np.isfinite(ratio) & (fb[k] > 0)]
            worst[k + ".min_ratio"] = float(ratio.min()) if ratio.size else 1.0
        x, y = fa[k], fb[k]
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        if same.all():
            continue
        with np.errstate(all="ignore"):
            rel = np.abs(x - y) / np.maximum(np.abs(y), np.finfo(np.float64).tiny)
        rel = rel[~same & np.isfinite(rel)]
        worst.setdefault("differing", {})
        worst["differing"][k] = {"differ": int((~same).sum()), "of": int(same.size),
                                 "max_rel": float(rel.max()) if rel.size else float("inf")}
    return {"equal": "differing" not in worst, "fields": worst}


def _row(name: str, size: str, backward: bool, device: str, modes: list[str],
         repeats: int) -> dict[str, Any]:
    from numoracle.oracle.precision import get_model  # noqa: PLC0415
    from numoracle.oracle.traced.capture import capture as capture_graph  # noqa: PLC0415
    from numoracle.oracle.traced.interpret import evaluate  # noqa: PLC0415
    from numoracle.oracle.traced.op import TracedOp  # noqa: PLC0415
    from numoracle.oracle.traced.recording import Unrecordable, record  # noqa: PLC0415
    from numoracle.oracle.xp import namespace_named  # noqa: PLC0415

    fn, grads = REFERENCES[name]
    draws = [_inputs(name, size, np.random.default_rng(seed)) for seed in (1, 2)]
    op = TracedOp(fn, inputs={k: torch.from_numpy(v) for k, v in draws[0].items()},
                  grads=grads if backward else (), name=f"recorded_{name}_{size}_{int(backward)}")
    for seed, host in zip((11, 12), draws, strict=True):
        rng = np.random.default_rng(seed)
        for k, s in op.input_shapes({}).items():
            if k not in host:
                host[k] = rng.standard_normal(s).astype(np.float32).astype(np.float64)
    if name == "cross_entropy":  # (labels are constants of a recording: one set)
        draws[1]["labels"] = draws[0]["labels"]
    model = get_model("fp32")
    integers = op.integer_inputs({})
    tx = namespace_named("torch")
    dev = torch.device(device)
    ctx = replace(op.context(model), xp=tx, device=dev)
    cases = [{k: (v if k in integers else torch.from_numpy(v).to(dev)) for k, v in h.items()}
             for h in draws]
    default_given = [{k: torch.from_numpy(v).to(dev) for k, v in h.items()} if device != "cpu"
                     else h for h in draws]
    seen = {k: torch.from_numpy(v).to(dev) for k, v in draws[0].items()}
    graph = capture_graph(op.ref, {n: seen[n] for n in op.ref.names},
                          {f"grad_{o}": seen[f"grad_{o}"] for o in op._graded({})})
    floats = [k for k in draws[0] if k not in integers]

    def eager_torch(case: dict[str, Any]) -> dict[str, Any]:
        return evaluate(graph, dict(case), ctx)

    def on_floats(case: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
        fixed = {k: v for k, v in case.items() if k in integers}
        return lambda fl: evaluate(graph, {**fixed, **fl}, ctx)

    row: dict[str, Any] = {"reference": name, "size": size,
                           "pass": "fwd+bwd" if backward else "fwd"}
    op.reference(default_given[0], {}, model)
    row["default_s"], _ = _best(lambda: op.reference(default_given[0], {}, model), repeats,
                                device)
    eager_torch(cases[0])
    row["torch_ns_s"], _ = _best(lambda: eager_torch(cases[0]), repeats, device)
    truth_a, truth_b = eager_torch(cases[0]), eager_torch(cases[1])
    t = time.perf_counter()
    try:
        rec = record(on_floats(cases[0]), {k: cases[0][k] for k in floats}, tx)
    except Unrecordable as e:
        row["record"] = f"refused: {e}"
        return row
    _sync(device)
    row["record_s"] = time.perf_counter() - t
    row["nodes"], row["guards"] = rec.nodes, len(rec.sources)
    fl = [{k: c[k] for k in floats} for c in cases]
    got_a = rec.run(fl[0])
    row["replay_a_equal"] = got_a is not None and _compare(got_a, truth_a)["equal"]
    got_b = rec.run(fl[1])
    row["replay_b"] = ("guards failed: " + ", ".join(sorted(rec.failed_sources))
                       if got_b is None else _compare(got_b, truth_b))
    row["replay_s"], _ = _best(lambda: rec.run(fl[1] if got_b is not None else fl[0]),
                               repeats, device)
    row["timed_on"] = "B" if got_b is not None else "A"  # (the new case where it replays)
    for mode in modes:
        rec.failed_sources.clear()
        try:
            rec.compile(graphs=mode == "cudagraphs")
            t = time.perf_counter()
            rec.run(fl[0])
            _sync(device)
            row[f"compile_{mode}_first_s"] = time.perf_counter() - t
            got_a = rec.run(fl[0])
            row[f"compile_{mode}_a"] = ("guards failed" if got_a is None
                                        else _compare(got_a, truth_a))
            got = rec.run(fl[1])
            row[f"compile_{mode}_b"] = ("guards failed: " + ", ".join(sorted(rec.failed_sources))
                                        if got is None else _compare(got, truth_b))
            row[f"compile_{mode}_s"], _ = _best(
                lambda: rec.run(fl[1] if got is not None else fl[0]), repeats, device)
        except Exception as e:  # (a compiler's failure is a result to record)
            import traceback  # noqa: PLC0415
            row[f"compile_{mode}"] = f"failed: {type(e).__name__}: {str(e)[:400]}"
            row[f"compile_{mode}_where"] = [f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}"
                                            for f in traceback.extract_tb(e.__traceback__)][-8:]
        rec.compiled = None

    ins = {k: v for k, v in cases[0].items()}
    tens = {k: (torch.as_tensor(v, device=dev) if k in integers else v) for k, v in ins.items()}

    def torch_eager() -> Any:
        xs = {k: tens[k].detach().requires_grad_(backward and k in grads) for k in op.ref.names}
        out = fn(*(xs[k] for k in op.ref.names))
        if backward:
            return torch.autograd.grad(out, [xs[k] for k in grads], tens["grad_out"])
        return out

    torch_eager()
    row["torch_fp64_s"], _ = _best(torch_eager, max(repeats, 7), device)
    for k in ("default_s", "torch_ns_s", "replay_s", *(f"compile_{m}_s" for m in modes)):
        if k in row:
            row[k.replace("_s", "_ratio")] = row[k] / row["torch_fp64_s"]
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--size", default="realistic", choices=("small", "realistic"))
    p.add_argument("--names", default=",".join(REFERENCES))
    p.add_argument("--passes", default="fwd,fwd+bwd")
    p.add_argument("--compile", default="default")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--deadline", type=float, default=400.0)
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    modes = [m for m in a.compile.split(",") if m]
    rows = []
    for name in a.names.split(","):
        for ps in a.passes.split(","):
            if time.perf_counter() - start > a.deadline:
                print(f"deadline: {name} {ps} not run", flush=True)
                continue
            try:
                row = _row(name, a.size, ps == "fwd+bwd", a.device, modes, a.repeats)
            except Exception as e:  # (one row's failure is a result; the others still run)
                row = {"reference": name, "pass": ps, "error": f"{type(e).__name__}: {e}"[:600]}
            rows.append(row)
            print(json.dumps(row), flush=True)
            with open(a.out / "rows.jsonl", "a") as fh:
                fh.write(json.dumps(row) + "\n")
    write_json(a.out / "recorded.json", {"meta": meta(sys.argv if argv is None else argv), "device": a.device, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
