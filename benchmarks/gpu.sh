#!/usr/bin/env bash
# The GPU benchmarks, one section per area, each under its own time limit.
#
#   bash benchmarks/gpu.sh OUT [SECTION ...]
#
# On a machine with a CUDA GPU, torch and cupy, from the root of a checkout. Without
# sections every section runs, in the order below; each writes under OUT/SECTION and
# its log to OUT/SECTION.log, and OUT/times.txt gets one line per section (exit status,
# seconds, limit). Sections:
#
#   env        the device, driver and library versions (always run first)
#   tests      the GPU-marked tests (pytest -m gpu, $WORKERS xdist workers)
#   sweep      soundness sweep of every GPU target, $EXAMPLES cases each (small cases)
#   limits     the same once per size limit ($LIMITS, every value family)
#   realistic  the same at real layer sizes (--regime realistic), $SWEEP_SECONDS per target
#   zoo        the bug zoo on linear, conv2d, KAN, logic and optim (GPU mutants included)
#   speed      reference + bound against plain float64 on the GPU (matmul sweep, linear,
#              conv2d at real sizes)
#   cost       the GPU float64 reference of a linear backward and of a conv2d layer
#   run        numoracle run with its report
#   foreign    the CUDA C example built with nvcc, and the GPU-marked foreign tests
#   isolation  the GPU-marked isolation tests (illegal address, sanitizers)
#   traced     the traced oracle on torch CUDA: soundness sweep of every op family
#              ($TRACED_CASES cases per family and target, forward only, then with
#              gradients), and its cost against torch float64 eager on the GPU
#   kernelbench  the KernelBench judge on the GPU: each problem's own Model under the
#              fp32 (TF32 off), tf32 and bf16 claims ($KB_SHARDS shards), beside the
#              mutant table (every 6th problem, 34 at most, $KB_MUTANT_SHARDS shards);
#              needs KernelBench's level1/ and level2/ in $KERNELBENCH
#
# Knobs (environment): EXAMPLES (2000), JOBS (nproc - 2), WORKERS (4), SWEEP_SECONDS (60;
# not SECONDS, which bash itself sets to the seconds since the shell started),
# LIMITS (256,1024,default,262144); TRACED_CASES (1000), TRACED_GRAD_CASES (1000),
# TRACED_FAMILIES (all), TRACED_TARGETS (torch-cuda-fp32,torch-cuda-tf32,torch-cuda-bf16);
# KERNELBENCH (.kernelbench), KB_EXAMPLES (2), KB_SHARDS (6), KB_MUTANT_SHARDS (2; 0: no
# mutant table), KB_CLAIMS (fp32,tf32,bf16: the soundness table's claims; the shards share
# one card, whole official instances included, so more shards run out of its memory),
# KB_SECONDS (450: the shards' wall-clock limit). A section's time limit is the second
# field of its line in SECTIONS below; traced and kernelbench each fit one 600 s call.
# Without a CUDA device the traced and kernelbench sections say so and skip; SMOKE=1
# runs them at CPU size instead (a few cases on the CPU targets), to try the script.
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu.sh OUT [SECTION ...]}
shift
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
EXAMPLES=${EXAMPLES:-2000}
JOBS=${JOBS:-$(( $(nproc) > 3 ? $(nproc) - 2 : 1 ))}
WORKERS=${WORKERS:-4}
SECONDS_PER=${SWEEP_SECONDS:-60}
LIMITS=${LIMITS:-256,1024,default,262144}
GPU_BACKENDS=torch-cuda,cupy
TRACED_CASES=${TRACED_CASES:-1000}
TRACED_GRAD_CASES=${TRACED_GRAD_CASES:-1000}
TRACED_FAMILIES=${TRACED_FAMILIES:-}
TRACED_TARGETS=${TRACED_TARGETS:-torch-cuda-fp32,torch-cuda-tf32,torch-cuda-bf16}
KERNELBENCH=${KERNELBENCH:-.kernelbench}
KB_EXAMPLES=${KB_EXAMPLES:-2}
KB_SHARDS=${KB_SHARDS:-6}
KB_MUTANT_SHARDS=${KB_MUTANT_SHARDS:-2}
KB_CLAIMS=${KB_CLAIMS:-fp32,tf32,bf16}
KB_SECONDS=${KB_SECONDS:-450}
SMOKE=${SMOKE:-}

