#!/usr/bin/env bash
# Magnitude sums on the tensor cores (numoracle.oracle.tensor_sums): the GPU-marked tests
# of the TF32 path and of the kernels it changed, the sums' time and tightness
# (benchmarks gpu_sums: float64, float32, one TF32 GEMM, the package's chunked TF32 path;
# the small linear reference's time on the host and under cProfile, sums on), then the
# hand-written linear backward against torch float64 with the sums in float64
# (NUMORACLE_SINGLE_SUMS=0) and on the tensor cores (=1), one after the other in one run.
#
#   bash benchmarks/gpu_tf32.sh OUT
#
# From the root of a checkout, on a machine with a CUDA GPU, torch and cupy. Writes
# OUT/tf32/env.txt, tests.log, gpu_sums.{json,log}, speed_off.{json,log},
# speed_on.{json,log} and summary.md. About 3.5 minutes: the tests under TEST_LIMIT (90 s),
# the sums under 40 s, each speed run under SPEED_LIMIT (45 s).
set -uo pipefail
OUT=${1:-${OUT:?usage: bash benchmarks/gpu_tf32.sh OUT}}
cd "$(dirname "$0")/.."
D="$OUT/tf32"
mkdir -p "$D"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
TEST_LIMIT=${TEST_LIMIT:-90}
SPEED_LIMIT=${SPEED_LIMIT:-45}
bash benchmarks/gpu_env.sh > "$D/env.txt"
t0=$(date +%s)
timeout "$TEST_LIMIT" python3 -m pytest tests/oracle/test_tensor_sums.py tests/oracle/test_fused.py \
    tests/oracle/test_gpu_reference.py tests/oracle/test_ops_namespaces.py -m gpu -q -n 4 -p no:cacheprovider -o addopts="" \
    > "$D/tests.log" 2>&1
echo "tests exit $? ($(( $(date +%s) - t0 )) s)" >> "$D/env.txt"
t0=$(date +%s)
timeout 40 python3 -m benchmarks gpu_sums --shape 4096,8192,8192 --shape 1024,4096,4096 \
    --shape 128,1024,1024 --profile 128,1024,1024 --out "$D/gpu_sums.json" \
    > "$D/gpu_sums.log" 2>&1
echo "gpu_sums exit $? ($(( $(date +%s) - t0 )) s)" >> "$D/env.txt"
for sw in off on; do
  t0=$(date +%s)
  NUMORACLE_SINGLE_SUMS=$([ "$sw" = on ] && echo 1 || echo 0) timeout "$SPEED_LIMIT" \
    python3 -m benchmarks speed --device gpu --no-sweep --repeats 5 --plain torch \
    --fp64-max-elements 0 --linear 128,1024,1024 --linear 4096,8192,8192 \
    --out "$D/speed_$sw.json" > "$D/speed_$sw.log" 2>&1
  echo "speed $sw exit $? ($(( $(date +%s) - t0 )) s)" >> "$D/env.txt"
done
python3 - "$D" <<'EOF' > "$D/summary.md" 2>&1
import json, sys
from pathlib import Path

d = Path(sys.argv[1])
print("| shape | sums | oracle s | torch float64 s | ratio | to torch autograd |")
print("|---|---|---|---|---|---|")
for sw in ("off", "on"):
    path = d / f"speed_{sw}.json"
    if not path.exists():
        print(f"| - | {sw} | missing | | | |")
        continue
    for r in json.loads(path.read_text()).get("linear", []):
        print(f"| {'x'.join(map(str, r['shape']))} | {'TF32' if sw == 'on' else 'float64'} "
              f"| {r['oracle_s']:.5f} | {r['plain_float64_s']:.5f} | {r['ratio']:.2f} "
              f"| {r.get('ratio_to_torch_autograd', float('nan')):.2f} |")
path = d / "gpu_sums.json"
if path.exists():
    res = json.loads(path.read_text())
    print("\n| shape | float64 s | TF32 one GEMM s | package s | package min..max ratio |")
    print("|---|---|---|---|---|")
    nan = float("nan")
    for r in res.get("sums", []):
        print(f"| {'x'.join(map(str, r['shape']))} | {r.get('float64_s', nan):.6f} "
              f"| {r.get('tf32_s', nan):.6f} | {r.get('package_s', nan):.6f} "
              f"| {r.get('package_min_ratio', nan):.6f}..{r.get('package_max_ratio', nan):.6f} |")
    p = res.get("profile")
    if p and "per_call_s" in p:
        print(f"\nlinear {p['shape']} reference, sums on: {p['per_call_s'] * 1e3:.3f} ms per call, "
              f"host {p['host_s'] * 1e3:.3f} ms")
EOF
cat "$D/env.txt" "$D/summary.md"
tail -3 "$D/tests.log"
