#!/usr/bin/env bash
# The conv2d GPU runs: GPU-marked tests of the conv2d reference and the GPU SGD steps,
# the conv2d oracle cost on the GPU, the training sweep with the GPU steps, and the
# cuDNN precision table.   usage: bash benchmarks/conv2d_gpu_suite.sh OUT [PROBLEMS] [CASES]
set -u
out=${1:?give an output folder}; problems=${2:-200}; cases=${3:-20}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, cupy; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), 'cupy', cupy.__version__)"
  nproc
} > "$out/gpu_tests.log" 2>&1
# the training sweep runs on the CPU cores beside the tests
( t0=$(date +%s); timeout 300 python3 benchmarks/training_sweep.py --problems "$problems" \
    --out "$out/training_sweep_gpu.json" > "$out/training_sweep_gpu.log" 2>&1
  echo "exit $? after $(( $(date +%s) - t0 )) s" >> "$out/training_sweep_gpu.log" ) &
sweep=$!
timeout 220 python3 -m pytest -m gpu -p numoracle -q -p no:cacheprovider -n 8 \
  tests/oracle/test_gpu_conv2d_reference.py tests/oracle/test_gpu_reference.py \
  tests/kernels/test_sgd_steps_gpu.py tests/kernels/test_sgd_steps.py tests/kernels/test_conv2d_gpu.py \
  tests/test_update_property.py >> "$out/gpu_tests.log" 2>&1
echo "pytest exit $?" >> "$out/gpu_tests.log"
timeout 120 python3 benchmarks/conv_cost.py --skip-gradcheck --out "$out/conv_cost_gpu.json" \
  >> "$out/gpu_tests.log" 2>&1
wait $sweep
t0=$(date +%s)
timeout 200 python3 benchmarks/cudnn_precision.py --out "$out" --cases "$cases" \
  > "$out/cudnn_precision.log" 2>&1
echo "cudnn_precision exit $? after $(( $(date +%s) - t0 )) s" >> "$out/cudnn_precision.log"
