#!/usr/bin/env bash
# The candidate's process drawing a KernelBench case's inputs itself on the GPU
# (NUMORACLE_KERNELBENCH_DRAWS=device, numoracle/kernelbench/draws.py): the GPU-marked
# tests of tests/kernelbench/test_draws.py (fingerprints on the device equal the host's,
# bit for bit; a correct candidate passes and a wrong one fails through the path), then
# benchmarks.kernelbench.candidate_draws on official problems at a 2 GiB float64 floor:
# bytes handed to the candidate and seconds, inputs handed over against drawn again.
#
#   bash benchmarks/gpu_kb_candidate_draws.sh OUT
#
# From the root of a checkout, on a machine with a CUDA GPU and torch; KernelBench's
# problems in KB (default .kernelbench/current; the benchmark is skipped without them).
# The oracle in torch's namespace throughout (no CuPy kernels to compile first). Writes
# OUT/kb_candidate_draws/env.txt, tests.log, draws.log, draws.json. About 2 minutes at
# most: the tests under TEST_LIMIT (100 s), the benchmark under DRAWS_LIMIT (65 s).
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_kb_candidate_draws.sh OUT}
cd "$(dirname "$0")/.."
R="$OUT/kb_candidate_draws"
mkdir -p "$R"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
TEST_LIMIT=${TEST_LIMIT:-100}
DRAWS_LIMIT=${DRAWS_LIMIT:-65}
KB=${KB:-.kernelbench/current}
bash benchmarks/gpu_env.sh > "$R/env.txt"
start=$SECONDS
NUMORACLE_GPU_NAMESPACE=torch timeout "$TEST_LIMIT" \
    python3 -m pytest tests/kernelbench/test_draws.py -m gpu -rA \
    --tb=short -n 0 -p no:cacheprovider -o addopts="" > "$R/tests.log" 2>&1
echo "tests exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
if [ -d "$KB/level1" ]; then
    start=$SECONDS
    NUMORACLE_GPU_NAMESPACE=torch timeout "$DRAWS_LIMIT" \
        python3 -m benchmarks.kernelbench.candidate_draws --device cuda --repeat 1 \
        --elements $(( 1 << 28 )) --out "$R/draws.json" \
        --problems "$KB/level1/47_Sum_reduction_over_a_dimension.py" "$KB/level1/19_ReLU.py" \
        > "$R/draws.log" 2>&1
    echo "candidate_draws exit $? after $(( SECONDS - start )) s" >> "$R/env.txt"
else
    echo "no KernelBench problems in $KB: candidate_draws skipped" >> "$R/env.txt"
fi
cat "$R/env.txt"
grep -E "(passed|failed|error)( |$)" "$R/tests.log" | tail -3
grep '^{' "$R/draws.log" 2>/dev/null
