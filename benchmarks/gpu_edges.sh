#!/usr/bin/env bash
# The Triton cross-entropy (forward and gradient) under the triton claim and under ieee,
# and the Triton SwiGLU under ieee (which fails: its headline), on one CUDA GPU, each in
# its own process at once; about 45 s.
#
#   OUT=DIR bash benchmarks/gpu_edges.sh
#
# From the root of a checkout, with torch, triton and numoracle's dependencies. Writes
# $OUT/edges/NAME-PRECISION.jsonl (one line per chunk of cases; a failure's line holds
# its headline and the worst ratio of each model tried per failing output), the logs,
# device.txt and table.md. Knobs: CASES (cross-entropy under triton, 600), LIMIT
# (seconds per process, 40).
set -u
OUT=${OUT:-out}
DIR="$OUT/edges"
mkdir -p "$DIR"
CASES=${CASES:-600}
LIMIT=${LIMIT:-40}
export PYTHONPATH="${PYTHONPATH:-$PWD}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$DIR/device.txt" 2>&1
git rev-parse --short HEAD >> "$DIR/device.txt" 2>/dev/null
start=$(date +%s)
run() {  # NAME PRECISION CASES
  timeout "$LIMIT" python3 examples/triton/check_triton.py "$1" --precision "$2" \
    --cases "$3" --chunk 100 --out "$DIR" > "$DIR/$1-$2.log" 2>&1
}
run cross_entropy triton "$CASES" &
run cross_entropy ieee 300 &
run swiglu ieee 300 &
run kl_div ieee 300 &
wait
echo "wall: $(( $(date +%s) - start )) s" >> "$DIR/device.txt"
python3 examples/triton/check_triton.py --table "$DIR" > "$DIR/table.md" 2>&1
cat "$DIR/table.md"
