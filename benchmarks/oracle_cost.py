"""Oracle cost: reference + bound of a linear backward, beside torch.autograd.gradcheck.

    python benchmarks/oracle_cost.py [--out FILE.json] [--gradcheck-limit 60]

Measures, for batch 128 and 1024x1024 weights: the time of the full reference
(y, grad_input, grad_weight, grad_bias with their bounds) on the CPU, and on
the GPU float64 path when CuPy and a GPU are present; the oracle's peak host
memory against the float64 size of the case's inputs and outputs; then
gradcheck on growing square linear layers until one takes more than the limit,
and numoracle's time on the largest shape gradcheck finished.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import tracemalloc

import numpy as np

from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model

LINEAR = get_op("linear")


def case_inputs(batch: int, fin: int, fout: int, xp=np) -> dict:
    rng = np.random.default_rng(0)
    d = {"x": rng.standard_normal((batch, fin), dtype=np.float32),
         "weight": rng.standard_normal((fout, fin), dtype=np.float32),
         "bias": rng.standard_normal(fout, dtype=np.float32),
         "grad_output": rng.standard_normal((batch, fout), dtype=np.float32)}
    return {k: xp.asarray(v.astype(np.float64)) for k, v in d.items()}


def time_reference(batch: int, fin: int, fout: int, xp=np, repeats: int = 5) -> dict:
    params = LINEAR.validate({"batch": batch, "in_features": fin, "out_features": fout,
                              "bias": True})
    inputs = case_inputs(batch, fin, fout, xp)
    model = get_model("fp32")
    sync = (lambda: xp.cuda.Stream.null.synchronize()) if xp is not np else (lambda: None)
    LINEAR.reference(inputs, params, model)  # warm-up
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        LINEAR.reference(inputs, params, model)
        sync()
        times.append(time.perf_counter() - t0)
    out = {"shape": [batch, fin, fout], "median_s": float(np.median(times)),
           "min_s": float(np.min(times)), "repeats": repeats}
    if xp is np:
        tracemalloc.start()
        LINEAR.reference(inputs, params, model)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        io = sum(a.size for a in inputs.values()) + sum(
            int(np.prod(s)) for s in LINEAR.output_shapes(params).values())
        out.update(peak_bytes=peak, io_float64_bytes=io * 8, peak_over_io=peak / (io * 8))
    return out


def gradcheck_time(n: int, batch: int) -> float:
    import torch

    x = torch.randn(batch, n, dtype=torch.float64, requires_grad=True)
    w = torch.randn(n, n, dtype=torch.float64, requires_grad=True)
    b = torch.randn(n, dtype=torch.float64, requires_grad=True)
    t0 = time.perf_counter()
    assert torch.autograd.gradcheck(torch.nn.functional.linear, (x, w, b))
    return time.perf_counter() - t0


def gradcheck_ladder(limit: float, batch: int) -> dict:
    rows, largest = [], None
    n = 4
    while True:
        t = gradcheck_time(n, batch)
        rows.append({"n": n, "batch": batch, "seconds": t})
        print(f"gradcheck linear {batch}x{n} -> {n}: {t:.2f} s", flush=True)
        if t > limit:
            break
        largest = n
        n *= 2
        # the next step costs about 4-8x: stop before it would run far past the limit
        if t * 4 > limit * 1.5:
            break
    return {"ladder": rows, "largest_within_limit": largest}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--gradcheck-limit", type=float, default=60.0)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--features", type=int, default=1024)
    ap.add_argument("--no-gradcheck", action="store_true", help="skip the gradcheck ladder")
    a = ap.parse_args()
    res: dict = {"machine": platform.platform(), "processor": platform.processor()}
    res["cpu"] = time_reference(a.batch, a.features, a.features)
    print("CPU reference:", res["cpu"], flush=True)
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            res["gpu_float64"] = time_reference(a.batch, a.features, a.features, xp=cupy)
            res["gpu_name"] = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
            print("GPU float64 reference:", res["gpu_float64"], flush=True)
    except ImportError:
        res["gpu_float64"] = None
    gc_batch = 8
    res["gradcheck"] = None if a.no_gradcheck else gradcheck_ladder(a.gradcheck_limit, gc_batch)
    n = res["gradcheck"]["largest_within_limit"] if res["gradcheck"] else None
    if n:
        gc_t = next(r["seconds"] for r in res["gradcheck"]["ladder"] if r["n"] == n)
        ours = time_reference(gc_batch, n, n)
        res["on_gradcheck_largest"] = {"shape": [gc_batch, n, n], "gradcheck_s": gc_t,
                                       "numoracle_s": ours["median_s"],
                                       "speedup": gc_t / ours["median_s"]}
        print("on gradcheck's largest shape:", res["on_gradcheck_largest"], flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
