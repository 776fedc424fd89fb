#!/usr/bin/env bash
# The KernelBench judge's exploit suite on a CUDA GPU (about 2-3 minutes on one H200).
#
#   OUT=DIR bash benchmarks/gpu_kbench.sh
#
# From the root of a checkout with PYTHONPATH=$PWD. Writes under $OUT/kbench/:
#   exploits_gpu.md/.json  every exploit of tests/kernelbench/data/exploits/ judged with
#                          --device cuda (side_stream included), its verdict and reason
#   control.json           correct candidates (softmax, relu, ReLU refusing strided inputs)
#                          judged on the GPU: they must pass (the last one on official
#                          inputs only)
#   backward.json          a linear layer's own backward, right and with the weight's
#                          gradient dropped: pass and FAIL (grad linear.weight)
#   tests.log              the GPU-marked exploit tests (pytest -m gpu): each must FAIL
#   times.txt              seconds per part
# Without a CUDA device it says so and exits 0.
set -uo pipefail
OUT=${OUT:-${1:-results_gpu}}
mkdir -p "$OUT/kbench"
D=tests/kernelbench/data
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "no CUDA device: the GPU exploit suite is skipped" | tee "$OUT/kbench/times.txt"
  exit 0
fi
start=$(date +%s)
python3 -m benchmarks.kernelbench.exploits --device cuda --examples 3 \
  --out "$OUT/kbench/exploits_gpu.md" > "$OUT/kbench/exploits_gpu.log" 2>&1 &
timeout 200 python3 -m pytest tests/kernelbench/test_exploits.py -m gpu -q -n 4 -rA \
  -p no:cacheprovider > "$OUT/kbench/tests.log" 2>&1 &
( timeout 200 python3 -m numoracle kernelbench $D/problems/softmax.py \
    $D/candidates/softmax_correct.py --device cuda --examples 4 \
    --report "$OUT/kbench/control_softmax.json"
  timeout 200 python3 -m numoracle kernelbench $D/problems/relu.py \
    $D/candidates/relu_correct.py $D/candidates/relu_contiguous_only.py --device cuda \
    --examples 8 --report "$OUT/kbench/control.json"
  timeout 200 python3 -m numoracle kernelbench $D/problems/gemm_gelu.py \
    $D/candidates/gemm_gelu_custom_backward.py $D/candidates/gemm_gelu_weight_grad_zero.py \
    --device cuda --examples 6 --report "$OUT/kbench/backward.json"
) > "$OUT/kbench/control.log" 2>&1 &
wait
echo "exploits, tests and controls: $(( $(date +%s) - start )) s" >> "$OUT/kbench/times.txt"
tail -3 "$OUT/kbench/tests.log"
cat "$OUT/kbench/exploits_gpu.md" 2>/dev/null
