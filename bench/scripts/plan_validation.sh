#!/usr/bin/env bash
# The layout planner against measurements on this machine (not part of the test suite):
# `cpinfer plan` predicts TTFT and ITL for the qwen2.5-0.5b shape with 8 layers at 4k and
# 16k tokens on this host (its cores, oversubscription allowed), and `bench latency` measures
# the same layouts: one rank x all cores, pcp 2 and tp 2 (one thread per rank on 2 cores),
# and at 4k the oversubscribed tp 2 x pcp 2 and pcp 4. One JSON line per point to $OUT
# (default bench/results/plan_validation.jsonl) with both figures and the relative error;
# other processes' CPU time during each run is recorded (a busy machine spoils the point).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/cpu_time.sh
CPINFER=${CPINFER:-build/cpinfer}
OUT=${OUT:-bench/results/plan_validation.jsonl}
CORES=$(nproc)
mkdir -p "$(dirname "$OUT")" models
: >"$OUT"
M8=models/qwen2.5-0.5b-L8
[[ -f "$M8/model.safetensors" ]] || "$CPINFER" make-model --preset qwen2.5-0.5b --num-layers 8 --out "$M8"
point() {  # point LEN THREADS layout-flags...
  local n=$1 threads=$2; shift 2
  local b0 own other
  b0=$(busy_jiffies)
  /usr/bin/time -f "%U %S" -o "$TMP/cpu-time" "$CPINFER" bench latency --model "$M8" \
    --input-len "$n" --output-len 8 --num-iters 1 --warmup 0 --threads-per-rank "$threads" \
    --json "$@" >"$TMP/meas.json" 2>/dev/null
  # Other processes' CPU time during the run: the machine's busy time minus the run's own
  # (user + system of the whole process tree, in jiffies of 1/100 s).
  own=$(awk '{printf "%d", ($1 + $2) * 100}' "$TMP/cpu-time")
  other=$(( $(busy_jiffies) - b0 - own ))
  node - "$TMP/meas.json" "$TMP/plan-$n.json" "$other" "$n" <<'JS' | tee -a "$OUT"
const fs = require('fs');
const [mf, pf, other, n] = process.argv.slice(2);
const m = JSON.parse(fs.readFileSync(mf, 'utf8').trim().split('\n').pop());
const p = JSON.parse(fs.readFileSync(pf, 'utf8'));
const L = m.layout;
const e = p.layouts.find((l) => l.tp === L.tp && l.pcp === L.pcp && l.dcp === L.dcp &&
  l.interleave === L.interleave && l.threads_per_rank === m.threads_per_rank);
if (!e) { console.error(`plan has no layout ${JSON.stringify(L)} x ${m.threads_per_rank} threads`); process.exit(1); }
console.log(JSON.stringify({input_len: +n, tp: L.tp, pcp: L.pcp, dcp: L.dcp, threads_per_rank: m.threads_per_rank,
  world_size: m.world_size, ttft_s: m.ttft_s, ttft_pred_s: e.ttft_s, ttft_err: e.ttft_s / m.ttft_s - 1,
  itl_s: m.itl_s, itl_pred_s: e.itl_s, itl_err: e.itl_s / m.itl_s - 1,
  comm_s: m.comm_s, prefill_comm_pred_s: e.prefill_comm_s, machine_busy_jiffies: +other}));
JS
}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
lscpu | grep -E "Model name" | tee "$TMP/cpu"
for n in 4096 16384; do
  "$CPINFER" plan --model "$M8" --context-len "$n" --oversubscribe --json >"$TMP/plan-$n.json"
  node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));console.log("calibration", JSON.stringify(j.calibration))' "$TMP/plan-$n.json"
  point "$n" "$CORES"
  point "$n" 1 -pcp 2
  point "$n" 1 -tp 2
  if [[ $n == 4096 ]]; then
    point "$n" 1 -tp 2 -pcp 2
    point "$n" 1 -pcp 4
  fi
done
