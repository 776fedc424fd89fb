"""What bounds the CPU reference of a linear backward from below, measured.

    python benchmarks/cpu_floor.py [--shape 128,1024,1024] [--out FILE.json] [--fresh-memory]

Times, on this machine and in one run (medians of 15; each part back to back with
itself; freed memory kept for reuse as in a checking run unless ``--fresh-memory``): the
plain float64 products of the four outputs; the six GEMMs the reference needed with float64
magnitude sums (values and magnitude sums) with the magnitudes computed into fresh arrays
and into arrays kept from call to call; the three float64 GEMMs and three float32 ones
(magnitudes rounded to float32 into kept arrays) the reference does now; one elementwise
pass over every output (``out = 2 * S`` into an existing array: what any radius the reference writes
costs); the post-GEMM arithmetic of every output (the radii affine in ``S`` and the
rounding to the output format) as NumPy's separate passes and, where numba is installed,
as two fused loops of the same float64 operations (bitwise equal); and the reference
itself (model fp32). With float64 magnitude sums the reference cannot go below (six GEMMs
+ 3 passes) / plain: besides the GEMMs' two arrays it writes three (det, prob, ref); with
float32 ones, (three float64 and three float32 GEMMs + 4 passes: the grown sum too) / plain.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
from oracle_speed import linear_case

from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model


def _median_ms(fn, repeats: int = 15) -> float:
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1e3 * sorted(ts)[repeats // 2]


def _post_gemm(rng: np.random.Generator, n: int) -> dict[str, Any]:
    """The radii and the rounding of ``n`` outputs: NumPy's passes, and fused loops."""
    S, v = rng.random(n), rng.standard_normal(n)
    k = (1.0 + 2.0**-40, 1e-320, 6e-5, 2e-6, 1e-40, 1e-13, 2.0**-24, 1 + 2.0**-24, 2.0**-126)

    def numpy_passes() -> tuple[np.ndarray, np.ndarray]:
        grow, tiny_sum, dc, pc, eta, g64, u, grow_u, tiny = k
        s = S * grow
        s += tiny_sum
        det, prob, ref = s * dc, s * pc, s * g64
        det += eta
        prob += eta
        ref += tiny_sum
        m = np.abs(v)
        m += ref
        m *= u
        m += tiny
        det *= grow_u
        det += m
        prob *= grow_u
        prob += m
        return det, prob
    out: dict[str, Any] = {"post_gemm_numpy_ms": _median_ms(numpy_passes)}
    try:
        import numba  # noqa: PLC0415 - optional: only measured where installed
    except ImportError:
        return out

    @numba.njit
    def radii(S, grow, tiny_sum, dc, pc, eta, g64, det, prob, ref):
        for i in range(S.size):
            s = S[i] * grow
            s = s + tiny_sum
            det[i] = s * dc + eta
            prob[i] = s * pc + eta
            ref[i] = s * g64 + tiny_sum

    @numba.njit
    def rounding(v, ref, det, prob, u, grow_u, tiny):
        for i in range(v.size):
            mu = (abs(v[i]) + ref[i]) * u
            mu = mu + tiny
            det[i] = det[i] * grow_u + mu
            prob[i] = prob[i] * grow_u + mu

    def fused() -> tuple[np.ndarray, np.ndarray]:
        det, prob, ref = np.empty(n), np.empty(n), np.empty(n)
        radii(S, *k[:6], det, prob, ref)
        rounding(v, ref, det, prob, *k[6:])
        return det, prob
    out["post_gemm_numba_fused_ms"] = _median_ms(fused)
    out["post_gemm_fused_bitwise_equal"] = all(
        np.array_equal(a, b) for a, b in zip(fused(), numpy_passes(), strict=True))
    out["numba"] = numba.__version__
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="128,1024,1024", metavar="B,I,O")
    ap.add_argument("--out", default=None)
    ap.add_argument("--fresh-memory", action="store_true",
                    help="glibc's default allocator (else freed memory is kept, as in a "
                         "checking run)")
    a = ap.parse_args()
    if not a.fresh_memory:
        from numoracle.oracle.memory import reuse_for_checking  # noqa: PLC0415

        reuse_for_checking()
    b, i, o = (int(v) for v in a.shape.split(","))
    op, model = get_op("linear"), get_model("fp32")
    params, inputs, plain = linear_case((b, i, o))
    x, w, g = inputs["x"], inputs["weight"], inputs["grad_output"]
    rng = np.random.default_rng(0)

    def six_gemms() -> None:
        x @ w.T
        g @ w
        g.T @ x
        ax, aw, ag = np.abs(x), np.abs(w), np.abs(g)
        ax @ aw.T
        ag @ aw
        ag.T @ ax

    kept = [np.empty_like(v) for v in (x, w, g)]

    def six_gemms_kept() -> None:
        x @ w.T
        g @ w
        g.T @ x
        ax, aw, ag = (np.abs(v, out=k) for v, k in zip((x, w, g), kept, strict=True))
        ax @ aw.T
        ag @ aw
        ag.T @ ax

    kept32 = [np.empty(v.shape, dtype=np.float32) for v in (x, w, g)]

    def single_gemms_kept() -> None:
        x @ w.T
        g @ w
        g.T @ x
        ax, aw, ag = (np.abs(v, out=k, casting="same_kind")
                      for v, k in zip((x, w, g), kept32, strict=True))
        ax @ aw.T
        ag @ aw
        ag.T @ ax

    outs = [np.ones((b, o)), np.ones((b, i)), np.ones((o, i))]
    dest = [np.empty_like(s) for s in outs]

    def one_pass() -> None:
        for s, d in zip(outs, dest, strict=True):
            np.multiply(s, 2.0, out=d)

    res = {"machine": platform.platform(), "cores": os.cpu_count(),
           "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
           "numpy": np.__version__, "shape": [b, i, o],
           "plain_ms": _median_ms(plain), "six_gemms_ms": _median_ms(six_gemms),
           "six_gemms_kept_magnitudes_ms": _median_ms(six_gemms_kept),
           "float64_and_float32_gemms_kept_magnitudes_ms": _median_ms(single_gemms_kept),
           "freed_memory_reused": not a.fresh_memory,
           "one_output_pass_ms": _median_ms(one_pass),
           **_post_gemm(rng, b * o + b * i + o * i),
           "reference_ms": _median_ms(lambda: op.reference(inputs, params, model))}
    res["six_gemms_over_plain"] = res["six_gemms_ms"] / res["plain_ms"]
    res["floor_over_plain"] = (res["six_gemms_kept_magnitudes_ms"]
                               + 3 * res["one_output_pass_ms"]) / res["plain_ms"]
    res["float32_sums_floor_over_plain"] = (
        res["float64_and_float32_gemms_kept_magnitudes_ms"]
        + 4 * res["one_output_pass_ms"]) / res["plain_ms"]
    res["reference_over_plain"] = res["reference_ms"] / res["plain_ms"]
    print(json.dumps(res, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
