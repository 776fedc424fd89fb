#!/usr/bin/env bash
# A two-minute GPU call on one H200: short slices of the GPU scripts, side by side.
#
#   bash benchmarks/gpu_brief.sh OUT
#
# From the root of a checkout (rich and ml_dtypes installed; the ignored .kernelbench folder
# present). Runs at once, each within its own limit, and writes under OUT/:
#   edges/     gpu_claims.sh: cross-entropy under triton and ieee, SwiGLU and KL divergence
#              under ieee (600 cases each, 40 s per job)
#   kbench200/ gpu_kbench200.sh: official KernelBench instances, smallest first, ~45 s
#   core/      gpu_core.sh: the traced rules on CUDA against NumPy (45 s) and the traced
#              oracle's cost table against torch float64 eager (45 s of rows)
#   multi/     the hand-written ops' CuPy-vs-NumPy radii test and the KernelBench device
#              oracle's test (60 s), then the linear backward oracle against torch float64
#              at 128x1024x1024 and 4096x8192x8192 (40 s)
# The processes share one GPU and 16 cores: each timing is measured against its own plain
# computation in the same process, under the same contention.
set -u
R=${1:?usage: bash benchmarks/gpu_brief.sh OUT}
mkdir -p "$R/multi"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
start=$(date +%s)
( OUT=$R TOPIC=edges JOBS="cross_entropy:triton cross_entropy:ieee swiglu:ieee kl_div:ieee" \
    CASES=600 CHUNK=100 LIMIT=40 bash benchmarks/gpu_claims.sh > "$R/claims.log" 2>&1 ) &
( OUT=$R bash benchmarks/gpu_kbench200.sh > "$R/kbench200.log" 2>&1 ) &
( TEST_LIMIT=45 TABLE_BUDGET=45 PROFILE_LIMIT=0 bash benchmarks/gpu_core.sh "$R" \
    > "$R/core.log" 2>&1 ) &
( timeout 60 python3 -m pytest tests/oracle/test_ops_namespaces.py \
    tests/kernelbench/test_device_oracle.py -m gpu -q -n 4 -p no:cacheprovider -o addopts="" \
    > "$R/multi/gpu_tests.txt" 2>&1
  echo "gpu tests rc=$?" >> "$R/multi/gpu_tests.txt"
  timeout 40 python3 -m benchmarks speed --device gpu --no-sweep --repeats 3 --plain torch \
    --fp64-max-elements 0 --linear 128,1024,1024 --linear 4096,8192,8192 \
    --out "$R/multi/linear_speed.json" > "$R/multi/linear_speed.log" 2>&1
  echo "speed rc=$?" >> "$R/multi/linear_speed.log" ) &
wait
echo "all parts: $(( $(date +%s) - start )) s" | tee "$R/times.txt"
