#!/usr/bin/env bash
# The error-tracking core on a GPU: the traced rules in torch's namespace on CUDA
# compared with NumPy, and a case given CuPy inputs evaluated there (the GPU-marked tests of
# tests/oracle/traced/test_rules_backends.py, and the one-kernel forms of
# tests/oracle/test_fused.py), then the traced oracle's cost per case against torch
# float64 eager on the same GPU (benchmarks/traced/table.py: six references, small and
# realistic sizes, forward and forward + backward), and where its time goes: three rows
# under cProfile with their host-device synchronisations counted
# (benchmarks/traced/profile.py).
#
#   bash benchmarks/gpu_core.sh OUT
#
# From the root of a checkout, on a machine with a CUDA GPU, torch and cupy. Writes
# OUT/core/tests.log, OUT/core/table.json, OUT/core/table.md, OUT/core/table.log,
# OUT/core/profile.md. About 4 minutes: the tests under TEST_LIMIT (70 s), the table under
# TABLE_BUDGET (90 s of rows, a row that would start later is skipped and says so), the
# profile under PROFILE_LIMIT (40 s).
set -uo pipefail
OUT=${1:?usage: bash benchmarks/gpu_core.sh OUT}
cd "$(dirname "$0")/.."
mkdir -p "$OUT/core"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
TEST_LIMIT=${TEST_LIMIT:-70}
TABLE_BUDGET=${TABLE_BUDGET:-90}
PROFILE_LIMIT=${PROFILE_LIMIT:-40}
bash benchmarks/gpu_env.sh > "$OUT/core/env.txt"
timeout "$TEST_LIMIT" python3 -m pytest tests/oracle/traced/test_rules_backends.py \
    tests/oracle/test_fused.py -m gpu -q \
    -n 4 -p no:cacheprovider -o addopts="" > "$OUT/core/tests.log" 2>&1
echo "tests exit $?" >> "$OUT/core/env.txt"
timeout $(( TABLE_BUDGET + 40 )) python3 -m benchmarks.traced.table --device cuda \
    --out "$OUT/core" --budget "$TABLE_BUDGET" --repeats 3 > "$OUT/core/table.log" 2>&1
echo "table exit $?" >> "$OUT/core/env.txt"
timeout "$PROFILE_LIMIT" python3 -m benchmarks.traced.profile --device cuda --out "$OUT/core" \
    --rows softmax:small:fwd,layer_norm:realistic:bwd,cross_entropy:realistic:fwd \
    > "$OUT/core/profile.log" 2>&1
echo "profile exit $?" >> "$OUT/core/env.txt"
tail -3 "$OUT/core/tests.log"
cat "$OUT/core/table.md"
