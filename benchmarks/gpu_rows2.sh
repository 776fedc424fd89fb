#!/usr/bin/env bash
# The softmax family's device kernels (on by default) and the tracked row sum's two
# kernels (numoracle/oracle/_rows_cuda.py: ROW_SUM, ROW_SUM_RADII, taken by tracked.sum_
# over the last axis on CuPy with NUMORACLE_DEVICE_ROW_SUMS=1, set here): their
# GPU-marked tests (each kernel against the host's build of the same C text; each rule
# and each sum within the oracle's own error of the NumPy path), the GPU-marked tests of
# every rule and hand-written op on CuPy, the fused kernels, the GPU reference and the
# GPU zoo (their last-axis sums then take the kernels), the rules alone and the traced
# oracle's cost per case against torch float64 eager for softmax, attention and
# cross-entropy at their realistic sizes with the kernels on and off, and attention's and
# softmax's time node by node with them on and off in one process
# (benchmarks/traced/node_times.py).
#
#   bash benchmarks/gpu_rows2.sh OUT
#
# From the root of a checkout, on a machine with a CUDA GPU, torch, cupy and g++. Writes
# OUT/rows2/env.txt, tests.log, route.log, rules.md, rules.json, rules.log, table.log,
# on/table.md, on/table.json, off/table.md, off/table.json, node_times.md,
# node_times.json, node.log. About 2 minutes: each part under its limit (the two test
# runs 50 s side by side, the rules 18 s, each table 22 s, the nodes 25 s; 140 s at most).
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_rows2.sh OUT}
cd "$(dirname "$0")/.."
R="$OUT/rows2"
mkdir -p "$R/on" "$R/off"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 NUMORACLE_GPU_NAMESPACE=cupy
unset NUMORACLE_DEVICE_ROWS  # (the default: on)
export NUMORACLE_DEVICE_ROW_SUMS=1  # (off by default)
bash benchmarks/gpu_env.sh > "$R/env.txt"
run() {  # run NAME LIMIT LOG COMMAND...: the command under its limit, its exit and seconds noted
    local name=$1 limit=$2 log=$3 start=$SECONDS
    shift 3
    timeout "$limit" "$@" >> "$log" 2>&1
    echo "$name exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
}
# (the two test runs side by side, eight workers each; the timings after them, alone)
run tests 50 "$R/tests.log" python3 -m pytest tests/oracle/traced/test_row_sums_device.py \
    tests/oracle/traced/test_softmax_rows_device.py -m gpu -v -rA --tb=short -n 8 \
    -p no:cacheprovider -o addopts="" &
run route 50 "$R/route.log" python3 -m pytest tests/oracle/traced/test_rules_backends.py \
    tests/oracle/test_ops_namespaces.py tests/oracle/test_gpu_zoo.py tests/oracle/test_fused.py \
    tests/oracle/test_gpu_reference.py -m gpu -k "cupy or mutant or test_gpu_ or on_the_gpu" \
    -v -rfE --tb=short -n 8 \
    -p no:cacheprovider -o addopts="" &
wait
run rules 18 "$R/rules.log" python3 -m benchmarks.traced.rows_device --out "$R" --repeats 5
for sw in 1 0; do
    dir="$R/on"; [ "$sw" = 0 ] && dir="$R/off"
    run "table (NUMORACLE_DEVICE_ROWS=$sw)" 22 "$R/table.log" env NUMORACLE_DEVICE_ROWS=$sw \
        python3 -m benchmarks.traced.table --device cuda --out "$dir" \
        --only softmax,attention,cross_entropy --sizes realistic --budget 15 --repeats 3
done
run nodes 25 "$R/node.log" python3 -m benchmarks.traced.node_times --out "$R" \
    --rows attention:realistic:bwd --repeats 3
cat "$R/env.txt"
grep -E "(passed|failed|error)( |$)" "$R/tests.log" "$R/route.log" | tail -4
cat "$R/rules.md" "$R/on/table.md" "$R/off/table.md" "$R/node_times.md" 2>/dev/null
