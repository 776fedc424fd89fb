#!/usr/bin/env bash
# The hand-written linear backward's reference on a GPU at a small and a large size: the
# GPU-marked tests of what its contractions run (the float64 value GEMM through cuBLAS's
# binding, the TF32 magnitude sums on CuPy and on torch's tensors, the sum over the batch
# rounded in its own pass), then its time against torch float64 (sums on the tensor
# cores, the default) at 128x1024x1024 and 4096x8192x8192, then the small reference
# under cProfile: Python calls per reference (the package's, CuPy's, compiled ones)
# and the host's time per call of what one contraction launches.
#
#   bash benchmarks/gpu_small_linear.sh OUT
#
# From the root of a checkout, on a machine with a CUDA GPU, torch and cupy. Writes
# OUT/small_linear/env.txt, tests.log, speed.{json,log}, profile.{json,log} and
# summary.md. About 2 minutes: the tests under TEST_LIMIT (70 s), the speed run under
# 40 s, the profile under 25 s.
set -uo pipefail
OUT=${1:-${OUT:?usage: bash benchmarks/gpu_small_linear.sh OUT}}
cd "$(dirname "$0")/.."
D="$OUT/small_linear"
mkdir -p "$D"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
TEST_LIMIT=${TEST_LIMIT:-70}
bash benchmarks/gpu_env.sh > "$D/env.txt"
t0=$(date +%s)
timeout "$TEST_LIMIT" python3 -m pytest tests/oracle/test_tensor_sums.py \
    tests/oracle/test_gpu_reference.py::test_gpu_reference_matches_the_host \
    tests/oracle/test_fused.py tests/oracle/test_ops_namespaces.py \
    -m gpu -k "not test_a_hand_written_op_on_cupy or linear or matmul or conv2d" \
    -v -rA -n 8 -p no:cacheprovider -o addopts="" > "$D/tests.log" 2>&1
echo "tests exit $? ($(( $(date +%s) - t0 )) s)" >> "$D/env.txt"
t0=$(date +%s)
timeout 40 python3 -m benchmarks speed --device gpu --no-sweep --repeats 5 --plain torch \
    --fp64-max-elements 0 --linear 128,1024,1024 --linear 4096,8192,8192 \
    --out "$D/speed.json" > "$D/speed.log" 2>&1
echo "speed exit $? ($(( $(date +%s) - t0 )) s)" >> "$D/env.txt"
t0=$(date +%s)
timeout 25 python3 -m benchmarks gpu_sums --shape 128,1024,1024 --profile 128,1024,1024 \
    --out "$D/profile.json" > "$D/profile.log" 2>&1
echo "profile exit $? ($(( $(date +%s) - t0 )) s)" >> "$D/env.txt"
python3 - "$D" <<'EOF' > "$D/summary.md" 2>&1
import json, sys
from pathlib import Path

d = Path(sys.argv[1])
print("| shape | oracle s | torch float64 s | ratio | to torch autograd |")
print("|---|---|---|---|---|")
path = d / "speed.json"
for r in (json.loads(path.read_text()).get("linear", []) if path.exists() else []):
    print(f"| {'x'.join(map(str, r['shape']))} | {r['oracle_s']:.5f} | {r['plain_float64_s']:.5f} "
          f"| {r['ratio']:.2f} | {r.get('ratio_to_torch_autograd', float('nan')):.2f} |")
path = d / "profile.json"
p = json.loads(path.read_text()).get("profile", {}) if path.exists() else {}
if "per_call_s" in p:
    print(f"\nlinear {p['shape']} reference: {p['per_call_s'] * 1e3:.3f} ms per call, "
          f"host {p['host_s'] * 1e3:.3f} ms; Python calls per reference "
          f"{json.dumps(p.get('calls_per_reference'))}")
    print("host time per call (us): " + ", ".join(
        f"{k} {v * 1e6:.1f}" if isinstance(v, float) else f"{k} {v}"
        for k, v in p.get("host_costs_s", {}).items()))
EOF
cat "$D/env.txt" "$D/summary.md"
grep -E "^(FAILED|ERROR)|passed|failed" "$D/tests.log" | tail -15
