#!/usr/bin/env bash
# One device call for the GPU work of a release: the GPU-marked tests, cuDNN on
# real layers, the realistic-size soundness sweep of the GPU targets, and the
# GPU parts of the foreign-target, isolation and CuPy flush-to-zero checks.
#   bash benchmarks/session_gpu.sh OUT [SWEEP_EXAMPLES] [SWEEP_SECONDS]
# Results are packed into OUT/session_gpu.tar.gz (small files only).
set -uo pipefail
out=${1:?usage: session_gpu.sh OUT [SWEEP_EXAMPLES] [SWEEP_SECONDS]}
examples=${2:-500}; seconds=${3:-60}
r="$out/r"; mkdir -p "$r"
command -v python >/dev/null || { mkdir -p /tmp/shim; ln -sf "$(command -v python3)" /tmp/shim/python; export PATH=/tmp/shim:$PATH; }
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
t_start=$(date +%s)
stamp() { echo "== $1 at $(( $(date +%s) - t_start )) s"; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, cupy, numpy, hypothesis; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), "cupy", cupy.__version__, "numpy", numpy.__version__, "hypothesis", hypothesis.__version__)'
  python3 -c 'import rich, ml_dtypes, mpmath; print("rich ok")'; nproc; } > "$r/device.txt" 2>&1
cat "$r/device.txt"
stamp "GPU-marked tests (background)"
( timeout 300 python3 -m pytest -m gpu -p numoracle -q -n 4 -p no:cacheprovider tests \
    > "$r/gpu_tests.log" 2>&1; echo "pytest exit $?" >> "$r/gpu_tests.log" ) &
tests=$!
stamp "cuDNN on real layers"
timeout 220 python3 benchmarks/cudnn_layers.py --out "$r/cudnn_layers" --batch 8 --cases 2 \
  --seconds 180 > "$r/cudnn_layers.log" 2>&1; echo "exit $?" >> "$r/cudnn_layers.log"
tail -3 "$r/cudnn_layers.log"
stamp "realistic-size soundness sweep"
timeout $(( seconds * 2 + 50 )) python -m benchmarks sweep --regime realistic \
  --backends torch-cuda,cupy --ops linear,matmul,conv2d,kan --limits default \
  --max-reduction 1048576 --examples "$examples" --seconds "$seconds" --jobs 6 \
  --out "$r/realistic" > "$r/realistic.log" 2>&1; echo "exit $?" >> "$r/realistic.log"
tail -25 "$r/realistic.log"
wait $tests; tail -3 "$r/gpu_tests.log"
stamp "CuPy flush-to-zero"
timeout 40 bash benchmarks/cupy_ftz_gpu.sh "$r/ftz" > /dev/null 2>&1; tail -5 "$r/ftz/cupy_ftz.log"
stamp "foreign CUDA example"
timeout 80 bash benchmarks/foreign_gpu.sh "$r/foreign" > "$r/foreign.log" 2>&1; tail -5 "$r/foreign.log"
if [ "${WITH_ISOLATION:-0}" = 1 ]; then
  stamp "isolation on the GPU"
  timeout 120 bash benchmarks/isolation_gpu.sh "$r/isolation" > "$r/isolation.log" 2>&1
  tail -5 "$r/isolation.log"
fi
stamp "pack"
(cd "$r" && find . -type f -size -2M | tar -czf ../session_gpu.tar.gz -T -)
ls -la "$out"
