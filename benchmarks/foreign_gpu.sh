#!/usr/bin/env bash
# The CUDA C example of the foreign targets on a GPU (issue 11).
#   bash benchmarks/foreign_gpu.sh OUT
# Builds examples/cuda/linear.cu with nvcc (correct and planted bug), runs each
# over 200 cases on CuPy and torch CUDA device pointers, measures the call
# overhead against calling the .so by hand, and runs the GPU-marked foreign tests.
set -euo pipefail
OUT=${1:?usage: foreign_gpu.sh OUT}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(mktemp -d)
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
nvcc --version > "$OUT/nvcc.txt"
nvcc -O2 -shared -Xcompiler -fPIC "$HERE/examples/cuda/linear.cu" -o "$BUILD/liblinear_cuda.so"
nvcc -O2 -shared -Xcompiler -fPIC -DPLANTED_BUG "$HERE/examples/cuda/linear.cu" \
     -o "$BUILD/liblinear_cuda_bug.so"
python "$HERE/benchmarks/foreign_gpu.py" "$OUT" "$BUILD/liblinear_cuda.so" \
       "$BUILD/liblinear_cuda_bug.so" --examples 200 2>&1 | tee "$OUT/foreign_gpu.log"
python -m pytest "$HERE/tests/foreign" -m gpu -q -p no:randomly 2>&1 | tee "$OUT/pytest_gpu.log"
