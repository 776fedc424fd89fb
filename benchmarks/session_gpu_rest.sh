#!/usr/bin/env bash
# The last GPU pieces in one device call: the logic-gate targets (GPU tests, short
# sweeps of the CUDA and CuPy targets, the zoo), the oracle against plain float64 on
# the GPU at the large linear and conv2d shapes, and hostile kernels on the GPU.
#   bash benchmarks/session_gpu_rest.sh OUT
set -uo pipefail
out=${1:?usage: session_gpu_rest.sh OUT}
r="$out/r"; mkdir -p "$r"
command -v python >/dev/null || { mkdir -p /tmp/shim; ln -sf "$(command -v python3)" /tmp/shim/python; export PATH=/tmp/shim:$PATH; }
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$r/device.txt"
t0=$(date +%s); stamp() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
stamp "oracle speed"
timeout 150 python3 -W ignore benchmarks/oracle_speed.py --device gpu --repeats 3 --no-sweep \
  --linear 1024,4096,4096 --linear 4096,8192,8192 --linear 128,1024,1024 \
  --fp64-max-elements 1048576 --conv 32,256,256,56,56 \
  --out "$r/oracle_speed_gpu.json" > "$r/oracle_speed_gpu.log" 2>&1; echo "exit $?" >> "$r/oracle_speed_gpu.log"
tail -12 "$r/oracle_speed_gpu.log"
stamp "logic GPU tests"
timeout 100 python3 -m pytest tests/kernels/test_logic_targets.py tests/test_equivalence.py \
  -m gpu -p numoracle -q -p no:cacheprovider > "$r/logic_tests.log" 2>&1
tail -3 "$r/logic_tests.log"
stamp "logic sweeps"
timeout 70 python3 -W ignore benchmarks/logic_sweep.py --op logic_layer --cases 2000 --out "$r/logic" \
  --targets torch-cuda-fp32,torch-cuda-fp64 --seconds 50 > "$r/logic_layer.log" 2>&1
tail -4 "$r/logic_layer.log"
timeout 90 python3 -W ignore benchmarks/logic_sweep.py --op logic_ca --cases 2000 --out "$r/logic" \
  --max-side 32 --max-steps 8 --targets cupy-atomic-fp32,cupy-ordered-fp32,cupy-serial-fp32,torch-cuda-fp32 \
  --seconds 70 > "$r/logic_ca.log" 2>&1
tail -6 "$r/logic_ca.log"
stamp "isolation on the GPU"
timeout 80 python3 -W ignore benchmarks/isolation_gpu.py --out "$r/isolation" > "$r/isolation.log" 2>&1
tail -8 "$r/isolation.log"
stamp "pack"
(cd "$r" && find . -type f -size -2M | tar -czf ../session_gpu_rest.tar.gz -T -)
