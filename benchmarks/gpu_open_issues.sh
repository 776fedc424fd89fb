#!/usr/bin/env bash
# The GPU work the open issues still need, one device call of under ten minutes per phase
# (each packs its results into OUT/<phase>.tar.gz):
#
#   bash benchmarks/gpu_open_issues.sh OUT speed      # issue 13 (+ the GPU-marked tests)
#   bash benchmarks/gpu_open_issues.sh OUT realistic  # issue 10: realistic sizes (4 workers a GPU)
#   bash benchmarks/gpu_open_issues.sh OUT logic      # issue 12: logic_ca, logic_layer, difflogic CUDA
#   [LIMITS=default,262144] bash benchmarks/gpu_open_issues.sh OUT limits  # issue 17 (+ difflogic CUDA)
#   TOPUP=F bash benchmarks/gpu_open_issues.sh OUT topup  # issue 17: the cells `limits` left short
#   bash benchmarks/gpu_open_issues.sh OUT layers     # issue 10: cuDNN on the UNet layers (done)
#
# Phases may share a machine: CUDA_VISIBLE_DEVICES gives each its GPUs (their workers
# are spread over those), JOBS its worker processes; TARGETS and OPS narrow `limits`,
# DEADLINE shortens `limits`, `topup` and `realistic`, BASELINE (a folder holding an
# earlier `numoracle` package) times that too in `speed`, TOPUP (files of earlier calls) makes
# `realistic` and `topup` run only the cases those lack, DIFFLOGIC=0 leaves difflogic's
# build and sweep out of `limits` and `topup`.
#
# speed:  GPU-marked tests (device quantize, device verdicts included); the launch-
#         blocking profile of the oracle and of realistic cases, and the stage table of
#         the small linear reference (profile_gpu.py); then,
#         with the GPU to itself, the oracle against plain float64 (oracle_speed.py).
# realistic, logic, limits: one sweep per call (run side by side in one call, eight
#         processes ran the GPU out of memory: results/h100/session3/README.md).
# confirm: a stored conv2d repro under every cuDNN mode, every stored repro replayed.
# layers: cudnn_layers.py on the small UNet (ResNet-18 was measured before).
set -uo pipefail
out=${1:?usage: gpu_open_issues.sh OUT speed|realistic|logic|limits|topup|confirm|layers}
phase=${2:?usage: gpu_open_issues.sh OUT speed|realistic|logic|limits|topup|confirm|layers}
r="$out/$phase"; mkdir -p "$r"
command -v python >/dev/null || { mkdir -p /tmp/shim; ln -sf "$(command -v python3)" /tmp/shim/python; export PATH=/tmp/shim:$PATH; }
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
t_start=$(date +%s)
stamp() { echo "== $1 at $(( $(date +%s) - t_start )) s" | tee -a "$r/phases.log"; }
# difflogic's CUDA extension from its source, carried in build/difflogic-src (a `git
# archive` of github.com/Felix-Petersen/difflogic: the device has no network). As it
# ships it does not compile against torch 2.11: its AT_DISPATCH calls take the removed
# `x.type()`; they get `x.scalar_type()`, nothing else (the diff is kept).
build_difflogic() {  # build_difflogic JOBS (may run in the background)
  rm -rf /tmp/dl && cp -r build/difflogic-src /tmp/dl || return 1
  sed -i 's/\(AT_DISPATCH_[A-Z_]*(\)\([a-z]\)\.type()/\1\2.scalar_type()/' \
    /tmp/dl/difflogic/cuda/difflogic_kernel.cu
  git diff --no-index build/difflogic-src/difflogic/cuda/difflogic_kernel.cu \
    /tmp/dl/difflogic/cuda/difflogic_kernel.cu > "$r/difflogic_patch.diff"
  (cd /tmp/dl && MAX_JOBS=$1 timeout 240 python3 setup.py build_ext --inplace) \
    > "$r/difflogic_build.log" 2>&1
  echo "exit $?" >> "$r/difflogic_build.log"
}
use_difflogic() {  # after build_difflogic: importable from here on
  export PYTHONPATH="/tmp/dl:$PYTHONPATH"
  python3 -c 'import difflogic, difflogic_cuda; print("difflogic from", difflogic.__file__, "extension", difflogic_cuda.__file__)' \
    >> "$r/difflogic_build.log" 2>&1
  tail -2 "$r/difflogic_build.log"
}
# difflogic's targets under the size limits (after use_difflogic), until a deadline
sweep_difflogic() {  # sweep_difflogic DEADLINE_S
  stamp "difflogic targets under the limits (${DL_JOBS:-3} workers)"
  timeout $(( $1 + 80 )) python3 -W ignore -m benchmarks sweep --limits "${LIMITS:-256,1024}" \
    --targets "${DL_TARGETS:-difflogic-python-cuda-fp32,difflogic-python-cuda-fp64}" \
    --examples 2000 --seconds 60 --deadline "$1" --jobs "${DL_JOBS:-3}" --gpus "$ngpu" \
    --seed "${SEED:-5}" ${DL_TOPUP:+--top-up $DL_TOPUP} --out "$r/difflogic_limits" \
    > "$r/difflogic_limits.log" 2>&1; echo "exit $?" >> "$r/difflogic_limits.log"
}
oracle_speed() {  # oracle_speed NAME: issue 13's GPU cases into $r/NAME.json and .log
  timeout 220 python3 benchmarks/oracle_speed.py --device gpu --repeats 3 --no-sweep \
    --linear 128,1024,1024 --linear 1024,4096,4096 --linear 4096,8192,8192 \
    --fp64-max-elements 1048576 --conv 32,256,256,56,56 --out "$r/$1.json" > "$r/$1.log" 2>&1
  echo "exit $?" >> "$r/$1.log"
}
# the machine: its GPUs (workers are spread over them) and cores (JOBS: sweep workers)
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then  # a share of the machine's GPUs
  ngpu=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
