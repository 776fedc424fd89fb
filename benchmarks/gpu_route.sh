#!/usr/bin/env bash
# Where a GPU's references are evaluated: CuPy where it works, else torch's namespace
# (numoracle.oracle.xp.gpu_namespace). The GPU-marked tests of the rules in both namespaces
# against NumPy, of the fused kernels, of the hand-written ops on CuPy and of the
# KernelBench judge on the device (each test's result listed); then where the time of six
# traced rows goes under cProfile, in CuPy (the default) and in torch's namespace (whose
# host-device synchronisations torch's sync debug mode counts); then the traced oracle's
# cost per case against torch float64 eager (benchmarks/traced/table.py).
#
#   bash benchmarks/gpu_route.sh OUT
#
# From the root of a checkout, on a machine with a CUDA GPU, torch and cupy. Writes
# OUT/route/env.txt, tests.log, profile.md, profile.log, torch/profile.md, table.md,
# table.json, table.log. About 4 minutes: the tests under TEST_LIMIT (110 s), the profiles
# under PROFILE_LIMIT (40 s each), the table under TABLE_BUDGET (60 s of rows; a row that
# would start later is skipped and says so).
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_route.sh OUT}
cd "$(dirname "$0")/.."
mkdir -p "$OUT/route/torch"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
TEST_LIMIT=${TEST_LIMIT:-110}
PROFILE_LIMIT=${PROFILE_LIMIT:-40}
TABLE_BUDGET=${TABLE_BUDGET:-60}
ROWS=softmax:small:fwd,softmax:realistic:fwd,layer_norm:realistic:bwd,cross_entropy:realistic:fwd,mlp:realistic:bwd,attention:realistic:fwd
R="$OUT/route"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$R/env.txt" 2>&1
python3 -c "import torch, numpy, cupy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'numpy', numpy.__version__, 'cupy', cupy.__version__)" >> "$R/env.txt" 2>&1
python3 -c "from numoracle.oracle.xp import gpu_namespace, keeps_subnormals; xp = gpu_namespace(); print('gpu namespace', getattr(xp, '__name__', xp), 'keeps subnormals', keeps_subnormals(xp))" >> "$R/env.txt" 2>&1
git rev-parse HEAD >> "$R/env.txt" 2>&1
start=$SECONDS
timeout "$TEST_LIMIT" python3 -m pytest tests/oracle/traced/test_rules_backends.py \
    tests/oracle/test_fused.py tests/oracle/test_ops_namespaces.py \
    tests/kernelbench/test_device_oracle.py -m gpu -q -rA -n 8 \
    -p no:cacheprovider -o addopts="" > "$R/tests.log" 2>&1
echo "tests exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
start=$SECONDS
timeout "$PROFILE_LIMIT" python3 -m benchmarks.traced.profile --device cuda --out "$R" \
    --rows "$ROWS" --top 20 > "$R/profile.log" 2>&1
echo "profile (default namespace) exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
start=$SECONDS
NUMORACLE_GPU_NAMESPACE=torch timeout "$PROFILE_LIMIT" python3 -m benchmarks.traced.profile \
    --device cuda --out "$R/torch" --rows "$ROWS" --top 10 >> "$R/profile.log" 2>&1
echo "profile (torch's namespace) exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
start=$SECONDS
timeout $(( TABLE_BUDGET + 30 )) python3 -m benchmarks.traced.table --device cuda \
    --out "$R" --budget "$TABLE_BUDGET" --repeats 3 > "$R/table.log" 2>&1
echo "table exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
grep -E "passed|failed" "$R/tests.log" | tail -2
grep "^## " "$R/profile.md" "$R/torch/profile.md"
cat "$R/table.md"
