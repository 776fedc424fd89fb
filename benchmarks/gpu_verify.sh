#!/usr/bin/env bash
# The traced oracle's device paths on a GPU, in one call: the GPU-marked tests of every
# rule in both namespaces, the fused and whole-rule kernels, the hand-written ops on
# CuPy, the GPU reference and the KernelBench device oracle, each test's result listed
# (-rA, short tracebacks), first with the defaults (every device kernel on), then with the
# row sums' and layer norm's kernels off (NUMORACLE_DEVICE_ROW_SUMS=0
# NUMORACLE_DEVICE_NORM=0: the primitives' kernels); then the traced oracle's cost per
# case against torch float64 eager (benchmarks/traced/table.py) in CuPy, both ways.
#
#   bash benchmarks/gpu_verify.sh OUT
#
# From the root of a checkout, on a machine with a CUDA GPU, torch, cupy and g++.
# Writes OUT/verify/env.txt, defaults.log, kernels_off.log, defaults/table.{md,json},
# kernels_off/table.{md,json}, table.log. About 9 minutes at most: each test run under
# TEST_LIMIT (200 s: the first calls compile numba's loops, the host builds and the
# kernels in each of 8 workers), each table under TABLE_BUDGET (35 s of rows) plus 40 s.
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_verify.sh OUT}
cd "$(dirname "$0")/.."
R="$OUT/verify"
mkdir -p "$R/defaults" "$R/kernels_off"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
TEST_LIMIT=${TEST_LIMIT:-200}
TABLE_BUDGET=${TABLE_BUDGET:-35}
FILES=(tests/oracle/traced/test_rules_backends.py tests/oracle/test_fused.py
       tests/oracle/test_ops_namespaces.py tests/kernelbench/test_device_oracle.py
       tests/oracle/test_gpu_reference.py tests/oracle/test_tensor_sums.py
       tests/oracle/traced/test_softmax_rows_device.py tests/oracle/traced/test_row_sums_device.py
       tests/oracle/traced/test_norm_rows_device.py)
bash benchmarks/gpu_env.sh > "$R/env.txt"
unset NUMORACLE_DEVICE_ROWS NUMORACLE_DEVICE_ROW_SUMS NUMORACLE_DEVICE_NORM
for mode in defaults kernels_off; do
    flags=()
    [ "$mode" = kernels_off ] && flags=(NUMORACLE_DEVICE_ROW_SUMS=0 NUMORACLE_DEVICE_NORM=0)
    start=$SECONDS
    env "${flags[@]}" timeout "$TEST_LIMIT" python3 -m pytest "${FILES[@]}" -m gpu -v -rA \
        --tb=short -n 8 -p no:cacheprovider -o addopts="" > "$R/$mode.log" 2>&1
    echo "tests ($mode) exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
done
for mode in defaults kernels_off; do
    flags=()
    [ "$mode" = kernels_off ] && flags=(NUMORACLE_DEVICE_ROW_SUMS=0 NUMORACLE_DEVICE_NORM=0)
    start=$SECONDS
    env "${flags[@]}" NUMORACLE_GPU_NAMESPACE=cupy timeout $(( TABLE_BUDGET + 40 )) \
        python3 -m benchmarks.traced.table --device cuda --out "$R/$mode" \
        --budget "$TABLE_BUDGET" --repeats 3 >> "$R/table.log" 2>&1
    echo "table ($mode) exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
done
cat "$R/env.txt"
grep -hE "^(FAILED|ERROR)|passed|failed" "$R/defaults.log" "$R/kernels_off.log" | tail -40
cat "$R/defaults/table.md" "$R/kernels_off/table.md" 2>/dev/null
