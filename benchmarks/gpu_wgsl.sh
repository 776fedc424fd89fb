for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig;
# The WGSL examples on the NVIDIA Vulkan driver and the Fortran + cuDNN program,
# on a GPU machine, from the repository root (about 4 minutes; 18 processes).
#
# Carried: .gl (the Vulkan loader's .deb files), .whl (wgpu, cffi, pycparser,
# rendercanvas wheels, where python3 cannot import wgpu), and build/fortran_cudnn
# (examples/fortran_cudnn/build.sh, where gfortran is missing there).
# Results: $OUT/wgsl/summary.md, results.json, log.txt.
export VK_DRIVER_FILES="${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}"
set -u
secs="${WGSL_SECONDS:-150}"  # each job's budget (a dry run elsewhere: fewer)
out="${OUT:-/tmp/out}/wgsl"
work=/tmp/wgsl_shards
rm -rf "$work"
mkdir -p "$out" "$work"
log="$out/log.txt"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 \
  OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1
if ! python3 -c "import wgpu" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/wgsl_site \
    .whl/wgpu-*.whl .whl/cffi-*.whl .whl/pycparser-*.whl .whl/rendercanvas-*.whl >>"$log" 2>&1
  export PYTHONPATH="$PYTHONPATH:/tmp/wgsl_site"
fi
if command -v gfortran >/dev/null; then
  examples/fortran_cudnn/build.sh build/fortran_cudnn >>"$log" 2>&1
fi
cudnn_lib="$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null)"
export LD_LIBRARY_PATH="$PWD/build/fortran_cudnn${cudnn_lib:+:$cudnn_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  echo "commit $(git rev-parse --short HEAD 2>/dev/null) $(date -u)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "from numoracle.foreign.wgsl import adapter_description as a; print('wgpu adapter:', a())"
  ls build/fortran_cudnn 2>&1 | tr '\n' ' '; echo
} >>"$log" 2>&1

job() {  # job NAME EXAMPLES SEED SECONDS
  timeout 215 python3 benchmarks/wgsl_sweep.py run "$1" --examples "$2" --seed "$3" \
    --seconds "$4" --out "$work/$(echo "$1" | tr ':' '_')-$3.json" >>"$work/$(echo "$1" | tr ':' '_')-$3.log" 2>&1 &
}
# KAN cases cost the oracle about a second each: nine shards for 1,000 cases
for s in 1 2 3 4 5 6 7 8 9; do job kan 400 "$s" "$secs"; done
job kan-order1 200 20 "$secs"
job matmul 1000 21 "$secs"
for m in first_layer_input_grad_zero order2_derivative k_tail_dropped dispatch_floor; do
  job "mutant:$m" 300 10 "$secs"
done
job fortran:correct 1000 11 "$secs"
job fortran:layout_trap 100 12 "$secs"
job fortran:layout_trap_grad 100 13 "$secs"
wait
cat "$work"/*.log >>"$log"
python3 benchmarks/wgsl_sweep.py merge "$work" --md "$out/summary.md" --json "$out/results.json" \
  >>"$log" 2>&1
tail -n 40 "$out/summary.md"
