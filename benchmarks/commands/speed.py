"""``speed``: the oracle's reference + bound against the plain float64 computation
of the same outputs.

    python -m benchmarks speed [--device cpu|gpu] [--out FILE.json]
        [--sweep-max-k 1048576] [--linear B,I,O ...] [--conv N,C,O,H,W ...] [--repeats 3]
        [--fresh-memory] [--plain float64|torch]

In one run, on NumPy (``--device cpu``) or CuPy (``--device gpu``):

* **sweep**: ``matmul`` cases ``m x k x n`` with the reduction length ``k`` from
  64 to ``--sweep-max-k`` (powers of 4, then the maximum), ``m = n`` shrinking
  as ``k`` grows so that an operand stays near 2^22 elements; for an fp32
  target (model ``fp32``: the float64 reference) and a float64 target (model
  ``fp64``: the exact context, error-free slice GEMMs);
* **linear**: the full linear backward (``y``, ``grad_input``, ``grad_weight``,
  ``grad_bias``) at each ``--linear`` shape, both targets (the float64 target
  only up to ``--fp64-max-elements`` weights); with ``--plain torch`` against torch
  float64 on the same device (the four ops; its autograd's forward + backward beside);
* **conv**: conv2d (3x3, padding 1, all four outputs) at each ``--conv`` shape,
  fp32 target, against torch's float64 conv2d forward and backward on the same
  device when torch is present (else skipped).

Each entry has the oracle's median time, the plain float64 time of the same
outputs (``a @ b``; for linear the three products and the bias sum), their
ratio, and on the CPU the oracle's peak traced memory against the float64
size of the case's inputs and outputs. Inputs are float32 values (exact in the
fp32 storage format) held as float64, as the checks hold them. Freed memory is
kept for reuse, as in a checking run (both timings alike), unless ``--fresh-memory``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import tracemalloc
from functools import partial
from typing import Any

import numpy as np

from benchmarks.record import meta
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model

LINEAR, MATMUL, CONV = get_op("linear"), get_op("matmul"), get_op("conv2d")


def _xp(device: str) -> Any:
    if device == "gpu":
        import cupy  # noqa: PLC0415 - only with a GPU

        return cupy
    return np


def _sync(xp: Any) -> None:
    if xp is not np:
        xp.cuda.Device().synchronize()


def _timed_pair(oracle: Any, plain: Any, xp: Any, repeats: int) -> tuple[list, list]:
    """Seconds of ``oracle`` and ``plain``, interleaved (a shared machine's load
    falls on both alike), after one warm-up each (CuPy compiles its kernels,
    BLAS spins up its threads)."""
    oracle()
    plain()
    _sync(xp)
    to, tp = [], []
    for _ in range(repeats):
        for fn, times in ((plain, tp), (oracle, to)):
            t0 = time.perf_counter()
            fn()
            _sync(xp)
            times.append(time.perf_counter() - t0)
    return to, tp


def _peak(fn: Any) -> int:
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return int(peak)


def _inputs(shapes: dict, xp: Any, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {k: xp.asarray(rng.standard_normal(s, dtype=np.float32).astype(np.float64))
            for k, s in shapes.items()}


def _entry(name: str, shape: Any, oracle: Any, plain: Any, xp: Any, repeats: int,
           io_elements: int, section: str = "", extra: Any = None) -> dict:
    to, tp = _timed_pair(oracle, plain, xp, repeats)
    om, pm = statistics.median(to), statistics.median(tp)
    row = {"case": name, "shape": shape, "oracle_s": om, "oracle_min_s": min(to),
           "plain_float64_s": pm, "plain_min_s": min(tp), "ratio": om / pm,
           "ratio_of_min": min(to) / min(tp), "repeats": repeats}
    if extra is not None:  # a second plain computation of the same outputs
        to2, te = _timed_pair(oracle, extra[1], xp, repeats)
        em = statistics.median(te)
        row.update({f"{extra[0]}_s": em, f"ratio_to_{extra[0]}": statistics.median(to2) / em})
    if xp is np:
        peak = _peak(oracle)
        row.update(peak_bytes=peak, io_float64_bytes=io_elements * 8,
                   peak_over_io=peak / (io_elements * 8))
    else:  # the same with value and bounds brought to the host, as the checks do
        th, _ = _timed_pair(partial(oracle.func, *oracle.args, host=True), plain, xp,
                            max(1, repeats // 2))
        row.update(oracle_to_host_s=statistics.median(th),
                   ratio_to_host=statistics.median(th) / pm)
        free, total = xp.cuda.Device().mem_info
        row.update(gpu_mem_used_bytes=int(total - free),
                   gpu_pool_bytes=int(xp.get_default_memory_pool().total_bytes()))
    row["loadavg"] = os.getloadavg()[0]
    print(json.dumps(row), flush=True)
    _save(row, section)
    return row


def _reference(op: Any, inputs: dict, params: dict, model: Any, host: bool = False) -> None:
    """The reference and bounds of every output (on the host with ``host``, as the
    checks use them; a NumPy reference is there already)."""
    refs = op.reference(inputs, params, model)
    if host:
        for r in refs.values():
            r.to_host()


#: rows so far and where to write them (after every row: a run cut short keeps them)
_RECORD: dict = {"res": None, "out": None}


def _save(row: dict, section: str) -> None:
    res = _RECORD["res"]
    if res is None:
        return
    res.setdefault(section, []).append(row)
    if _RECORD["out"]:
        with open(_RECORD["out"], "w") as f:
            json.dump(res, f, indent=2)


def sweep(xp: Any, max_k: int, repeats: int, models: tuple[str, ...]) -> list[dict]:
    rows = []
    ks = [64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20]
    ks = [k for k in ks if k <= max_k]
    if max_k not in ks:
        ks.append(max_k)
    for k in ks:
        side = int(min(512, max(16, (1 << 22) // k)))
        params = MATMUL.validate({"m": side, "k": k, "n": side})
        inputs = _inputs(MATMUL.input_shapes(params), xp)
        a, b = inputs["a"], inputs["b"]
        io = a.size + b.size + side * side
        for m in models:
            model = get_model(m)
            rows.append(_entry(f"matmul {m} target", [side, k, side],
                               partial(_reference, MATMUL, inputs, params, model),
                               partial(np.matmul, a, b) if xp is np else partial(xp.matmul, a, b),
                               xp, repeats, io, "sweep"))
    return rows


def linear_case(shape: tuple[int, ...], xp: Any = np) -> tuple[dict, dict, Any]:
    """The linear backward case ``(batch, in, out)`` with a bias: its parameters, its
    inputs (float32 values, as float64 arrays of ``xp``) and the plain float64
    computation of its four outputs (also used by cpu_floor.py, profile_cpu.py and
    gpu_kernel_times.py)."""
    b, i, o = shape
    params = LINEAR.validate({"batch": b, "in_features": i, "out_features": o, "bias": True})
    inputs = _inputs(LINEAR.input_shapes(params), xp)
    x, w, g, bias = inputs["x"], inputs["weight"], inputs["grad_output"], inputs["bias"]

    def plain() -> None:
        x @ w.T + bias
        g @ w
        g.T @ x
        g.sum(axis=0)
    return params, inputs, plain


def torch_linear(inputs: dict, xp: Any) -> tuple[Any, Any]:
    """torch float64 on the inputs' device (the same memory, through DLPack): the four
    outputs of a linear backward as four ops, and as torch's autograd computes them
    (forward, then backward from ``grad_output``)."""
    import torch  # noqa: PLC0415 - only with --plain torch

    dev = "cpu" if xp is np else "cuda"
    t = {k: torch.as_tensor(v, device=dev) for k, v in inputs.items()}
    x, w, g, bias = t["x"], t["weight"], t["grad_output"], t["bias"]

    def ops() -> None:
        torch.addmm(bias, x, w.T)
        g @ w
        g.T @ x
        g.sum(dim=0)

    def autograd() -> None:
        xx, ww, bb = (v.detach().requires_grad_(True) for v in (x, w, bias))
        torch.nn.functional.linear(xx, ww, bb).backward(g)

    return ops, autograd


def linear(xp: Any, shape: tuple[int, int, int], repeats: int, models: tuple[str, ...],
           fp64_max: int, plain_kind: str = "float64") -> list[dict]:
    _, i, o = shape
    params, inputs, plain = linear_case(shape, xp)
    extra = None
    if plain_kind == "torch":  # torch's four ops the plain time, its autograd a second one
        plain, autograd = torch_linear(inputs, xp)
        extra = ("torch_autograd", autograd)
    io = sum(v.size for v in inputs.values()) + sum(
        int(np.prod(s)) for s in LINEAR.output_shapes(params).values())
    rows = []
    for m in models:
        if m == "fp64" and i * o > fp64_max:
            continue
        model = get_model(m)
        rows.append(_entry(f"linear backward {m} target", list(shape),
                           partial(_reference, LINEAR, inputs, params, model), plain, xp,
                           repeats, io, "linear", extra))
    return rows


def conv(xp: Any, shape: tuple[int, ...], repeats: int) -> list[dict]:
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        return []
    n, c, o, h, wd = shape
    params = CONV.validate({"batch": n, "in_channels": c, "out_channels": o, "height": h,
                            "width": wd, "kernel_size": 3, "padding": 1, "bias": True})
    inputs = _inputs(CONV.input_shapes(params), xp)
    dev = "cuda" if xp is not np else "cpu"
    tt = {k: torch.as_tensor(v, device=dev) for k, v in inputs.items()}
    model = get_model("fp32")

    def plain() -> None:
        x = tt["x"].detach().requires_grad_(True)
        w = tt["weight"].detach().requires_grad_(True)
        bb = tt["bias"].detach().requires_grad_(True)
        y = torch.nn.functional.conv2d(x, w, bb, padding=1)
        y.backward(tt["grad_output"])
        if dev == "cuda":
            torch.cuda.synchronize()

    io = sum(v.size for v in inputs.values()) + sum(
        int(np.prod(s)) for s in CONV.output_shapes(params).values())
    return [_entry("conv2d 3x3 fp32 target", list(shape),
                   partial(_reference, CONV, inputs, params, model), plain, xp, repeats, io,
                   "conv")]


def _ints(spec: str) -> tuple[int, ...]:
    return tuple(int(v) for v in spec.split(","))


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``speed`` to the harness's subcommands."""
    ap = sub.add_parser("speed", help="the oracle's time against plain float64 products of "
                                      "the same outputs (matmul sweep, linear, conv2d)")
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--out", default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sweep-max-k", type=int, default=1 << 20)
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--linear", action="append", default=None, metavar="B,I,O")
    ap.add_argument("--conv", action="append", default=None, metavar="N,C,O,H,W")
    ap.add_argument("--plain", choices=("float64", "torch"), default="float64",
                    help="linear's plain computation: the device's float64 products "
                         "(default), or torch float64 on the same device (its four ops; "
                         "its autograd forward + backward recorded beside)")
    ap.add_argument("--fp64-max-elements", type=int, default=1 << 20,
                    help="largest weight (in x out) the float64 target is timed at")
    memory = ap.add_mutually_exclusive_group()
    memory.add_argument("--reuse-memory", action="store_true",
                        help="keep freed memory for reuse, as a checking run does "
                             "(numoracle.oracle.memory.reuse_for_checking; the default)")
    memory.add_argument("--fresh-memory", action="store_true",
                        help="glibc's default allocator: the oracle's and the plain "
                             "products' output arrays take fresh pages every call")
    ap.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Time what ``a`` names; every row is written to ``--out`` as soon as it is measured."""
    a.reuse_memory = False
    if not a.fresh_memory:
        try:
            from numoracle.oracle.memory import reuse_for_checking  # noqa: PLC0415
        except ImportError:  # an earlier numoracle (a baseline): the same allocator setting
            from numoracle.oracle.memory import (  # noqa: PLC0415
                reuse_freed_memory as reuse_for_checking,
            )
        a.reuse_memory = reuse_for_checking()
    xp = _xp(a.device)
    res: dict = meta(a.argv, processor=platform.processor(), device=a.device,
                     reuse_freed_memory=a.reuse_memory,
                     blas_threads=os.environ.get("OPENBLAS_NUM_THREADS", "default"))
    if xp is not np:
        res["gpu"] = xp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    else:
        res["cpu_cores"] = os.cpu_count()
    models = ("fp32", "fp64")
    _RECORD.update(res=res, out=a.out)
    if not a.no_sweep:
        sweep(xp, a.sweep_max_k, a.repeats, models)
    for spec in a.linear or ["128,1024,1024"]:
        linear(xp, _ints(spec), a.repeats, models, a.fp64_max_elements, a.plain)
    for spec in a.conv or []:
        conv(xp, _ints(spec), a.repeats)
    return 0
