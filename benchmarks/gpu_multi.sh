#!/usr/bin/env bash
# `numoracle run` on one GPU and on every GPU of the host, for the same budget: cases,
# wall time and the GPUs' busy share, in $OUT/multi/.
#
#   bash benchmarks/gpu_multi.sh OUT
#
# From the root of a checkout on a machine with several CUDA GPUs (torch, cupy; rich and
# ml_dtypes installed). Two runs of the README's command with --budget $BUDGET (50):
#
#   one  CUDA_VISIBLE_DEVICES=0 and the first nproc/GPUs cores (taskset): the share of
#        the host a one-GPU machine of the same kind has
#   all  every GPU and every core
#
# Each run's report and run.json (cases, warm-up, judging, the pool's numbers: each
# worker's GPU, the workers that drew their own cases, the driver's seconds drawing cases,
# the workers' seconds waiting for cases) go to OUT/multi/<run>/, its output to
# OUT/multi/<run>.log, nvidia-smi's samples (every 500 ms) to OUT/multi/<run>.smi.csv.
# While the first runs (on GPU 0 and the first half of the cores), the GPU-marked tests of
# the hand-written oracle on CuPy run on GPU 1 and the other cores: OUT/multi/gpu_tests.txt.
# Then, on GPU 0, the hand-written oracle's linear backward (fp32 target) against torch
# float64 on the same GPU at 128x1024x1024 and 4096x8192x8192 (benchmarks speed --plain
# torch: torch's four ops, its autograd beside) in OUT/multi/linear_speed.json, and the
# magnitude sums' cost in float64, float32 and TF32 with the small linear reference under
# cProfile (benchmarks gpu_sums) in OUT/multi/gpu_sums.json and .log.
# OUT/multi/summary.json and summary.md hold the comparison (GPU busy share: mean
# utilization.gpu per GPU over the judging window) and the linear rows.
# Each run is limited to $RUN_LIMIT (100) seconds, the tests to 90; the script takes about
# 3.5 to 4 minutes (LINEAR=0 leaves out the linear rows and the sums: 2.5 minutes less).
set -u
OUT=${1:?usage: bash benchmarks/gpu_multi.sh OUT}
BUDGET=${BUDGET:-50}
RUN_LIMIT=${RUN_LIMIT:-100}
D="$OUT/multi"
mkdir -p "$D"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
CORES=$(nproc)
{
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "gpus $GPUS cores $CORES budget $BUDGET"
  nvidia-smi -L
  python3 -c "import torch, cupy, hypothesis; print('torch', torch.__version__, 'cupy', cupy.__version__, 'hypothesis', hypothesis.__version__)"
} > "$D/device.txt" 2>&1

one_run() {  # NAME DEVICES CPUS
  local name=$1 devices=$2 cpus=$3
  rm -rf "$D/$name"
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used \
    --format=csv,noheader,nounits -lms 500 > "$D/$name.smi.csv" 2>/dev/null &
  local smi=$!
  local t0 t1 rc
  t0=$(date +%s.%N)
  local pin=()
  if command -v taskset > /dev/null; then pin=(taskset -c "$cpus"); fi
  CUDA_VISIBLE_DEVICES=$devices timeout "$RUN_LIMIT" "${pin[@]}" \
    python3 -m numoracle run --budget "$BUDGET" --report "$D/$name" \
    --store "$D/$name/repros" > "$D/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  kill "$smi" 2>/dev/null
  wait "$smi" 2>/dev/null
  echo "$name rc=$rc start=$t0 end=$t1 devices=$devices cpus=$cpus" >> "$D/runs.txt"
}

rm -f "$D/runs.txt"
PER=$(( CORES / (GPUS > 0 ? GPUS : 1) ))
# the GPU-marked tests of the hand-written oracle on CuPy, on the other GPU and cores while
# the one-GPU run goes (its GPU and cores to itself)
TESTS=(tests/oracle/test_ops_namespaces.py tests/oracle/test_fused.py tests/oracle/test_gpu_reference.py)
TPIN=()
if command -v taskset > /dev/null && [ "$GPUS" -gt 1 ]; then TPIN=(taskset -c "$PER-$(( CORES - 1 ))"); fi
CUDA_VISIBLE_DEVICES=$(( GPUS > 1 ? 1 : 0 )) timeout 90 "${TPIN[@]}" python3 -m pytest -m gpu \
  -q -n 4 "${TESTS[@]}" > "$D/gpu_tests.txt" 2>&1 &
