#!/usr/bin/env bash
# Soundness under several size limits on the GPU (issue 17): every CUDA target (torch
# CUDA, CuPy) once per max_elements setting, every value family drawn (special
# included), each (target, op, limit) run capped at SECONDS. Two calls fit the 10-minute
# limit of one device command on 16 cores:
#   bash benchmarks/limits_gpu.sh OUT/small 256,1024
#   bash benchmarks/limits_gpu.sh OUT/large default,262144
#   usage: bash benchmarks/limits_gpu.sh OUT [LIMITS] [SECONDS] [JOBS] [EXAMPLES]
# writes OUT/device.txt, OUT/sweep.log, OUT/soundness.{json,md} (and OUT/repros of alarms)
set -u
out=${1:?give an output folder}; limits=${2:-256,1024}; seconds=${3:-60}; jobs=${4:-12}
examples=${5:-2000}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"
  python3 -c "import cupy; print('cupy', cupy.__version__)"
  nproc
} > "$out/device.txt" 2>&1
t0=$(date +%s)
timeout 570 python -m benchmarks sweep --limits "$limits" --backends torch-cuda,cupy \
  --examples "$examples" --seconds "$seconds" --jobs "$jobs" --out "$out" > "$out/sweep.log" 2>&1
echo "sweep exit $? after $(( $(date +%s) - t0 )) s" >> "$out/sweep.log"
