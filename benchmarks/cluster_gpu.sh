#!/usr/bin/env bash
# The cluster path on a machine with two (or more) GPUs: scaling from one GPU to
# all, then a soundness sweep over the GPU targets through Ray tasks.
# Usage:  bash benchmarks/cluster_gpu.sh OUTDIR [SWEEP_SECONDS] [OPS]
#   (about 3 min of scaling + SWEEP_SECONDS, default 330: inside one 10-minute command)
# Ray: used where `import ray` works; otherwise unpacked from .raypack/ray-site.tar.xz,
# which `bash benchmarks/cluster_gpu_pack.sh` builds on a machine with pip access (the
# ray wheel, 79 MB, is larger than a carried working tree may be: the pack drops Ray's
# Java jars, the dashboard's web build and the libraries numoracle does not use, 28 MB).
# On the device tool: carry [".raypack"].
set -uo pipefail
out=${1:?usage: cluster_gpu.sh OUTDIR [SWEEP_SECONDS] [OPS]}
sweep=${2:-330}
ops=${3:-linear,matmul}
mkdir -p "$out/r"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0
if ! python3 -c 'import ray' 2>/dev/null; then
  if [ -f .raypack/ray-site.tar.xz ]; then
    mkdir -p /tmp/raysite && tar -xJf .raypack/ray-site.tar.xz -C /tmp/raysite || exit 2
    export PYTHONPATH="$PYTHONPATH:/tmp/raysite"
  else
    echo "no Ray here and no .raypack/ray-site.tar.xz: run benchmarks/cluster_gpu_pack.sh and carry .raypack" >&2
    exit 2
  fi
fi
{ nvidia-smi -L; nproc; python3 -c 'import ray, torch, cupy; print("ray", ray.__version__, "torch", torch.__version__, "cupy", cupy.__version__)'; } > "$out/r/device.txt" 2>&1
cat "$out/r/device.txt"
echo "== scaling and sweep through the cluster path"
timeout $((sweep + 240)) python3 benchmarks/cluster_gpu.py --out "$out/r" --ops "$ops" \
  --sweep-seconds "$sweep" 2>&1 | grep -v "Token authentication" | tee "$out/r/cluster_gpu.log" | tail -30
(cd "$out/r" && find . -type f -size -512k | tar -czf ../cluster_gpu_results.tar.gz -T -)
ls -la "$out"
