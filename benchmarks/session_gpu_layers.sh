#!/usr/bin/env bash
# cuDNN on the conv2d layers of ResNet-18 and a small UNet, then the realistic-size
# soundness sweep of the main GPU targets, one after the other (each has the GPU alone).
#   bash benchmarks/session_gpu_layers.sh OUT [LAYER_SECONDS] [SWEEP_SECONDS]
set -uo pipefail
out=${1:?usage: session_gpu_layers.sh OUT [LAYER_SECONDS] [SWEEP_SECONDS]}
layer_s=${2:-260}; sweep_s=${3:-80}
r="$out/r"; mkdir -p "$r"
command -v python >/dev/null || { mkdir -p /tmp/shim; ln -sf "$(command -v python3)" /tmp/shim/python; export PATH=/tmp/shim:$PATH; }
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$r/device.txt"
timeout $(( layer_s + 30 )) python3 -W ignore benchmarks/cudnn_layers.py --out "$r/cudnn_layers" \
  --seconds "$layer_s" > "$r/cudnn_layers.log" 2>&1; echo "exit $?" >> "$r/cudnn_layers.log"
tail -4 "$r/cudnn_layers.log"
timeout $(( sweep_s * 3 + 40 )) python3 -W ignore -m benchmarks sweep --regime realistic \
  --targets torch-cuda-fp32,torch-cuda-tf32,cupy-fp32,cupy-fp32-nchw --ops linear,matmul,conv2d,kan \
  --limits default --max-reduction 1048576 --examples 500 --seconds "$sweep_s" --jobs 4 \
  --out "$r/realistic" > "$r/realistic.log" 2>&1; echo "exit $?" >> "$r/realistic.log"
cat "$r/realistic.log"
(cd "$r" && find . -type f -size -2M | tar -czf ../session_gpu_layers.tar.gz -T -)
