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
#   realistic  the same at real layer sizes (--regime realistic), $SECONDS per target
#   zoo        the bug zoo on linear, conv2d, KAN, logic and optim (GPU mutants included)
#   speed      reference + bound against plain float64 on the GPU (matmul sweep, linear,
#              conv2d at real sizes)
#   cost       the GPU float64 reference of a linear backward and of a conv2d layer
#   run        numoracle run with its report
#   foreign    the CUDA C example built with nvcc, and the GPU-marked foreign tests
#   isolation  the GPU-marked isolation tests (illegal address, sanitizers)
#
# Knobs (environment): EXAMPLES (2000), JOBS (nproc - 2), WORKERS (4), SECONDS (60),
# LIMITS (256,1024,default,262144). A section's time limit is the second field of
# its line in SECTIONS below.
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu.sh OUT [SECTION ...]}
shift
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
EXAMPLES=${EXAMPLES:-2000}
JOBS=${JOBS:-$(( $(nproc) > 3 ? $(nproc) - 2 : 1 ))}
WORKERS=${WORKERS:-4}
SECONDS_PER=${SECONDS:-60}
LIMITS=${LIMITS:-256,1024,default,262144}
GPU_BACKENDS=torch-cuda,cupy

# name and time limit (s) of every section, in the order they run
SECTIONS="env:60 tests:300 sweep:600 limits:600 realistic:600 zoo:300 speed:600 cost:300
run:200 foreign:200 isolation:200"

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
  timeout "$limit" bash -c "$(declare -f "section_$name"); $(declare -p OUT EXAMPLES JOBS \
    WORKERS SECONDS_PER LIMITS GPU_BACKENDS); section_$name" > "$OUT/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc $(( $(date +%s) - t0 )) s (limit $limit s)" | tee -a "$OUT/times.txt"
  tail -5 "$OUT/$name.log"
done
