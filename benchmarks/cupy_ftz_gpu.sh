#!/usr/bin/env bash
# CuPy flush-to-zero on a GPU: does a RawKernel read a subnormal float32 input as
# zero, whatever options it is given? Does a cubin compiled outside CuPy keep it?
# Does torch's CUDA keep it? And does numoracle tell a user kernel claiming fp32
# what happened (the advice), while the advised flushed-subnormal model passes?
#
#   bash benchmarks/cupy_ftz_gpu.sh OUT
#
# Writes OUT/cupy_ftz.json (one row per variant: options, backend, input, result,
# flushed or kept) and OUT/cupy_ftz.log. Needs CuPy; nvcc (for the cubin row) and
# torch CUDA are used where present. Takes well under a minute.
set -uo pipefail
OUT=${1:?usage: bash benchmarks/cupy_ftz_gpu.sh OUT}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
nvidia-smi -L > "$OUT/cupy_ftz.log" 2>&1 || true
python - "$OUT" <<'EOF' 2>&1 | tee -a "$OUT/cupy_ftz.log"
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

out = Path(sys.argv[1])
rows = []
SUB = np.float32(2.0**-140)  # subnormal float32
SCALE = np.float32(2.0**30)  # SUB * SCALE = 2^-110, a normal float32
SRC = r'''
extern "C" __global__ void mul(const float* x, float s, float* y) {
    y[0] = x[0] * s;            // plain multiply
    y[1] = __fmul_rn(x[0], s);  // the intrinsic, round to nearest
    y[2] = x[0];                // a plain copy (no arithmetic)
    y[3] = x[0] + 0.0f;         // an add
}
'''


def record(variant: str, y) -> None:
    y = [float(v) for v in y]
    rows.append({"variant": variant, "input": float(SUB), "scale": float(SCALE),
                 "mul": y[0], "fmul_rn": y[1], "copy": y[2], "add0": y[3],
                 "mul_flushed": y[0] == 0.0, "fmul_rn_flushed": y[1] == 0.0,
                 "copy_flushed": y[2] == 0.0, "add_flushed": y[3] == 0.0})
    print(f"{variant:40s} mul={y[0]:.3e} fmul_rn={y[1]:.3e} copy={y[2]:.3e} add0={y[3]:.3e}")


import cupy as cp  # noqa: E402

info = {"cupy": cp.__version__, "numpy": np.__version__, "python": platform.python_version(),
        "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "cuda_runtime": cp.cuda.runtime.runtimeGetVersion()}
print(info)
x = cp.asarray([SUB], dtype=cp.float32)
for backend in ("nvrtc", "nvcc"):
    for opts in ((), ("-ftz=false",), ("--ftz=false",), ("-ftz=false", "-prec-div=true")):
        try:
            k = cp.RawKernel(SRC, "mul", options=opts, backend=backend)
            y = cp.zeros(4, dtype=cp.float32)
            k((1,), (1,), (x, SCALE, y))
            record(f"RawKernel {backend} {' '.join(opts) or '(no options)'}", y.get())
        except Exception as exc:  # noqa: BLE001 - a backend missing here is a row too
            rows.append({"variant": f"RawKernel {backend} {opts}", "error": repr(exc)})
            print("error", backend, opts, exc)

nvcc = shutil.which("nvcc")
if nvcc:
    with tempfile.TemporaryDirectory() as d:
        cu, cubin = Path(d) / "mul.cu", Path(d) / "mul.cubin"
        cu.write_text(SRC)
        cc = cp.cuda.Device(0).compute_capability
        res = subprocess.run([nvcc, "-cubin", f"-arch=sm_{cc}", "-ftz=false", "-o", str(cubin),
                              str(cu)], capture_output=True, text=True)
        if res.returncode == 0:
            mod = cp.RawModule(path=str(cubin))
            y = cp.zeros(4, dtype=cp.float32)
            mod.get_function("mul")((1,), (1,), (x, SCALE, y))
            record("cubin by nvcc -ftz=false, RawModule(path=)", y.get())
        else:
            rows.append({"variant": "cubin by nvcc", "error": res.stderr[-2000:]})
else:
    rows.append({"variant": "cubin by nvcc", "error": "nvcc not found"})

try:
    import torch

    if torch.cuda.is_available():
        t = torch.tensor([float(SUB)], dtype=torch.float32, device="cuda")
        y = torch.stack([t[0] * float(SCALE), t[0] * float(SCALE), t[0], t[0] + 0.0])
        record(f"torch {torch.__version__} CUDA elementwise", y.cpu().numpy())
except ImportError:
    pass

# numoracle: a user RawKernel matmul claiming fp32 fails with the advice; the
# advised model passes on the same inputs
import numoracle  # noqa: E402
from numoracle.cases.case import Case  # noqa: E402
from numoracle.checking.check import check_case  # noqa: E402

GEMM = r'''
extern "C" __global__ void gemm(const float* a, const float* b, float* c, int m, int k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m * n) return;
    int r = i / n, col = i % n;
    float s = 0.0f;
    for (int p = 0; p < k; ++p) s += a[r * k + p] * b[p * n + col];
    c[i] = s;
}
'''
kern = cp.RawKernel(GEMM, "gemm", options=("-ftz=false",))


def user_matmul(a, b):
    a, b = cp.ascontiguousarray(a), cp.ascontiguousarray(b)
    m, k = a.shape
    n = b.shape[1]
    c = cp.empty((m, n), dtype=cp.float32)
    kern(((m * n + 127) // 128,), (128,), (a, b, c, np.int32(m), np.int32(k), np.int32(n)))
    return {"out": c}


case = Case(op="matmul", params={"m": 1, "k": 2, "n": 1, "batch_shape": ()}, storage="fp32",
            family="exact", seed=0)
inputs = {"a": np.array([[SUB, 0.0]], dtype=np.float32),
          "b": np.array([[SCALE], [0.0]], dtype=np.float32)}
checks = {}
for label, model in (("claims fp32", numoracle.get_model("fp32")),
                     ("claims the advised model",
                      numoracle.get_model("fp32", flush_subnormal_inputs=True))):
    t = numoracle.Target(name="user-rawkernel", op="matmul", backend="cupy", precision=model,
                         fn=user_matmul, layouts=("C",))
    v = check_case(case, t, inputs=inputs)
    checks[label] = {"passed": v.passed, "diagnosis": v.diagnosis}
    print(label, "passed" if v.passed else "FAILED", "|", v.diagnosis)
checks["advice_shown"] = "-ftz=true" in checks["claims fp32"]["diagnosis"]
(out / "cupy_ftz.json").write_text(json.dumps({"machine": info, "rows": rows,
                                               "numoracle": checks}, indent=2) + "\n")
print("written", out / "cupy_ftz.json")
EOF
