#!/usr/bin/env bash
# The KernelBench judge on the GPU, two parts run side by side, each stopped at KB_DEADLINE
# seconds (default 520: one call of about 9 minutes on one H200 with 16 CPU cores):
#  official    every level-1 and level-2 problem (200) judged with its own Model as ModelNew
#              under the fp32 claim, whole wherever its planned device memory (the memory
#              model, KB_MEMORY_MODEL: default benchmarks/results/h200/kbench_memory/
#              model.json) fits the device; a problem starts where its plan fits the memory
#              not yet reserved, at most KB_SLOTS per GPU (torch imported once each; each
#              problem's candidate in a fresh sandboxed process forked from a template),
#              the big ones first (KB_ORDER), 120 s per problem; an official.json
#              already in $OUT/kbench200 (or given as KB_OFFICIAL_FROM) keeps its judged
#              rows and only the rest is judged (the 200 over several calls)
#  candidates  public leaderboard kernels KernelBench accepted, re-judged with numoracle's
#              verdict classes, backward where they define one: KB_BUILD_JOBS compiled at
#              once (CUDA load_inline, a minute or more each) ahead of KB_JOBS judgements;
#              a candidates.json already in $OUT/kbench200 (or given as KB_RESUME_FROM) keeps
#              its verdicts and only the rest is judged; KB_PART=K/N takes every N-th
#
#   OUT=DIR [KB_PARTS="official candidates"] [KB_DEADLINE=520] bash benchmarks/gpu_kbench200.sh
#
# KB_CAP=1 caps each judge's process at its planned share; with an earlier call's table
# (KB_OFFICIAL_FROM) and no KB_MEMORY_MODEL, the model is first fitted to its live peaks
# ($OUT/kbench200/model_live.json).
# KB_LEAN=X judges whole, reserved at X device bytes per float64 floor byte, the problems
# whose plan by the model does not fit the device (never measured whole); one that runs out
# beside others is judged again alone and falls back to sampled rows only there.
# KB_KEEP_OVER_LIMIT=1 keeps a resumed row killed past the time limit (not judged again).
# KB_ORDER=least-work-first starts the smallest problems first (a short window);
# most-work-first the most estimated work first; big-first (default) the most memory.
# Slots by default: official 8 and candidates 5 builds + 3 judgements when both run; either
# part alone gets the whole machine (official 14; candidates 10 builds + 5 judgements).
# Each part writes its table after every row: a part stopped at KB_DEADLINE keeps its rows
# (the rest "not started"/"stopped at the run's end"). Candidates over two calls: the
# second with KB_RESUME_FROM=<the first's candidates.json> (e.g. copied into the carried
# .kernelbench/) judges only those without a verdict.
#
# From the root of a checkout with PYTHONPATH=$PWD. Needs the ignored folder .kernelbench
# (carry it): current/level1, current/level2 (KernelBench's problems) and candidates/ (made
# by `python -m benchmarks.kernelbench.leaderboard gather`). Writes under $OUT/kbench200/:
#   official.md / official.json   per problem: how judged (whole / sampled rows / reduced
#                                 sizes / not finished / refused), seconds, seconds per
#                                 phase (timings), verdict
#   candidates.md / .json         per candidate: verdict class, backward, KernelBench's rule,
#                                 compile seconds, seconds per phase
#   log.txt                       progress of both parts
# Without a CUDA device, or without the folders, it says so and exits 0.
set -uo pipefail
OUT=${OUT:-${1:-results_gpu}}
mkdir -p "$OUT/kbench200"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "no CUDA device: the official instances are not judged" | tee "$OUT/kbench200/log.txt"
  exit 0
