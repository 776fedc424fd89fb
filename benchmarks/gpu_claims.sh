#!/usr/bin/env bash
# The Triton examples (examples/triton/) on one CUDA GPU: each under the triton claim
# (fp32 with Triton's default elementwise accuracy: what a "triton" target claims), then
# under ieee (correctly rounded fp32), every example in its own process at once.
#
#   OUT=DIR bash benchmarks/gpu_claims.sh
#   OUT=DIR TOPIC=edges JOBS="cross_entropy:triton cross_entropy:ieee swiglu:ieee kl_div:ieee" \
#     CASES=600 LIMIT=40 bash benchmarks/gpu_claims.sh      # about 45 s: the given jobs at once
#
# From the root of a checkout, with torch, triton and numoracle's dependencies. Writes
# $OUT/$TOPIC/NAME-PRECISION.jsonl (one line per chunk of cases; a failure's line holds its
# headline and the worst ratio of each model tried per failing output), the logs, and
# $OUT/$TOPIC/table.md. Knobs: TOPIC (claims), JOBS (NAME:PRECISION ...; default every
# example under triton, then every one under ieee), CASES (1000 per job under triton),
# IEEE_CASES (300), CHUNK (200), LIMIT (seconds per phase, 115; about 4 minutes in all).
set -u
OUT=${OUT:-out}
DIR="$OUT/${TOPIC:-claims}"
mkdir -p "$DIR"
CASES=${CASES:-1000}
IEEE_CASES=${IEEE_CASES:-300}
CHUNK=${CHUNK:-200}
LIMIT=${LIMIT:-115}
export PYTHONPATH="${PYTHONPATH:-$PWD}"
NAMES="softmax softmax_bf16_sum layer_norm rms_norm cross_entropy swiglu kl_div"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$DIR/device.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" \
  >> "$DIR/device.txt" 2>&1
git rev-parse --short HEAD >> "$DIR/device.txt" 2>/dev/null
phase() {  # one phase: every NAME:PRECISION job given, at once
  start=$(date +%s)
  for job in "$@"; do
    name=${job%%:*}
    precision=${job##*:}
    n=$CASES
    [ "$precision" = ieee ] && n=$IEEE_CASES
    timeout "$LIMIT" python3 examples/triton/check_triton.py "$name" --precision "$precision" \
      --cases "$n" --chunk "$CHUNK" --out "$DIR" > "$DIR/$name-$precision.log" 2>&1 &
  done
  wait
  echo "$*: $(( $(date +%s) - start )) s" >> "$DIR/device.txt"
}
if [ -n "${JOBS:-}" ]; then
  phase $JOBS
else
  for precision in triton ieee; do
    phase $(for name in $NAMES; do echo "$name:$precision"; done)
  done
fi
python3 examples/triton/check_triton.py --table "$DIR" > "$DIR/table.md" 2>&1
cat "$DIR/table.md"