TESTS_PID=$!
one_run one 0 "0-$(( PER - 1 ))"
wait "$TESTS_PID"
echo "gpu tests rc=$?" >> "$D/gpu_tests.txt"
ALL=$(seq -s, 0 $(( GPUS > 0 ? GPUS - 1 : 0 )))
one_run all "$ALL" "0-$(( CORES - 1 ))"

if [ "${LINEAR:-1}" = 1 ]; then  # LINEAR=0 leaves out the linear rows below
CUDA_VISIBLE_DEVICES=0 timeout 90 python3 -m benchmarks speed --device gpu --no-sweep \
  --repeats 5 --plain torch --fp64-max-elements 0 --linear 128,1024,1024 \
  --linear 4096,8192,8192 --out "$D/linear_speed.json" > "$D/linear_speed.log" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 60 python3 -m benchmarks gpu_sums --shape 4096,8192,8192 \
  --shape 128,1024,1024 --profile 128,1024,1024 --out "$D/gpu_sums.json" \
  > "$D/gpu_sums.log" 2>&1
fi

python3 - "$D" <<'EOF'
import csv, datetime, json, sys
from pathlib import Path

d = Path(sys.argv[1])
runs = {}
for line in (d / "runs.txt").read_text().splitlines():
    name, *kv = line.split()
    runs[name] = dict(x.split("=", 1) for x in kv)

def busy(name, start, end):
    """Mean utilization.gpu per GPU between start and end (epoch seconds)."""
    per = {}
    path = d / f"{name}.smi.csv"
    if not path.exists():
        return per
    for row in csv.reader(path.open()):
        if len(row) < 3:
            continue
        try:
            t = datetime.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
            gpu, util = row[1].strip(), float(row[2])
        except ValueError:
            continue
        if start <= t <= end:
            per.setdefault(gpu, []).append(util)
    return {g: round(sum(v) / len(v), 1) for g, v in per.items() if v}

summary = {}
for name, r in runs.items():
    start, end = float(r["start"]), float(r["end"])
    p = d / name / "run.json"
    run = json.loads(p.read_text()) if p.exists() else {}
    report = run.get("report_s") or 0.0
    judge = run.get("judge_s") or 0.0
    window = (end - report - judge - 1.0, end - report)  # the judging, less exit and report
    summary[name] = {
        "exit": int(r["rc"]), "devices": r["devices"], "cpus": r["cpus"],
        "process_wall_s": round(end - start, 1), "cases": run.get("cases"),
        "rows": run.get("rows"), "jobs": run.get("jobs"), "budget_s": run.get("budget_s"),
        "warm_up_s": run.get("warm_up_s"), "judge_s": run.get("judge_s"),
        "report_s": run.get("report_s"), "cases_per_minute": run.get("cases_per_minute"),
        "gpu_busy_judging_pct": busy(name, *window) if judge else {},
        "gpu_busy_whole_run_pct": busy(name, start, end),
        "pool": run.get("pool", {}),
    }
(d / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
lines = ["| run | devices | jobs | cases | judged s (budget) | process s | GPU busy while judging, % | workers drawing their own cases | driver drawing s while judging | workers' mean wait s |",
         "|---|---|---|---|---|---|---|---|---|---|"]
for name, s in summary.items():
    pool = s["pool"] or {}
    waits = [w for w in pool.get("worker_wait_s", []) if w is not None]
    lines.append(f"| {name} | {s['devices']} | {s['jobs']} | {s['cases']} | {s['judge_s']} "
                 f"({s['budget_s']}) | {s['process_wall_s']} | {s['gpu_busy_judging_pct']} | "
                 f"{pool.get('own_draws')} | {pool.get('draw_judging_s')} | "
                 f"{round(sum(waits) / len(waits), 1) if waits else None} |")
one, every = summary.get("one", {}), summary.get("all", {})
if one.get("cases") and every.get("cases"):
    lines.append(f"\nall / one: {every['cases'] / one['cases']:.2f}x the cases")
speed = d / "linear_speed.json"
if speed.exists():
    rows = json.loads(speed.read_text()).get("linear", [])
    summary["linear_speed"] = rows
    (d / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines += ["", "| linear backward (fp32 target) | oracle ms | torch fp64 ops ms | ratio | "
              "torch fp64 autograd ms | ratio |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {'x'.join(map(str, r['shape']))} | {1e3 * r['oracle_s']:.2f} | "
                     f"{1e3 * r['plain_float64_s']:.2f} | {r['ratio']:.2f}x | "
                     f"{1e3 * r.get('torch_autograd_s', float('nan')):.2f} | "
                     f"{r.get('ratio_to_torch_autograd', float('nan')):.2f}x |")
(d / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
