#!/usr/bin/env bash
# The GPU part of issue 15 (hostile kernels): CUDA faults, sanitizers, isolation overhead.
#
#   bash benchmarks/isolation_gpu.sh OUT
#
# Writes into OUT: isolation_gpu.json (fault rows: illegal address, out-of-bounds write,
# shared-memory race in CuPy RawKernels, isolated and in-process, each followed by a correct
# check; compute-sanitizer memcheck/racecheck reports of the silent ones; run_kernel overhead
# isolated vs in-process for CuPy and torch CUDA), sanitizer-*.txt, the GPU-marked tests of
# tests/test_isolation.py, the CPU fault table re-run on this machine, nvidia-smi and pip freeze.
set -u
OUT=${1:?usage: bash benchmarks/isolation_gpu.sh OUT}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
{ date -u; uname -a; nvidia-smi; command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer; } \
    > "$OUT/machine.txt" 2>&1
python -m pip freeze > "$OUT/pip-freeze.txt" 2>&1
python benchmarks/isolation_gpu.py --out "$OUT" 2>&1 | tee "$OUT/isolation_gpu.log"
python -m pytest tests/test_isolation.py -q -p no:randomly -m gpu 2>&1 | tee "$OUT/gpu_tests.log"
python -m pytest tests/test_isolation.py -q -p no:randomly --durations=10 2>&1 | tee "$OUT/all_tests.log"
python benchmarks/isolation_faults.py --out "$OUT/cpu" --calls 200 2>&1 | tee "$OUT/cpu.log"
echo "done: $OUT"
