#!/usr/bin/env bash
# The KernelBench judge on a GPU: each problem's own Model as the candidate under
# fp32 (TF32 off), tf32 and bf16 claims (false alarms), in parallel shards; or the
# mutant table on the GPU.
#
#   bash benchmarks/kernelbench_gpu.sh soundness PROBLEMS_DIR OUT_DIR [SHARDS] [EXAMPLES] [SECONDS]
#   bash benchmarks/kernelbench_gpu.sh mutants PROBLEMS_DIR OUT_DIR [SHARDS] [EXAMPLES] [SECONDS]
#
# PROBLEMS_DIR holds KernelBench's level1/ and level2/; OUT_DIR gets the merged
# markdown and JSON and one log. Shards stop after SECONDS (default 400) and keep
# the rows they finished.
set -u
what=$1; problems=$2; out=$3; shards=${4:-8}; examples=${5:-2}; seconds=${6:-400}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
tmp=$(mktemp -d)
mkdir -p "$out"
python3 -c "import torch, hypothesis, mpmath, numpy; print('torch', torch.__version__, torch.cuda.get_device_name())"
for i in $(seq 0 $((shards - 1))); do
  if [ "$what" = soundness ]; then
    timeout "$seconds" python3 benchmarks/kernelbench_soundness.py "$problems" --claims fp32,tf32,bf16 \
      --examples "$examples" --device cuda --shard "$i" --shards "$shards" \
      --out "$tmp/s$i.json" 2> "$tmp/s$i.log" &
  else
    timeout "$seconds" python3 benchmarks/kernelbench_mutants.py "$problems" --every 6 --limit 34 \
      --examples "$examples" --no-shrink --device cuda --shard "$i" --shards "$shards" \
      --out "$tmp" 2> "$tmp/s$i.log" &
  fi
done
wait
cat "$tmp"/s*.log > "$out/$what.log"
if [ "$what" = soundness ]; then
  python3 benchmarks/kernelbench_soundness.py --merge "$tmp"/s*.json --md "$out/soundness.md"
else
  python3 benchmarks/kernelbench_mutants.py --merge "$tmp"/mutants_shard*.json --out "$out"
fi
