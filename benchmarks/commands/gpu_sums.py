"""``gpu_sums``: what a contraction's magnitude sum ``S = |a| @ |b|`` costs on a
GPU's tensor cores, and how tight it is: the design's evidence (one TF32 GEMM grown by
``1 + 2 (k + 1) 2^-23``) and the package's path (:mod:`numoracle.oracle.tensor_sums`:
GEMMs of at most 2048 terms, summed in float64, grown by ``1 + gamma_{2c+2}(2^-23)``).

    python -m benchmarks gpu_sums [--shape 4096,8192,8192 ...] [--repeats 5]
        [--profile 128,1024,1024] [--profile-namespace cupy|torch ...] [--out FILE.json]

Per shape ``m,k,n`` (float32 values held as float64, as the checks hold them): the
median time of ``|a| @ |b|`` in float64 (CuPy, what the package does), in float32
(torch, TF32 off) and in TF32 (torch, TF32 on) of the magnitudes rounded up to TF32
(10 explicit bits: their products are exact in float32); then, for the TF32 sum grown by
``1 + 2 (k + 1) 2^-23`` (every addition of non-negative terms may lose an ulp of the
float32 sum so far, however the tensor cores align and round), the smallest and largest
ratio to the float64 sum: below 1 the grown TF32 sum would not be an upper bound there;
above 1 its excess is how much looser the bound would be; the same for the package's
path (``package_*``). With ``--profile``: the
hand-written linear backward's reference on CuPy at that shape (and with
``--profile-namespace torch`` on torch's CUDA tensors) under cProfile (the functions
with the most own time; Python calls per reference, the package's, CuPy's and torch's
own apart), for its fixed cost per call, its time alone against torch float64's, and on
CuPy the host's time per call of what one contraction launches (:func:`host_costs`).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import time
from typing import Any

import numpy as np

from benchmarks.record import meta


def _timed(fn: Any, sync: Any, repeats: int) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def sums(shape: tuple[int, int, int], repeats: int) -> dict[str, Any]:
    """Times and tightness of the three magnitude sums at ``shape``."""
    import cupy  # noqa: PLC0415 - a GPU only
    import torch  # noqa: PLC0415

    m, k, n = shape
    rng = np.random.default_rng(0)
    a = cupy.asarray(rng.standard_normal((m, k), dtype=np.float32).astype(np.float64))
    b = cupy.asarray(rng.standard_normal((k, n), dtype=np.float32).astype(np.float64))
    ma, mb = cupy.abs(a), cupy.abs(b)

    def tf32_up(x: Any) -> Any:
        """Non-negative float64 ``x`` rounded up to float32, then up to TF32."""
        x32 = x.astype(cupy.float32)
        x32 = cupy.where(x32.astype(cupy.float64) < x, cupy.nextafter(x32, cupy.float32(np.inf)),
                         x32)
        bits = x32.view(cupy.int32)
        return ((bits + 8191) & -8192).view(cupy.float32)

    ta, tb = (torch.as_tensor(tf32_up(v), device="cuda") for v in (ma, mb))
    sync = cupy.cuda.Device().synchronize
    row: dict[str, Any] = {"shape": list(shape)}
    row["float64_s"] = _timed(lambda: ma @ mb, sync, repeats)
    precision = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        row["float32_s"] = _timed(lambda: ta @ tb, sync, repeats)
        torch.set_float32_matmul_precision("high")
        row["tf32_s"] = _timed(lambda: ta @ tb, sync, repeats)
        s_tf32 = cupy.asarray(ta @ tb).astype(cupy.float64)
    finally:
        torch.set_float32_matmul_precision(precision)
    s64 = ma @ mb
    grow = 1.0 + 2.0 * (k + 1) * 2.0**-23
    ratio = (s_tf32 * grow) / s64
    row.update(grow=grow, min_ratio=float(ratio.min()), max_ratio=float(ratio.max()),
               median_ratio=float(cupy.median(ratio)),
               tf32_over_float64=row["tf32_s"] / row["float64_s"])
    # the package's path: the magnitudes rounded up to TF32 by tensor_sums.tf32_up, its
    # cuBLAS TF32 GEMMs of at most TENSOR_CHUNK terms summed in float64, its growth
    from numoracle.oracle.tensor_sums import tensor_sum, tf32_growth, tf32_up  # noqa: PLC0415

    ua, ub = tf32_up(ma), tf32_up(mb)
    row["package_s"] = _timed(lambda: tensor_sum(ua, ub), sync, repeats)
    p_grow, p_tiny = tf32_growth(k)
    p_ratio = (tensor_sum(ua, ub).astype(cupy.float64) * p_grow + p_tiny) / s64
    row.update(package_grow=p_grow, package_min_ratio=float(p_ratio.min()),
               package_max_ratio=float(p_ratio.max()),
               package_median_ratio=float(cupy.median(p_ratio)),
               package_over_float64=row["package_s"] / row["float64_s"])
    print(json.dumps(row), flush=True)
    return row


def profile(shape: tuple[int, int, int], calls: int = 20,
            namespace: str = "cupy") -> dict[str, Any]:
    """The linear backward's reference at ``shape`` under cProfile, on CuPy's arrays or
    (``namespace="torch"``) on torch's CUDA tensors (the same memory, through DLPack):
    back to back, alone (a wait after each call), alone after torch float64's four ops
    each time (as the speed run interleaves them) and against those four ops alone."""
    import cupy  # noqa: PLC0415
    import torch  # noqa: PLC0415

    from benchmarks.commands.speed import LINEAR, linear_case, torch_linear  # noqa: PLC0415
    from numoracle.oracle.precision import get_model  # noqa: PLC0415

    params, inputs, _plain = linear_case(shape, cupy)
    plain, _autograd = torch_linear(inputs, cupy)
    cupy_inputs = inputs
    if namespace == "torch":
        inputs = {k: torch.from_dlpack(v) for k, v in inputs.items()}
    model = get_model("fp32")
    sync = cupy.cuda.Device().synchronize
    for _ in range(3):  # kernels compiled, pools filled
        LINEAR.reference(inputs, params, model)
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        LINEAR.reference(inputs, params, model)
    host = (time.perf_counter() - t0) / calls  # the host's time (it waits where it syncs)
    sync()
    per_call = (time.perf_counter() - t0) / calls
    alone = _timed(lambda: LINEAR.reference(inputs, params, model), sync, calls)
    plain_alone = _timed(plain, sync, calls)
    # alone after torch's four ops each time, as the speed run interleaves them
    after_torch = []
    for _ in range(calls):
        plain()
        sync()
        t1 = time.perf_counter()
        LINEAR.reference(inputs, params, model)
        sync()
        after_torch.append(time.perf_counter() - t1)
    alone_after_torch = statistics.median(after_torch)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(calls):
        LINEAR.reference(inputs, params, model)
    sync()
    prof.disable()
    profiled = (time.perf_counter() - t0) / calls
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(25)
    print(out.getvalue(), flush=True)
    # Python calls per reference: all, the package's own functions, CuPy's and torch's
    # Python ones and the calls into compiled code (CuPy's Cython, the cuBLAS binding,
    # builtins)
    import numoracle  # noqa: PLC0415

    package = os.path.dirname(numoracle.__file__) + os.sep
    counts = {"all": 0, "numoracle": 0, "cupy_python": 0, "torch_python": 0, "compiled": 0}
    found = stats.stats.items()  # type: ignore[attr-defined]
    for (path, _line, _name), (_cc, ncalls, *_rest) in found:
        counts["all"] += ncalls
        part = ("compiled" if path == "~" else "numoracle" if path.startswith(package)
                else "cupy_python" if f"{os.sep}cupy" in path
                else "torch_python" if f"{os.sep}torch{os.sep}" in path else None)
        if part:
            counts[part] += ncalls
    per_ref = {k: v / calls for k, v in counts.items()}
    costs = host_costs(params, cupy_inputs) if namespace == "cupy" else {}
    print(json.dumps({"namespace": namespace, "per_call_s": per_call, "host_s": host,
                      "alone_s": alone, "alone_after_torch_s": alone_after_torch,
                      "torch_float64_alone_s": plain_alone,
                      "calls_per_reference": per_ref, "host_costs_s": costs}), flush=True)
    return {"shape": list(shape), "namespace": namespace, "calls": calls,
            "per_call_s": per_call, "host_s": host, "alone_s": alone,
            "alone_after_torch_s": alone_after_torch, "torch_float64_alone_s": plain_alone, "ratio_alone": alone / plain_alone,
            "per_call_s_under_profile": profiled, "calls_per_reference": per_ref,
            "host_costs_s": costs, "top_own_time": out.getvalue()}


def host_costs(params: dict, inputs: dict, calls: int = 200) -> dict[str, Any]:
    """The host's time per call (not waiting for the device) of what one contraction of
    the linear reference launches on CuPy, on its operands: CuPy's ``matmul``, the
    package's float64 cuBLAS call, its TF32 sum, an output array, the pass after the
    GEMMs (its elementwise kernel, its raw kernel; each with its four arrays), the
    operands' facts pass (a launch each, one launch); the median of five runs of
    ``calls`` each."""
    import cupy  # noqa: PLC0415

    from numoracle.oracle import fused, tensor_sums  # noqa: PLC0415
    from numoracle.oracle.formats import FP32  # noqa: PLC0415

    x, w = inputs["x"], inputs["weight"]
    wt = w.T
    mx, mw = tensor_sums.tf32_up(cupy.abs(x)), tensor_sums.tf32_up(cupy.abs(wt))
    value = x @ wt
    S32 = tensor_sums.tensor_sum(mx, mw)
    scalars = (1.0, 0.0, 0.0, 1e-7, 1e-8, 1e-300, 1e-13, -1.0, -1.0, FP32.max)
    shape = value.shape
    passes = [(v, cupy.ndarray(v.shape, dtype=cupy.float32))
              for v in (x, w, inputs["grad_output"], inputs["bias"])]
    found = cupy.zeros((4, 2), dtype=cupy.int32)

    def radii(raw: bool) -> Any:  # (the pass after a contraction's GEMMs, its 4 arrays made)
        return lambda: fused._device_exact_radii(cupy, value, S32, None, scalars, FP32, raw)

    def facts(many: bool) -> Any:  # (the facts pass over x, the weight, grad_output, bias)
        return lambda: fused._facts_passes(passes, found, FP32, 1 << 20, True, many)

    work = {"cupy_matmul": lambda: x @ wt,
            "value_product": lambda: tensor_sums.value_product(x, wt),
            "tensor_sum": lambda: tensor_sums.tensor_sum(mx, mw),
            "ndarray": lambda: cupy.ndarray(shape, dtype=cupy.float64),
            "exact_pass_elementwise_kernel": radii(False),
            "exact_pass_raw_kernel": radii(True),
            "facts_4_launches": facts(False), "facts_1_launch": facts(True)}
    sync = cupy.cuda.Device().synchronize
    res: dict[str, Any] = {}
    for name, fn in work.items():
        try:
            fn()
            sync()
        except Exception as exc:  # noqa: BLE001 - recorded: the other costs still measured
            res[name] = repr(exc)
            continue
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times.append((time.perf_counter() - t0) / calls)
            sync()
        res[name] = statistics.median(times)
    return res


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``gpu_sums`` to the harness's subcommands."""
    p = sub.add_parser("gpu_sums", help="magnitude sums on a GPU in float64, float32 and "
                                        "TF32: time and tightness; the small linear "
                                        "reference under cProfile")
    p.add_argument("--shape", action="append", default=None, metavar="M,K,N")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--profile", default=None, metavar="B,I,O")
    p.add_argument("--profile-namespace", action="append", default=None,
                   choices=("cupy", "torch"),
                   help="the reference's namespace under the profile (repeatable; cupy "
                        "by default): CuPy's arrays or torch's CUDA tensors")
    p.add_argument("--out", default=None)
    p.set_defaults(func=run)


def _write(res: dict[str, Any], out: str | None) -> None:
    if out:
        with open(out, "w") as f:
            json.dump(res, f, indent=2)


def run(args: argparse.Namespace) -> int:
    """Every shape, then the profile; written to ``--out`` as JSON."""
    res: dict[str, Any] = meta(args.argv)
    res["sums"] = [sums(tuple(int(v) for v in s.split(",")), args.repeats)  # type: ignore[arg-type]
                   for s in (args.shape or ["4096,8192,8192"])]
    if args.profile:  # (written after each: a run cut short keeps the first)
        shape = tuple(int(v) for v in args.profile.split(","))
        res["profiles"] = []
        for ns in args.profile_namespace or ["cupy"]:
            _write(res, args.out)
            res["profiles"].append(profile(shape, namespace=ns))  # type: ignore[arg-type]
            res["profile"] = res["profiles"][0]
    _write(res, args.out)
    return 0