else
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
fi
[ "$ngpu" -ge 1 ] || ngpu=1
jobs=${JOBS:-$(( $(python3 -c 'import os; print(os.cpu_count())') * 3 / 4 ))}
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, cupy, numpy, hypothesis; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), "cupy", cupy.__version__, "numpy", numpy.__version__, "hypothesis", hypothesis.__version__)'
  python3 -c 'import os; print(os.cpu_count(), "cores")'
  echo "code ${CODE:-unknown (set CODE to the commit the copy holds)}"; } > "$r/device.txt" 2>&1
case "$phase" in
  speed)
    stamp "GPU-marked tests"
    timeout 150 python3 -m pytest -m gpu -p numoracle -q -n 4 -p no:cacheprovider tests \
      > "$r/gpu_tests.log" 2>&1; echo "pytest exit $?" >> "$r/gpu_tests.log"
    tail -2 "$r/gpu_tests.log"
    stamp "profile (launch-blocking)"
    CUDA_LAUNCH_BLOCKING=1 timeout 150 python3 -W ignore benchmarks/profile_gpu.py \
      --out "$r/profile" --cases 3 > "$r/profile.log" 2>&1; echo "exit $?" >> "$r/profile.log"
    stamp "oracle speed (GPU alone)"
    oracle_speed oracle_speed_gpu
    if [ -n "${BASELINE:-}" ]; then  # the same with an earlier numoracle package first on the path
      stamp "oracle speed, baseline $BASELINE"
      PYTHONPATH="$BASELINE:$PYTHONPATH" oracle_speed oracle_speed_gpu_baseline
    fi
    ;;
  realistic)
    # issue 10: 500 realistic-size cases per GPU target and op; four processes (eight ran
    # the GPU out of memory, session 3), a target-op short after 60 s sharded until the
    # deadline; TOPUP (files of earlier calls) runs only the cases they lacked
    stamp "realistic-size sweep of the GPU targets, ${JOBS:-$(( 4 * ngpu ))} processes on $ngpu GPU(s)"
    # a shard started at the deadline runs 60 s more, finishes its case (KAN and conv2d
    # cases take seconds) and, in a worker new on a fresh machine, first compiles CuPy's
    # kernels (about 30 s): 70 s of grace cut two of session 6's calls short
    # shellcheck disable=SC2086 # TOPUP: a list of files
    timeout $(( ${DEADLINE:-470} + 100 )) python3 -W ignore -m benchmarks sweep \
      --regime realistic --backends torch-cuda,cupy --ops linear,matmul,conv2d,kan \
      --limits default --max-reduction 1048576 --examples 500 --seconds 60 \
      --deadline "${DEADLINE:-470}" \
      --jobs "${JOBS:-$(( 4 * ngpu ))}" --gpus "$ngpu" \
      ${TOPUP:+--top-up $TOPUP} --seed "${SEED:-7}" \
      --out "$r/realistic" > "$r/realistic.log" 2>&1; echo "exit $?" >> "$r/realistic.log"
    tail -n 30 "$r/realistic.log"
    ;;
  logic)
    # issue 12 on the GPU: difflogic's CUDA extension built beside the GPU-marked tests
    # and the logic_ca sweep (10 workers: the host-side oracle sets the pace) beside the
    # logic_layer sweep of torch CUDA and difflogic's python and CUDA implementations
    stamp "logic_ca sweep (10 workers), difflogic's build and the GPU-marked tests"
    timeout 470 python3 -W ignore benchmarks/logic_sweep.py --op logic_ca --cases 2000 \
      --max-side 32 --max-steps 20 --max-channels 16 --seconds 440 --seed "${SEED:-3}" --jobs 10 \
      --targets torch-cuda-fp32,torch-cuda-fp64,cupy-atomic-fp32,cupy-ordered-fp32,cupy-serial-fp32 \
      --out "$r/logic" > "$r/logic.log" 2>&1 &
    ca=$!
    build_difflogic 4 &
    build=$!
    timeout 150 python3 -m pytest -m gpu -p numoracle -q -n 4 -p no:cacheprovider tests \
      > "$r/gpu_tests.log" 2>&1; echo "pytest exit $?" >> "$r/gpu_tests.log"
    tail -2 "$r/gpu_tests.log"
    wait "$build"
    use_difflogic
    stamp "logic_layer sweep (4 workers)"
    timeout 300 python3 -W ignore benchmarks/logic_sweep.py --op logic_layer --cases 2000 \
      --seconds $(( 440 - ($(date +%s) - t_start) )) --seed "${SEED:-3}" --jobs 4 \
      --targets torch-cuda-fp32,torch-cuda-fp64,difflogic-python-cuda-fp32,difflogic-python-cuda-fp64,difflogic-cuda-fp32 \
      --out "$r/logic" > "$r/logic_layer.log" 2>&1; echo "exit $?" >> "$r/logic_layer.log"
    wait $ca; echo "exit $?" >> "$r/logic.log"
    tail -n 6 "$r/logic.log" "$r/logic_layer.log"
    ;;
  limits)
    # issue 17 on the GPU: every GPU target under the size limits (LIMITS, default
    # 256,1024), 2,000 cases a cell; a cell short of them after 60 s goes on as
    # parallel shards (JOBS workers over the machine's GPUs), the slowest ops started
    # first. Beside it difflogic's CUDA extension is built, its tests run and its
    # targets swept under the same limits.
    stamp "limits sweep ($jobs workers, $ngpu GPU(s)); difflogic built and swept beside it"
    timeout $(( ${DEADLINE:-470} + 70 )) python3 -W ignore -m benchmarks sweep \
      --limits "${LIMITS:-256,1024}" --backends torch-cuda,cupy --examples 2000 --seconds 60 \
      --deadline "${DEADLINE:-470}" --jobs "$jobs" \
      --gpus "$ngpu" --ops "${OPS:-logic_ca,kan_chain,mlp_train,optim,kan,logic_layer,conv2d,linear,matmul}" \
      ${TARGETS:+--targets "$TARGETS"} --seed "${SEED:-4}" --out "$r/limits" > "$r/limits.log" 2>&1 &
    lim=$!
    if [ -d build/difflogic-src ] && [ "${DIFFLOGIC:-1}" != 0 ]; then
      build_difflogic 4
      use_difflogic
      stamp "difflogic tests"
      timeout 120 python3 -m pytest -p numoracle -q -p no:cacheprovider \
        tests/kernels/test_logic_targets.py -k difflogic > "$r/difflogic_tests.log" 2>&1
      echo "pytest exit $?" >> "$r/difflogic_tests.log"; tail -2 "$r/difflogic_tests.log"
      sweep_difflogic $(( 460 - ($(date +%s) - t_start) ))
    fi
    wait $lim; echo "exit $?" >> "$r/limits.log"
    tail -n 70 "$r/limits.log"
    ;;
  topup)
    # the limits cells a `limits` call left short of 2,000 (TOPUP: its soundness json),
    # with another seed; difflogic's targets under the same limits beside them, once
    # its extension is built (as in `limits`); then the cuDNN grouped-conv finding
    stamp "limits top-up (13 workers), difflogic built beside it"
    # TOPUP may name several files (their cases added); DEADLINE, DL_DEADLINE and
    # DL_TARGETS shorten a call; FINDING=0 leaves the finding out
    deadline=${DEADLINE:-330}
    # shellcheck disable=SC2086 # TOPUP: a list of files
    timeout $(( deadline + 70 )) python3 -W ignore -m benchmarks sweep --limits "${LIMITS:-256,1024}" \
      --backends torch-cuda,cupy --examples 2000 --seconds 60 --deadline "$deadline" \
      --jobs "$jobs" --gpus "$ngpu" --ops logic_ca,kan_chain,mlp_train,optim,kan,logic_layer,conv2d,linear,matmul \
      --top-up ${TOPUP:?set TOPUP to the soundness json of the limits call} \
      --seed "${SEED:-5}" --out "$r/limits" > "$r/limits.log" 2>&1 &
    lim=$!
    if [ "${DIFFLOGIC:-1}" != 0 ]; then
      build_difflogic 3
      use_difflogic
      sweep_difflogic "${DL_DEADLINE:-230}"
    fi
    if [ "${FINDING:-1}" != 0 ]; then
      stamp "cuDNN TF32 grouped-conv finding"
      timeout 60 python3 benchmarks/results/findings/cudnn-tf32-grouped-conv-nan-spreads/show.py \
        --gpu > "$r/cudnn_grouped_nan.txt" 2>&1; echo "exit $?" >> "$r/cudnn_grouped_nan.txt"
    fi
    wait $lim; echo "exit $?" >> "$r/limits.log"
    tail -n 40 "$r/limits.log" "$r/difflogic_limits.log" "$r/cudnn_grouped_nan.txt"
    ;;
  confirm)
    # the alarms of a `sweeps` call, one process on the GPU: the cuDNN modes of a
    # conv2d repro (full and nearly full memory), then every stored repro replayed
    stamp "cuDNN modes of the fp32-det grad_weight repro"
    timeout 120 python3 -W ignore benchmarks/cudnn_wgrad_probe.py \
      benchmarks/results/h100/session3/sweeps/realistic/repros/torch-cuda-fp32-det-conv2d-455c97250c50 \
      --out "$r/wgrad_probe.json" > "$r/wgrad_probe.log" 2>&1; echo "exit $?" >> "$r/wgrad_probe.log"
    stamp "replays"
    for d in benchmarks/results/h100/session3/sweeps/*/repros/*/; do
      echo "== $d"; timeout 60 python3 -W ignore -m numoracle replay "$d" 2>&1 | tail -4
    done > "$r/replays.log" 2>&1
    grep -c "^== " "$r/replays.log"
    stamp "cuDNN on the UNet layers"
    timeout 330 python3 -W ignore benchmarks/cudnn_layers.py --out "$r/cudnn_layers" \
      --nets unet --seconds 300 > "$r/cudnn_layers.log" 2>&1
    echo "exit $?" >> "$r/cudnn_layers.log"; tail -4 "$r/cudnn_layers.log"
    ;;
  layers)
    stamp "cuDNN on the UNet layers"
    timeout 560 python3 -W ignore benchmarks/cudnn_layers.py --out "$r/cudnn_layers" \
      --nets unet --seconds 520 > "$r/cudnn_layers.log" 2>&1
    echo "exit $?" >> "$r/cudnn_layers.log"; tail -4 "$r/cudnn_layers.log"
    ;;
  *) echo "unknown phase $phase: use speed, sweeps or layers" >&2; exit 2 ;;
esac
stamp "done"
(cd "$out" && find "$phase" -type f -size -4M | tar -czf "$phase.tar.gz" -T - && rm -rf "$phase")