fi
PARTS=${KB_PARTS:-official candidates}
D=${KB_DEADLINE:-520}
both=0
[[ " $PARTS " == *" official "* && " $PARTS " == *" candidates "* ]] && both=1
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv > "$OUT/kbench200/log.txt" 2>&1
start=$(date +%s)
if [[ " $PARTS " == *" official "* ]]; then
  if [ -d .kernelbench/current/level1 ]; then
    resume=()
    if [ -n "${KB_OFFICIAL_FROM:-}" ] && [ -f "$KB_OFFICIAL_FROM" ]; then
      cp "$KB_OFFICIAL_FROM" "$OUT/kbench200/official_before.json"
    elif [ -f "$OUT/kbench200/official.json" ]; then
      cp "$OUT/kbench200/official.json" "$OUT/kbench200/official_before.json"
    fi
    [ -f "$OUT/kbench200/official_before.json" ] && resume=(--resume "$OUT/kbench200/official_before.json")
    model=${KB_MEMORY_MODEL:-}
    if [ -n "${KB_CAP:-}" ] && [ -z "$model" ] && [ -f "$OUT/kbench200/official_before.json" ]; then
      # capped: the model fitted to the earlier call's live peaks (seconds from all runs;
      # the 0.9 quantile: a capped problem over its plan runs out and is judged again alone)
      python3 -m benchmarks.kernelbench.official fit benchmarks/results/h200/kbench_memory/*_official.json \
        "$OUT/kbench200/official_before.json" --peak live --quantile 0.9 \
        --out "$OUT/kbench200/model_live.json" \
        >> "$OUT/kbench200/log.txt" 2>&1 && model="$OUT/kbench200/model_live.json"
    fi
    timeout $(( D + 20 )) python3 -m benchmarks.kernelbench.official run .kernelbench/current \
      --out "$OUT/kbench200" --device cuda --limit "${KB_LIMIT:-120}" --deadline "$D" \
      --slots "${KB_SLOTS:-$(( both ? 8 : 14 ))}" --order "${KB_ORDER:-big-first}" \
      ${model:+--memory-model "$model"} ${resume[@]+"${resume[@]}"} \
      ${KB_CAP:+--cap} ${KB_LEAN:+--lean "$KB_LEAN"} ${KB_KEEP_OVER_LIMIT:+--keep-over-limit} \
      > "$OUT/kbench200/official.log" 2>&1 &
  else
    echo "no .kernelbench/current/level1 (carry .kernelbench): official part skipped" \
      >> "$OUT/kbench200/log.txt"
  fi
fi
if [[ " $PARTS " == *" candidates "* ]]; then
  if [ -f .kernelbench/candidates/manifest.json ]; then
    if [ -n "${KB_RESUME_FROM:-}" ] && [ -f "$KB_RESUME_FROM" ]; then
      cp "$KB_RESUME_FROM" "$OUT/kbench200/candidates.json"
    fi
    timeout $(( D + 20 )) python3 -m benchmarks.kernelbench.leaderboard judge \
      .kernelbench/candidates --out "$OUT/kbench200" --device cuda \
      --jobs "${KB_JOBS:-$(( both ? 3 : 5 ))}" --build-jobs "${KB_BUILD_JOBS:-$(( both ? 5 : 10 ))}" \
      --limit "${KB_CAND_LIMIT:-180}" --build-limit "${KB_BUILD_LIMIT:-300}" \
      --examples "${KB_EXAMPLES:-3}" --deadline "$D" --part "${KB_PART:-1/1}" \
      > "$OUT/kbench200/candidates.log" 2>&1 &
  else
    echo "no .kernelbench/candidates/manifest.json: candidates part skipped" \
      >> "$OUT/kbench200/log.txt"
  fi
fi
wait
for part in official candidates; do
  if [ -f "$OUT/kbench200/$part.log" ]; then
    echo "== $part" >> "$OUT/kbench200/log.txt"
    cat "$OUT/kbench200/$part.log" >> "$OUT/kbench200/log.txt"
    rm "$OUT/kbench200/$part.log"
  fi
done
echo "both parts: $(( $(date +%s) - start )) s" >> "$OUT/kbench200/log.txt"
sed -n 8,20p "$OUT/kbench200/official.md" 2>/dev/null
sed -n 8,20p "$OUT/kbench200/candidates.md" 2>/dev/null
tail -3 "$OUT/kbench200/log.txt"
