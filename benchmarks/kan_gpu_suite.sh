#!/usr/bin/env bash
# The KAN GPU runs, within 6 minutes on one GPU with 16 CPU cores: the GPU-marked KAN
# tests (layer and chain targets: torch CUDA fp32/fp64, CuPy) beside the soundness
# sweeps, first of the layer on torch-cuda-fp32 (2,000 cases), then of the chains on
# the CuPy and torch CUDA chain targets (500 cases each).
#   usage: bash benchmarks/kan_gpu_suite.sh OUT [LAYER_CASES] [CHAIN_CASES]
# writes OUT/device.txt, gpu_tests.log, kan/kan_sweep.{json,md}, chain/kan_sweep.{json,md},
# sweep.log (and repros of any failure under kan/repros, chain/repros)
set -u
out=${1:?give an output folder}; layer_cases=${2:-2000}; chain_cases=${3:-500}
mkdir -p "$out/kan" "$out/chain"
export PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)"
  nproc
} > "$out/device.txt" 2>&1
# the GPU tests on 3 workers, beside the sweeps on 12
( t0=$(date +%s)
  timeout 330 python3 -m pytest -m gpu -p numoracle -q -p no:cacheprovider -n 3 \
    tests/kernels/test_kan_targets.py tests/kernels/test_kan_chain_targets.py \
    > "$out/gpu_tests.log" 2>&1
  echo "pytest exit $? after $(( $(date +%s) - t0 )) s" >> "$out/gpu_tests.log" ) &
tests=$!
export KAN_SWEEP_PROCS=12
t0=$(date +%s)
KAN_SWEEP_SECONDS=120 timeout 170 python3 benchmarks/kan_sweep.py "$out/kan" "$layer_cases" \
  torch-cuda-fp32 > "$out/sweep.log" 2>&1
echo "layer sweep exit $? after $(( $(date +%s) - t0 )) s" >> "$out/sweep.log"
t0=$(date +%s)
KAN_SWEEP_SECONDS=100 timeout 150 python3 benchmarks/kan_sweep.py "$out/chain" "$chain_cases" \
  kan_chain:cupy-fp32,kan_chain:torch-cuda-fp32,kan_chain:torch-cuda-fp64 >> "$out/sweep.log" 2>&1
echo "chain sweep exit $? after $(( $(date +%s) - t0 )) s" >> "$out/sweep.log"
wait $tests
