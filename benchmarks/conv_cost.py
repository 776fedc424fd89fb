"""Oracle cost for conv2d: reference + bound of seed 000's grad_weight case, beside gradcheck.

    python benchmarks/conv_cost.py [--out FILE.json] [--gradcheck-limit 60] [--skip-gradcheck]

Seed 000's case: batch 2, 1 -> 16 channels, 128 x 128 pixels, 3 x 3 kernel. Times
the full conv2d reference (y, grad_input, grad_weight, grad_bias with bounds)
and grad_weight alone, and the full reference for a float64 kernel (the exact
context's), on the CPU and, when CuPy has a GPU, on its float64 path
(inputs already on the device; the time includes bringing value and bounds
back to the host, as the checks do); then torch.autograd.gradcheck on growing
square conv2d problems until one takes longer than the limit, and numoracle's
time on the largest one gradcheck finished.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from numoracle.cases.case import Case
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model

CONV = get_op("conv2d")


def time_reference(params: dict, outputs: tuple[str, ...] = (), repeats: int = 3,
                   gpu: bool = False, model_name: str = "fp32") -> float:
    """Median seconds of the reference + bound (on the GPU's float64 path with ``gpu``)
    for a kernel claiming ``model_name`` (``fp64``: a float64 kernel's, in the exact
    context)."""
    case = Case("conv2d", params, family="normal", seed=0)
    inputs: dict = case.inputs()
    model = get_model(model_name)
    sync = lambda: None  # noqa: E731
    if gpu:
        import cupy  # noqa: PLC0415 - only with a GPU

        inputs = {k: cupy.asarray(v) for k, v in inputs.items()}
        sync = cupy.cuda.Device().synchronize

    def once() -> None:
        refs = CONV.reference(inputs, case.params, model, outputs)
        for r in refs.values():
            r.to_host()
        sync()

    once()  # warm-up (CuPy compiles its kernels on first use)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        once()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def gpu_name() -> str | None:
    """The CuPy GPU's name, or None when CuPy has no usable GPU."""
    from numoracle.kernels import get_backend  # noqa: PLC0415

    if get_backend("cupy").available() is not None:
        return None
    import cupy  # noqa: PLC0415

    return str(cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())


def gradcheck_time(side: int, channels: int) -> float:
    import torch  # noqa: PLC0415 - only for the gradcheck ladder

    x = torch.randn(1, channels, side, side, dtype=torch.float64, requires_grad=True)
    w = torch.randn(channels, channels, 3, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(channels, dtype=torch.float64, requires_grad=True)
    t0 = time.perf_counter()
    assert torch.autograd.gradcheck(lambda x, w, b: torch.nn.functional.conv2d(x, w, b, padding=1),
                                    (x, w, b))
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--gradcheck-limit", type=float, default=60.0)
    ap.add_argument("--skip-gradcheck", action="store_true",
                    help="only the seed-000 timings (CPU and GPU)")
    a = ap.parse_args()
    seed000 = {"batch": 2, "in_channels": 1, "out_channels": 16, "height": 128, "width": 128,
               "kernel_size": 3, "bias": True}
    res: dict = {"machine": platform.platform(), "seed000_case": seed000,
                 "seed000_all_outputs_s": time_reference(seed000),
                 "seed000_grad_weight_s": time_reference(seed000, ("grad_weight",)),
                 "seed000_fp64_target_all_outputs_s": time_reference(seed000, model_name="fp64")}
    gpu = gpu_name()
    if gpu is not None:
        res["gpu"] = gpu
        res["seed000_all_outputs_gpu_s"] = time_reference(seed000, gpu=True)
        res["seed000_grad_weight_gpu_s"] = time_reference(seed000, ("grad_weight",), gpu=True)
        res["seed000_fp64_target_all_outputs_gpu_s"] = time_reference(seed000, gpu=True,
                                                                      model_name="fp64")
        large = {"batch": 32, "in_channels": 64, "out_channels": 64, "height": 32, "width": 32,
                 "kernel_size": 3, "padding": 1, "bias": True}
        res["large_case"] = large
        res["large_all_outputs_s"] = time_reference(large, repeats=1)
        res["large_all_outputs_gpu_s"] = time_reference(large, gpu=True)
    print(res, flush=True)
    if a.skip_gradcheck:
        _write(a.out, res)
        return
    ladder, largest = [], None
    for side, channels in ((4, 2), (8, 2), (8, 4), (16, 4), (16, 8), (32, 8)):
        t = gradcheck_time(side, channels)
        ladder.append({"side": side, "channels": channels, "seconds": t})
        print(ladder[-1], flush=True)
        if t > a.gradcheck_limit:
            break
        largest = (side, channels, t)
        if t * 4 > a.gradcheck_limit * 1.5:
            break
    res["gradcheck"] = ladder
    if largest:
        side, channels, t = largest
        params = {"batch": 1, "in_channels": channels, "out_channels": channels, "height": side,
                  "width": side, "kernel_size": 3, "padding": 1, "bias": True}
        ours = time_reference(params)
        res["on_gradcheck_largest"] = {"params": params, "gradcheck_s": t, "numoracle_s": ours,
                                       "speedup": t / ours}
        print(res["on_gradcheck_largest"], flush=True)
    _write(a.out, res)


def _write(path: str | None, res: dict) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
