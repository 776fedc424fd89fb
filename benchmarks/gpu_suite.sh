#!/usr/bin/env bash
# The GPU run: GPU-marked tests, the soundness sweep over every target, the
# GPU float64 oracle cost, the TF32 rounding probe and `numoracle run`.
# Usage (on a machine with a CUDA GPU, torch and cupy):
#   bash benchmarks/gpu_suite.sh OUTDIR [EXAMPLES]
# Everything is written under OUTDIR and packed into OUTDIR/gpu_results.tar.gz.
set -uo pipefail
out=${1:?usage: gpu_suite.sh OUTDIR [EXAMPLES]}
examples=${2:-2000}
mkdir -p "$out/r"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
{ nvidia-smi; python3 -c 'import torch, cupy, numpy, hypothesis; print("torch", torch.__version__, "cupy", cupy.__version__, "numpy", numpy.__version__, "hypothesis", hypothesis.__version__); print(torch.cuda.get_device_name(0))'; } > "$out/r/device.txt" 2>&1
echo "== GPU tests"; timeout 240 python3 -m pytest -m gpu -p numoracle -q -n 4 -p no:cacheprovider tests > "$out/r/gpu_tests.log" 2>&1; tail -3 "$out/r/gpu_tests.log"
echo "== TF32 rounding"; timeout 60 python3 benchmarks/tf32_rounding.py --out "$out/r/tf32_rounding.json" 2>&1 | tail -3
echo "== oracle cost (GPU float64 path)"; timeout 120 python3 benchmarks/oracle_cost.py --no-gradcheck --out "$out/r/oracle_cost_gpu.json" 2>&1 | tail -3
echo "== soundness sweep"; timeout 330 python -m benchmarks sweep --examples "$examples" --jobs 14 --out "$out/r" 2>&1 | tail -20
echo "== numoracle run"; timeout 150 python3 -m numoracle run --report "$out/r/run" > "$out/r/run.log" 2>&1; tail -30 "$out/r/run.log"
# small files only (repros of large cases can be tens of MB)
(cd "$out/r" && find . -type f -size -512k | tar -czf ../gpu_results.tar.gz -T -)
ls -la "$out"
