#!/usr/bin/env bash
# One call on a host with two GPUs: the hand-written linear's recorded replays timed alone,
# then the KernelBench official survey resumed on GPU 0 beside the GPU-marked tests on GPU 1.
# Everything is packed into OUT/recorded_kb.tgz (a call returns few files).
#
#   OUT=DIR KB_FROM=<an earlier official.json> [KB_DEADLINE=400] [TESTS_LIMIT=360] \
#     bash benchmarks/gpu_recorded_kb.sh
#
#   linear/      python -m benchmarks.recorded_linear at 128x1024x1024 and 4096x8192x8192
#                (the evaluation, its replays op by op and as a CUDA graph, torch float64's
#                four ops and autograd, interleaved; both GPUs idle)
#   kbench200/   benchmarks/gpu_kbench200.sh's official part on GPU 0, resumed from KB_FROM
#   gpu_tests.txt  python -m pytest -m gpu -v over tests/ on GPU 1 (each test's line, the
#                failures' tracebacks; cut at TESTS_LIMIT seconds)
# From the root of a checkout with rich, ml_dtypes on PYTHONPATH and .kernelbench carried.
set -uo pipefail
OUT=${OUT:?set OUT}
D="$OUT/recorded_kb"
mkdir -p "$D/linear"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
{ date -u; nvidia-smi -L; nproc; git log --oneline -1 2>/dev/null
  python3 -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)"
} > "$D/env.txt" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout "${LINEAR_LIMIT:-200}" python3 -m benchmarks.recorded_linear \
  --device cuda --shape 128,1024,1024 --shape 4096,8192,8192 --modes replay,graphs \
  --repeats 30 --out "$D/linear/recorded_linear.json" > "$D/linear/log.txt" 2>&1
echo "linear rc=$?" >> "$D/env.txt"
CUDA_VISIBLE_DEVICES=1 timeout "${TESTS_LIMIT:-360}" python3 -m pytest -m gpu -v -n 12 \
  -p no:cacheprovider -rfE tests/ > "$D/gpu_tests.txt" 2>&1 &
tests=$!
CUDA_VISIBLE_DEVICES=0 NUMORACLE_KERNELBENCH_DRAWS=device KB_KEEP_OVER_LIMIT=1 OUT="$D" \
  KB_PARTS=official KB_ORDER=least-work-first KB_LEAN=2.5 KB_SLOTS="${KB_SLOTS:-10}" \
  KB_DEADLINE="${KB_DEADLINE:-400}" KB_OFFICIAL_FROM="${KB_FROM:-}" \
  bash benchmarks/gpu_kbench200.sh > "$D/kbench_stdout.txt" 2>&1
wait "$tests"
echo "tests rc=$?" >> "$D/gpu_tests.txt"
date -u >> "$D/env.txt"
grep -E "passed|failed" "$D/gpu_tests.txt" | tail -2
grep -E "FAILED|ERROR" "$D/gpu_tests.txt" | head -20
tail -4 "$D/kbench_stdout.txt"
(cd "$OUT" && tar czf recorded_kb.tgz recorded_kb && rm -rf recorded_kb)
