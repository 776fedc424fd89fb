#!/usr/bin/env bash
# The hand-written linear backward's reference on a GPU at a small and a large size: the
# GPU-marked tests of what its contractions run (the float64 value GEMM through cuBLAS's
# binding, the TF32 magnitude sums on CuPy and on torch's tensors, the sum over the batch
# rounded in its own pass), then its time against torch float64 (sums on the tensor
# cores, the default) at 128x1024x1024 and 4096x8192x8192, then the small reference
# under cProfile on CuPy's arrays and on torch's CUDA tensors (torch's namespace, its
# exact contractions' tensor passes; the GPU-marked test of test_fused_torch.py checks
# their bits against the general path there): Python calls per reference (the
# package's, CuPy's, torch's, compiled ones), its time alone against torch float64's,
# and on CuPy the host's time per call of what one contraction launches.
#
#   bash benchmarks/gpu_small_linear.sh OUT
#
# From the root of a checkout, on a machine with a CUDA GPU, torch and cupy. Writes
# OUT/small_linear/env.txt, tests.log, speed.{json,log}, profile.{json,log} and
# summary.md. At most 2 minutes: the tests under TEST_LIMIT (60 s), the speed run under
# 30 s (17 s before), the profiles under 28 s (8 s before for CuPy's alone).
set -uo pipefail
OUT=${1:-${OUT:?usage: bash benchmarks/gpu_small_linear.sh OUT}}
cd "$(dirname "$0")/.."
D="$OUT/small_linear"
mkdir -p "$D"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
TEST_LIMIT=${TEST_LIMIT:-60}
bash benchmarks/gpu_env.sh > "$D/env.txt"
t0=$(date +%s)
timeout "$TEST_LIMIT" python3 -m pytest tests/oracle/test_tensor_sums.py \
    tests/oracle/test_gpu_reference.py::test_gpu_reference_matches_the_host \
    tests/oracle/test_fused.py tests/oracle/test_ops_namespaces.py tests/oracle/test_fused_torch.py \
    -m gpu -k "not test_a_hand_written_op_on_cupy or linear or matmul or conv2d or passes" \
    -v -rA -n 8 -p no:cacheprovider -o addopts="" > "$D/tests.log" 2>&1
echo "tests exit $? ($(( $(date +%s) - t0 )) s)" >> "$D/env.txt"
t0=$(date +%s)
timeout 30 python3 -m benchmarks speed --device gpu --no-sweep --repeats 5 --plain torch \
    --fp64-max-elements 0 --linear 128,1024,1024 --linear 4096,8192,8192 \
    --out "$D/speed.json" > "$D/speed.log" 2>&1
echo "speed exit $? ($(( $(date +%s) - t0 )) s)" >> "$D/env.txt"
t0=$(date +%s)
timeout 28 python3 -m benchmarks gpu_sums --shape 128,1024,1024 --profile 128,1024,1024 \
    --profile-namespace cupy --profile-namespace torch \
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
ps = json.loads(path.read_text()).get("profiles", []) if path.exists() else []
for p in ps:
    print(f"\nlinear {p['shape']} reference on {p.get('namespace', 'cupy')}: "
          f"{p['per_call_s'] * 1e3:.3f} ms per call back to back, host {p['host_s'] * 1e3:.3f} ms; "
          f"alone {p['alone_s'] * 1e3:.3f} ms (after torch's ops "
          f"{p['alone_after_torch_s'] * 1e3:.3f} ms) against torch float64's "
          f"{p['torch_float64_alone_s'] * 1e3:.3f} ms ({p['ratio_alone']:.2f}x); Python calls "
          f"per reference {json.dumps(p.get('calls_per_reference'))}")
    if p.get("host_costs_s"):
        print("host time per call (us): " + ", ".join(
            f"{k} {v * 1e6:.1f}" if isinstance(v, float) else f"{k} {v}"
            for k, v in p["host_costs_s"].items()))
EOF
cat "$D/env.txt" "$D/summary.md"
grep -E "^(FAILED|ERROR)|passed|failed" "$D/tests.log" | tail -15