# name and time limit (s) of every section, in the order they run
SECTIONS="env:60 tests:300 sweep:600 limits:600 realistic:600 zoo:300 speed:600 cost:300
run:200 foreign:200 isolation:200 traced:570 kernelbench:570"

section_env() {
  nvidia-smi
  python3 -c 'import torch, cupy, numpy, hypothesis
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn",
      torch.backends.cudnn.version())
print("cupy", cupy.__version__, "numpy", numpy.__version__, "hypothesis", hypothesis.__version__)
print(torch.cuda.get_device_name(0))'
  nproc
}

section_tests() {
  python3 -m pytest -m gpu -p numoracle -q -p no:cacheprovider -n "$WORKERS" tests
}

section_sweep() {
  python3 -m benchmarks sweep --backends "$GPU_BACKENDS" --examples "$EXAMPLES" \
    --jobs "$JOBS" --seconds "$SECONDS_PER" --out "$OUT/sweep"
}

section_limits() {
  python3 -m benchmarks sweep --backends "$GPU_BACKENDS" --limits "$LIMITS" \
    --examples "$EXAMPLES" --jobs "$JOBS" --seconds "$SECONDS_PER" --out "$OUT/limits"
}

section_realistic() {
  python3 -m benchmarks sweep --backends "$GPU_BACKENDS" --regime realistic \
    --limits default --max-reduction 1048576 --examples "$EXAMPLES" --jobs "$JOBS" \
    --seconds "$SECONDS_PER" --deadline 480 --out "$OUT/realistic"
}

section_zoo() {
  python3 -m benchmarks zoo --ops linear,conv2d,kan,logic,optim --out "$OUT/zoo"
}

section_speed() {
  python3 -m benchmarks speed --device gpu --repeats 5 \
    --linear 128,1024,1024 --linear 1024,4096,4096 --linear 4096,8192,8192 \
    --fp64-max-elements 16777216 --conv 32,64,64,32,32 --conv 32,256,256,56,56 \
    --out "$OUT/speed/oracle_speed_gpu.json"
}

section_cost() {
  python3 -m benchmarks cost --device gpu --op linear \
    --params batch=128,in_features=1024,out_features=1024 --out "$OUT/cost/linear.json"
  python3 -m benchmarks cost --device gpu --op conv2d \
    --params batch=2,in_channels=1,out_channels=16,height=128,width=128,kernel_size=3,padding=1 \
    --out "$OUT/cost/conv2d.json"
}

section_run() {
  python3 -m numoracle run --report "$OUT/run" --store "$OUT/run/repros"
}

section_foreign() {
  local build="$OUT/foreign/build"
  mkdir -p "$build"
  nvcc --version
  nvcc -O2 -shared -Xcompiler -fPIC examples/cuda/linear.cu -o "$build/liblinear_cuda.so"
  python3 -m pytest tests/foreign -m gpu -p numoracle -q -p no:cacheprovider
}

section_isolation() {
  python3 -m pytest tests/test_isolation.py -m gpu -p numoracle -q -p no:cacheprovider
}

# 0 when torch sees a CUDA device; else 1 after saying so (and with SMOKE=1 set, 0: the
# section then runs its CPU-size smoke)
cuda_or_smoke() {
  if python3 -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
    return 0
  fi
  if [ -n "$SMOKE" ]; then
    echo "no CUDA device: SMOKE=1, the CPU-size smoke of this section runs instead"
    return 0
  fi
  echo "no CUDA device (torch.cuda.is_available() is False): section skipped (SMOKE=1 runs" \
    "a CPU-size smoke)"
  return 1
}

