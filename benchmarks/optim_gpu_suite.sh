#!/usr/bin/env bash
# The optimizer and training-step GPU run (one GPU, 16 cores, under 5 minutes):
# the optim GPU-marked tests, the optim bug zoo, the real phase race of the CuPy
# trainer over random problems, and the teacher-forced sweep of correct
# trajectories (torch.optim for-loop and foreach on CUDA, the torch CUDA MLP
# step, the CuPy two-phase trainer; batch 1-2048, up to 50 steps).
#   usage: bash benchmarks/optim_gpu_suite.sh OUTDIR
# Writes OUTDIR/{device.txt, gpu_tests.log, zoo/zoo.json, zoo.log, optim_race.json,
# race.log, optim_sweep.json (summary and failing rows), sweep.log, times.txt}.
set -u
out=${1:?usage: optim_gpu_suite.sh OUTDIR}
mkdir -p "$out/zoo"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
: > "$out/times.txt"
stage() {  # stage NAME LIMIT_S LOG COMMAND...: run one stage under a time limit
  local name=$1 limit=$2 log=$3; shift 3
  local t0; t0=$(date +%s)
  timeout "$limit" "$@" > "$log" 2>&1
  local rc=$?
  echo "$name rc=$rc $(( $(date +%s) - t0 )) s (limit $limit s)" | tee -a "$out/times.txt"
}
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  python3 -c 'import torch, cupy, numpy, hypothesis; print("torch", torch.__version__, "cupy", cupy.__version__, "numpy", numpy.__version__, "hypothesis", hypothesis.__version__)'
} > "$out/device.txt" 2>&1
stage tests 70 "$out/gpu_tests.log" python3 -m pytest -m gpu -p numoracle -q -n 4 \
  -p no:cacheprovider tests/kernels/test_optim_gpu.py
tail -2 "$out/gpu_tests.log"
stage zoo 50 "$out/zoo.log" python3 -m numoracle zoo --ops optim --report "$out/zoo"
tail -2 "$out/zoo.log"
stage race 40 "$out/race.log" python3 benchmarks/optim_race.py "$out" --trials 30
tail -8 "$out/race.log"
stage sweep 120 "$out/sweep.log" python3 benchmarks/optim_sweep.py "$out" --optim 600 \
  --mlp 500 --mutant-trials 10 --budget 85 --workers 15 --impls for,foreach --no-rows
head -40 "$out/sweep.log"
ls -la "$out"
