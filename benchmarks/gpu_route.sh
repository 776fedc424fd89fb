#!/usr/bin/env bash
# Where a GPU's references are evaluated: torch's namespace or CuPy
# (numoracle.oracle.xp.gpu_namespace; NUMORACLE_GPU_NAMESPACE chooses). The GPU-marked tests
# of the rules in both namespaces against NumPy, of the fused kernels, of the hand-written
# ops on CuPy and of the KernelBench judge on the device in both (each test's result
# listed); then where the time of six traced rows goes under cProfile, in CuPy and in
# torch's namespace (whose host-device synchronisations torch's sync debug mode counts);
# then the traced oracle's cost per case against torch float64 eager
# (benchmarks/traced/table.py), in CuPy and in torch's namespace.
#
#   bash benchmarks/gpu_route.sh OUT
#
# From the root of a checkout, on a machine with a CUDA GPU, torch and cupy. Writes
# OUT/route/env.txt, tests.log, profile.md, profile.log, table.md, table.json, table.log
# (CuPy) and OUT/route/torch/profile.md, table.md, table.json (torch's namespace). About 4
# minutes: the tests under TEST_LIMIT (110 s), the profiles under PROFILE_LIMIT (35 s each),
# each table under TABLE_BUDGET (35 s of rows; a row that would start later is skipped and
# says so).
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_route.sh OUT}
cd "$(dirname "$0")/.."
mkdir -p "$OUT/route/torch"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
TEST_LIMIT=${TEST_LIMIT:-110}
PROFILE_LIMIT=${PROFILE_LIMIT:-35}
TABLE_BUDGET=${TABLE_BUDGET:-35}
ROWS=softmax:small:fwd,softmax:realistic:fwd,layer_norm:realistic:bwd,cross_entropy:realistic:fwd,mlp:realistic:bwd,attention:realistic:fwd
R="$OUT/route"
bash benchmarks/gpu_env.sh > "$R/env.txt"
NUMORACLE_GPU_NAMESPACE=cupy python3 -c "from numoracle.oracle.xp import gpu_namespace, keeps_subnormals; xp = gpu_namespace(); print('cupy works', getattr(xp, '__name__', xp), 'keeps subnormals', keeps_subnormals(xp))" >> "$R/env.txt" 2>&1
start=$SECONDS
timeout "$TEST_LIMIT" python3 -m pytest tests/oracle/traced/test_rules_backends.py \
    tests/oracle/test_fused.py tests/oracle/test_ops_namespaces.py \
    tests/kernelbench/test_device_oracle.py -m gpu -q -rA -n 8 \
    -p no:cacheprovider -o addopts="" > "$R/tests.log" 2>&1
echo "tests exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
for ns in cupy torch; do
    dir="$R"; [ "$ns" = torch ] && dir="$R/torch"
    start=$SECONDS
    NUMORACLE_GPU_NAMESPACE=$ns timeout "$PROFILE_LIMIT" python3 -m benchmarks.traced.profile \
        --device cuda --out "$dir" --rows "$ROWS" --top 15 >> "$R/profile.log" 2>&1
    echo "profile ($ns) exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
done
for ns in cupy torch; do
    dir="$R"; [ "$ns" = torch ] && dir="$R/torch"
    start=$SECONDS
    NUMORACLE_GPU_NAMESPACE=$ns timeout $(( TABLE_BUDGET + 25 )) python3 -m benchmarks.traced.table \
        --device cuda --out "$dir" --budget "$TABLE_BUDGET" --repeats 3 >> "$R/table.log" 2>&1
    echo "table ($ns) exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
done
grep -E "passed|failed" "$R/tests.log" | tail -2
grep "^## " "$R/profile.md" "$R/torch/profile.md"
cat "$R/table.md" "$R/torch/table.md"
