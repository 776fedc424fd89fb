"""The hand-written linear backward's reference recorded and replayed
(:mod:`numoracle.oracle.recorded`) against its evaluation and against torch float64, on
one device.

Per shape ``(batch, in, out)`` (float32 values as float64 tensors, with a bias; the
fp32 claim): the evaluation in torch's namespace (``NUMORACLE_RECORD=off``), then per
mode the signature's first case evaluated, its second recorded (seconds, the graph's
operations), and a third case drawn apart replayed: its guards held or not, its values
and radii against the evaluation's of that case (equal bits, or values off the
evaluation's ``ref_err`` and the smallest ratio of a radius to the evaluation's). The
replay and torch's four float64 ops and its autograd (forward, then backward from
``grad_output``) are timed interleaved on that case (best and median of
``--repeats``).

    python -m benchmarks.recorded_linear --device cuda --out FILE.json
        [--shape 128,1024,1024 --shape 4096,8192,8192] [--modes replay,graphs]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import numpy as np
import torch

from pathlib import Path

from benchmarks.commands.speed import LINEAR, _inputs, torch_linear
from benchmarks.record import meta, write_json
from benchmarks.traced.recorded import _best, _compare, _sync

__all__ = ["main"]


def _case(shape: tuple[int, int, int], seed: int, device: str) -> tuple[dict, dict]:
    """The parameters and the inputs (tensors on ``device``) of draw ``seed``."""
    b, i, o = shape
    params = LINEAR.validate({"batch": b, "in_features": i, "out_features": o, "bias": True})
    inputs = _inputs(LINEAR.input_shapes(params), np, seed)
    return params, {k: torch.from_numpy(v).to(device) for k, v in inputs.items()}


def _row(shape: tuple[int, int, int], device: str, modes: list[str], repeats: int
         ) -> dict[str, Any]:
    from numoracle.oracle import recorded  # noqa: PLC0415
    from numoracle.oracle.ops import get_op  # noqa: PLC0415
    from numoracle.oracle.precision import get_model  # noqa: PLC0415
    from numoracle.oracle.traced.recording import MODE_VARIABLE  # noqa: PLC0415

    op, model = get_op("linear"), get_model("fp32")
    cases = [_case(shape, seed, device) for seed in (1, 2, 3)]
    params, third = cases[2]
    host = {k: v.cpu().numpy() for k, v in third.items()}
    ops, autograd = torch_linear(host, np if device == "cpu" else "cuda")
    row: dict[str, Any] = {"shape": list(shape), "device": device}
    os.environ[MODE_VARIABLE] = "off"
    truth = op.reference(third, params, model)
    best, median = _best(lambda: op.reference(third, params, model), repeats, device)
    row["evaluation_s"] = {"best": best, "median": median}
    for name, fn in (("torch_ops", ops), ("torch_autograd", autograd)):
        best, median = _best(fn, repeats, device)
        row[f"{name}_s"] = {"best": best, "median": median}
    for how in modes:
        os.environ[MODE_VARIABLE] = how
        recorded._RECORDINGS.clear()  # noqa: SLF001 - each mode its own recording
        t = time.perf_counter()
        for p, inputs in cases[:2]:
            recorded.reference(op, inputs, p, model)
        _sync(device)
        rec = next(iter(recorded.recordings(op).kept.values()), None)
        entry: dict[str, Any] = {"record_s": time.perf_counter() - t}
        if rec is None:
            entry["refused"] = recorded.recordings(op).refused
            row[how] = entry
            continue
        entry["nodes"] = rec.nodes
        before = rec.replays
        got = recorded.reference(op, third, params, model)
        entry["guards_held"] = rec.replays > before
        entry["agreement"] = _compare(got, truth)
        del got
        best, median = _best(lambda: recorded.reference(op, third, params, model),
                             repeats, device)
        entry["replay_s"] = {"best": best, "median": median}
        for base in ("torch_ops", "torch_autograd"):
            entry[f"vs_{base}"] = {k: entry["replay_s"][k] / row[f"{base}_s"][k]
                                   for k in ("best", "median")}
        row[how] = entry
        print(json.dumps({"shape": shape, "mode": how, **{k: v for k, v in entry.items()
                                                         if k != "agreement"}}), flush=True)
    os.environ[MODE_VARIABLE] = "off"
    recorded._RECORDINGS.clear()  # noqa: SLF001
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.recorded_linear",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shape", action="append", default=None, metavar="B,I,O")
    ap.add_argument("--modes", default="replay,graphs",
                    help="comma-separated recording modes (replay, compile, graphs)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: nothing measured", file=sys.stderr)
        return 0
    shapes = [tuple(int(v) for v in s.split(",")) for s in (a.shape or ["128,1024,1024"])]
    res = meta(sys.argv[1:] if argv is None else argv)
    res["rows"] = [_row(s, a.device, a.modes.split(","), a.repeats) for s in shapes]
    if a.out:
        write_json(Path(a.out), res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
