#!/usr/bin/env bash
# The softmax family's whole-rule kernels on CuPy (numoracle/oracle/fused_cuda.py; on by
# default, switched off by NUMORACLE_DEVICE_ROWS=0): their GPU-marked tests (each kernel against the host's
# build of the same C text, bit for bit where it computes no exponential; each rule within
# the oracle's own error of the NumPy path and of CuPy's primitives), then the traced
# oracle's cost per case against torch float64 eager for softmax, attention and
# cross-entropy at their realistic sizes (benchmarks/traced/table.py) in CuPy with the
# kernels on and off, the rules alone on and off (benchmarks/traced/rows_device.py), and
# where the time of the softmax row goes with them on (benchmarks/traced/profile.py).
#
#   bash benchmarks/gpu_rows.sh OUT
#
# From the root of a checkout, on a machine with a CUDA GPU, torch, cupy and g++. Writes
# OUT/rows/env.txt, tests.log, rules.md, rules.json, table.log, on/table.md, on/table.json,
# on/profile.md, off/table.md, off/table.json. About 3 minutes: the tests under TEST_LIMIT
# (70 s), the rules under RULES_LIMIT (30 s), each table under TABLE_BUDGET (20 s of rows; a
# row that would start later is skipped and says so), the profile under PROFILE_LIMIT (20 s).
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_rows.sh OUT}
cd "$(dirname "$0")/.."
R="$OUT/rows"
mkdir -p "$R/on" "$R/off"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
TEST_LIMIT=${TEST_LIMIT:-70}
RULES_LIMIT=${RULES_LIMIT:-30}
TABLE_BUDGET=${TABLE_BUDGET:-20}
PROFILE_LIMIT=${PROFILE_LIMIT:-20}
bash benchmarks/gpu_env.sh > "$R/env.txt"
start=$SECONDS
timeout "$TEST_LIMIT" python3 -m pytest tests/oracle/traced/test_softmax_rows_device.py \
    -m gpu -v --tb=short -n 4 -p no:cacheprovider -o addopts="" > "$R/tests.log" 2>&1
echo "tests exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
start=$SECONDS
NUMORACLE_GPU_NAMESPACE=cupy timeout "$RULES_LIMIT" python3 -m benchmarks.traced.rows_device \
    --out "$R" > "$R/rules.log" 2>&1
echo "rules exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
for sw in 1 0; do
    dir="$R/on"; [ "$sw" = 0 ] && dir="$R/off"
    start=$SECONDS
    NUMORACLE_GPU_NAMESPACE=cupy NUMORACLE_DEVICE_ROWS=$sw timeout $(( TABLE_BUDGET + 20 )) \
        python3 -m benchmarks.traced.table --device cuda --out "$dir" \
        --only softmax,attention,cross_entropy --sizes realistic --budget "$TABLE_BUDGET" \
        --repeats 3 \
        >> "$R/table.log" 2>&1
    echo "table (NUMORACLE_DEVICE_ROWS=$sw) exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
done
start=$SECONDS
NUMORACLE_GPU_NAMESPACE=cupy NUMORACLE_DEVICE_ROWS=1 timeout "$PROFILE_LIMIT" \
    python3 -m benchmarks.traced.profile --device cuda --out "$R/on" \
    --rows softmax:realistic:fwd --top 20 > "$R/profile.log" 2>&1
echo "profile exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
cat "$R/env.txt"
grep -E "(passed|failed|error)( |$)" "$R/tests.log" | tail -3
cat "$R/rules.md" "$R/on/table.md" "$R/off/table.md"