section_traced() {
  cuda_or_smoke || return 0
  local targets=$TRACED_TARGETS cases=$TRACED_CASES grad_cases=$TRACED_GRAD_CASES
  local families=$TRACED_FAMILIES device=cuda
  if [ -n "$SMOKE" ]; then
    targets=torch-cpu-fp32,torch-cpu-bf16 cases=3 grad_cases=2 device=cpu
    families=${families:-activation,pooling}
  fi
  python3 -m benchmarks traced sweep --forward-only --cases "$cases" --targets "$targets" \
    --families "$families" --jobs "$JOBS" --out "$OUT/traced/sweep_forward"
  if [ -z "$SMOKE" ]; then
    python3 -m benchmarks traced cost --repeats 5 --device "$device" --out "$OUT/traced/cost"
  fi
  python3 -m benchmarks traced sweep --cases "$grad_cases" --targets "$targets" \
    --families "$families" --jobs "$JOBS" --out "$OUT/traced/sweep_grads"
}

section_kernelbench() {
  cuda_or_smoke || return 0
  if [ ! -d "$KERNELBENCH" ]; then
    echo "no KernelBench problems at KERNELBENCH=$KERNELBENCH (the folder of its level1/ and" \
      "level2/): section skipped"
    return 0
  fi
  local device=cuda every=1 limit=34 mutants=model,zeros,constant,bf16,strides,tail,mutates,reuse,race
  local shards=$KB_SHARDS mshards=$KB_MUTANT_SHARDS seconds=$KB_SECONDS examples=$KB_EXAMPLES
  if [ -n "$SMOKE" ]; then
    device=cpu every=50 limit=2 mutants=model,zeros shards=2 mshards=1 seconds=200 examples=0
  fi
  python3 -m benchmarks kernelbench soundness "$KERNELBENCH" --claims "$KB_CLAIMS" \
    --examples "$examples" --device "$device" --every "$every" --shards "$shards" \
    --seconds "$seconds" --out "$OUT/kernelbench/soundness" &
  if [ "$mshards" -gt 0 ]; then
    python3 -m benchmarks kernelbench mutants "$KERNELBENCH" --every $(( every * 6 )) \
      --limit "$limit" --mutants "$mutants" --examples "$examples" --no-shrink \
      --device "$device" --shards "$mshards" --seconds "$seconds" \
      --out "$OUT/kernelbench/mutants" &
  fi
  wait
}

wanted=("$@")
[ "${#wanted[@]}" -eq 0 ] && wanted=(all)
: >> "$OUT/times.txt"
for entry in $SECTIONS; do
  name=${entry%%:*}
  limit=${entry##*:}
  if [ "$name" != env ] && [ "${wanted[0]}" != all ] && [[ " ${wanted[*]} " != *" $name "* ]]; then
    continue
  fi
  mkdir -p "$OUT/$name"
  echo "== $name (limit ${limit} s)"
  t0=$(date +%s)
  # the section runs in a subshell under the limit, so a hung one cannot stop the rest
  timeout "$limit" bash -c "$(declare -f "section_$name"); $(declare -f cuda_or_smoke); \
    $(declare -p OUT EXAMPLES JOBS WORKERS SECONDS_PER LIMITS GPU_BACKENDS TRACED_CASES \
    TRACED_GRAD_CASES TRACED_FAMILIES TRACED_TARGETS KERNELBENCH KB_EXAMPLES KB_SHARDS \
    KB_MUTANT_SHARDS KB_SECONDS SMOKE); section_$name" > "$OUT/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc $(( $(date +%s) - t0 )) s (limit $limit s)" | tee -a "$OUT/times.txt"
  tail -5 "$OUT/$name.log"
done
