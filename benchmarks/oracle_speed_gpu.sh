#!/usr/bin/env bash
# Oracle speed on the GPU (issue 13): reference + bound against plain float64 on CuPy/torch CUDA.
#   usage: bash benchmarks/oracle_speed_gpu.sh OUT
# Writes OUT/oracle_speed_gpu.json (sweep k = 64 .. 2^20 for fp32 and float64 targets; linear
# backward at 128x1024x1024, 1024x4096x4096 and 4096x8192x8192, the float64 target up to
# 4096x4096 weights; conv2d 3x3 backward at 32x64->64x32x32 and 32x256->256x56x56 against torch
# CUDA float64), the GPU-marked exact-context and reference tests, and logs.
set -u
out=${1:?give an output folder}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)"
  python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)" || true
  nproc
} > "$out/env.log" 2>&1
timeout 300 python3 -m pytest -m gpu -p numoracle -q -p no:cacheprovider \
  tests/oracle/test_exact_dot.py tests/oracle/test_gpu_reference.py \
  tests/oracle/test_gpu_conv2d_reference.py > "$out/gpu_tests.log" 2>&1
echo "pytest exit $?" >> "$out/gpu_tests.log"
t0=$(date +%s)
timeout 1500 python3 benchmarks/oracle_speed.py --device gpu --repeats 5 \
  --linear 128,1024,1024 --linear 1024,4096,4096 --linear 4096,8192,8192 \
  --fp64-max-elements 16777216 \
  --conv 32,64,64,32,32 --conv 32,256,256,56,56 \
  --out "$out/oracle_speed_gpu.json" > "$out/oracle_speed_gpu.log" 2>&1
echo "oracle_speed exit $? after $(( $(date +%s) - t0 )) s" >> "$out/oracle_speed_gpu.log"
