#!/usr/bin/env bash
# What a GPU run ran on, for its results folder: the device, the versions of torch,
# CUDA, NumPy, CuPy and numba (those installed), the host compiler and the commit.
#
#   bash benchmarks/gpu_env.sh > DIR/env.txt
#
# Used by the benchmarks/gpu_*.sh scripts; prints what is missing instead of failing.
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
python3 - <<'PY' 2>&1
import importlib
parts = []
for name in ("torch", "numpy", "cupy", "numba"):
    try:
        mod = importlib.import_module(name)
    except ImportError:
        parts.append(f"{name} not installed")
        continue
    parts.append(f"{name} {mod.__version__}")
    if name == "torch":
        parts.append(f"cuda {mod.version.cuda}")
print(", ".join(parts))
PY
(g++ --version | head -1) 2>&1 || echo "no g++: device kernels are not compared with their host build"
git rev-parse HEAD 2>&1
