#!/usr/bin/env bash
# Logic ops on a GPU: the GPU-marked logic tests, a soundness sweep of the CUDA
# targets (torch CUDA layer and automaton, the CuPy automaton kernels, difflogic's
# LogicLayer where it installs), and seed 004's parallel-versus-sequential check of
# the CuPy kernels. Usage: bash benchmarks/logic_gpu.sh OUT [CASES]
#
# difflogic: its setup.py builds a CUDA extension and imports torch, so it installs
# only with --no-build-isolation on a machine with the CUDA toolkit. Set
# DIFFLOGIC_SRC to a difflogic source tree or sdist (github.com/Felix-Petersen/difflogic)
# when the machine has no network; otherwise pip fetches it.
set -uo pipefail
OUT=${1:?usage: logic_gpu.sh OUT [CASES]}
CASES=${2:-2000}
mkdir -p "$OUT"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
nvidia-smi -L > "$OUT/machine.txt" 2>&1
python -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)" \
    >> "$OUT/machine.txt" 2>&1

{
  echo "# difflogic install"
  if [ -n "${DIFFLOGIC_SRC:-}" ]; then
    pip install --no-build-isolation --no-deps "$DIFFLOGIC_SRC"
  else
    pip install --no-build-isolation --no-deps difflogic
  fi
  python -c "import difflogic; print('difflogic imported from', difflogic.__file__)"
} > "$OUT/difflogic_install.log" 2>&1 || echo "difflogic did not install: see difflogic_install.log"

timeout 900 python -m pytest tests/kernels/test_logic_targets.py tests/test_equivalence.py \
    tests/oracle/test_logic_gates.py tests/oracle/test_logic_ca.py -p numoracle \
    -q -p no:randomly > "$OUT/pytest_logic.txt" 2>&1
tail -3 "$OUT/pytest_logic.txt"

# soundness: one reference per case, every CUDA target of the format judged against it
python benchmarks/logic_sweep.py --op logic_layer --cases "$CASES" --out "$OUT" \
    --targets torch-cuda-fp32,torch-cuda-fp64,difflogic-python-cuda-fp32,difflogic-python-cuda-fp64,difflogic-cuda-fp32 \
    --seconds 1500 > "$OUT/sweep_layer.txt" 2>&1
python benchmarks/logic_sweep.py --op logic_ca --cases "$CASES" --out "$OUT" --max-side 32 \
    --max-steps 8 --targets torch-cuda-fp32,torch-cuda-fp64,cupy-atomic-fp32,cupy-ordered-fp32,cupy-serial-fp32 \
    --seconds 2400 > "$OUT/sweep_ca.txt" 2>&1
cat "$OUT/sweep_layer.txt" "$OUT/sweep_ca.txt"

# seed 004's acceptance test: ordered merge bit-identical to the serial kernel, atomics
# within the two-order yardstick
python - "$OUT" <<'EOF' > "$OUT/equivalence.txt" 2>&1
import json, sys
import numpy as np
from numoracle.cases.case import Case
from numoracle.checking.equivalence import check_equivalence, _describe
from numoracle.kernels import get_target

out = sys.argv[1]
serial = get_target("cupy-serial-fp32", "logic_ca")
rng = np.random.default_rng(0)
rows = []
for i in range(200):
    side = lambda: int(2 ** rng.uniform(0, 5))
    params = {"height": side(), "width": side(), "channels": int(rng.integers(1, 5)),
              "steps": int(rng.integers(1, 9)), "kernels": int(rng.integers(1, 3)),
              "hidden": int(rng.integers(1, 9)), "periodic": bool(rng.integers(0, 2))}
    case = Case("logic_ca", params, storage="fp32", seed=i)
    for name in ("cupy-ordered-fp32", "cupy-atomic-fp32"):
        rows.append(_describe(check_equivalence(case, get_target(name, "logic_ca"), serial)))
summary = {}
for name in ("cupy-ordered-fp32", "cupy-atomic-fp32"):
    mine = [r for r in rows if r["target"] == name]
    summary[name] = {"cases": len(mine), "passed": sum(r["passed"] for r in mine),
                     "bit_identical": sum(r["bit_identical"] for r in mine),
                     "worst_ratio": max(max(r["ratios"].values(), default=0) for r in mine)}
print(json.dumps(summary, indent=1))
json.dump({"summary": summary, "rows": rows}, open(f"{out}/equivalence.json", "w"), indent=1)
EOF
cat "$OUT/equivalence.txt"

python -m numoracle zoo --ops logic --report "$OUT/zoo" > "$OUT/zoo.txt" 2>&1
tail -2 "$OUT/zoo.txt"
