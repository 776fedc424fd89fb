#!/usr/bin/env bash
# Layer norm's whole-rule kernels on CuPy (numoracle/oracle/fused_norm_cuda.py; on with
# NUMORACLE_DEVICE_NORM=1 beside the softmax family's NUMORACLE_DEVICE_ROWS): their
# GPU-marked tests (each kernel against the host's build of the same C text, bit for bit;
# the rules on CuPy against CuPy's primitives, bit for bit, and within the oracle's own error of the NumPy path), then the traced oracle's cost
# per case against torch float64 eager for layer norm at its realistic size
# (benchmarks/traced/table.py) in CuPy with the kernels on and off, and where the time of
# the forward+backward goes with them on (benchmarks/traced/profile.py).
#
#   bash benchmarks/gpu_norm.sh OUT
#
# From the root of a checkout, on a machine with a CUDA GPU, torch, cupy, numba and g++.
# Writes OUT/norm/env.txt, tests.log, table.log, profile.log, on/table.md, on/table.json,
# on/profile.md, off/table.md, off/table.json. About 3 minutes at most: the tests under
# TEST_LIMIT (80 s; a first call compiles numba's loops, the host build and the kernels),
# each table under TABLE_BUDGET (10 s of rows) plus 30 s (torch, CuPy, the capture), the
# profile under PROFILE_LIMIT (30 s).
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_norm.sh OUT}
cd "$(dirname "$0")/.."
R="$OUT/norm"
mkdir -p "$R/on" "$R/off"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
TEST_LIMIT=${TEST_LIMIT:-80}
TABLE_BUDGET=${TABLE_BUDGET:-10}
PROFILE_LIMIT=${PROFILE_LIMIT:-30}
bash benchmarks/gpu_env.sh > "$R/env.txt"
start=$SECONDS
timeout "$TEST_LIMIT" python3 -m pytest tests/oracle/traced/test_norm_rows_device.py \
    -m gpu -rA --tb=short -n 4 -p no:cacheprovider -o addopts="" > "$R/tests.log" 2>&1
echo "tests exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
for sw in 1 0; do
    dir="$R/on"; [ "$sw" = 0 ] && dir="$R/off"
    start=$SECONDS
    NUMORACLE_GPU_NAMESPACE=cupy NUMORACLE_DEVICE_ROWS=$sw NUMORACLE_DEVICE_NORM=$sw \
        timeout $(( TABLE_BUDGET + 30 )) \
        python3 -m benchmarks.traced.table --device cuda --out "$dir" --only layer_norm \
        --sizes realistic --budget "$TABLE_BUDGET" --repeats 3 >> "$R/table.log" 2>&1
    echo "table (NUMORACLE_DEVICE_ROWS=$sw NUMORACLE_DEVICE_NORM=$sw) exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
done
start=$SECONDS
NUMORACLE_GPU_NAMESPACE=cupy NUMORACLE_DEVICE_ROWS=1 NUMORACLE_DEVICE_NORM=1 timeout "$PROFILE_LIMIT" \
    python3 -m benchmarks.traced.profile --device cuda --out "$R/on" \
    --rows layer_norm:realistic:bwd --top 25 > "$R/profile.log" 2>&1
echo "profile exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
cat "$R/env.txt"
grep -E "(passed|failed|error)( |$)" "$R/tests.log" | tail -3
cat "$R/on/table.md" "$R/off/table.md"
