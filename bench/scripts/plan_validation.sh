#!/usr/bin/env bash
# The layout planner against measurements on this machine (not part of the test suite):
# `cpinfer plan` predicts TTFT and ITL for the qwen2.5-0.5b shape with 8 layers at 4k and
# 16k tokens on this host (its cores, oversubscription allowed), and `bench latency` measures
# the same layouts: one rank x all cores, pcp 2 and tp 2 (one thread per rank on 2 cores),
# and at 4k the oversubscribed tp 2 x pcp 2 and pcp 4. KV=f32|bf16 (default bf16) is the
# cache dtype of both. One JSON line per point to $OUT
# (default bench/results/plan_validation.jsonl) with both figures and the relative error;
# other processes' CPU time during each run is recorded (a busy machine spoils the point).
# REPS=N (default 1) measures every point N times, the points interleaved round by round so
# that the host's drift spreads over all of them, and ends with one line per point holding
# the medians and their errors ({"median": true, ...}, also appended to $OUT).
# OUTLEN=N (default 8) output tokens per request: the measured ITL is the mean of N - 1
# decode steps, so a few slow steps of a shared host move it less at larger N.
# PLAN_PER_ROUND=1 (the default) runs `plan` (its calibration) again at the start of every
# round, so the predictions drift with the host as the measurements do, and the medians
# line compares the median prediction with the median measurement; PLAN_PER_ROUND=0
# calibrates once per prompt length before the first round.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/cpu_time.sh
CPINFER=${CPINFER:-build/cpinfer}
OUT=${OUT:-bench/results/plan_validation.jsonl}
CORES=$(nproc)
REPS=${REPS:-1}
KV=${KV:-bf16}  # the KV cache dtype of both the plan and the measurements
OUTLEN=${OUTLEN:-8}
PLAN_PER_ROUND=${PLAN_PER_ROUND:-1}
mkdir -p "$(dirname "$OUT")" models
: >"$OUT"
M8=models/qwen2.5-0.5b-L8
[[ -f "$M8/model.safetensors" ]] || "$CPINFER" make-model --preset qwen2.5-0.5b --num-layers 8 --out "$M8"
point() {  # point REP LEN THREADS layout-flags...
  local rep=$1 n=$2 threads=$3; shift 3
  local b0 own other
  b0=$(busy_jiffies)
  /usr/bin/time -f "%U %S" -o "$TMP/cpu-time" "$CPINFER" bench latency --model "$M8" \
    --input-len "$n" --output-len "$OUTLEN" --num-iters 1 --warmup 0 --threads-per-rank "$threads" \
    --kv-cache-dtype "$KV" \
    --json "$@" >"$TMP/meas.json" 2>/dev/null
  # Other processes' CPU time during the run: the machine's busy time minus the run's own
  # (user + system of the whole process tree, in jiffies of 1/100 s).
  own=$(awk '{printf "%d", ($1 + $2) * 100}' "$TMP/cpu-time")
  other=$(( $(busy_jiffies) - b0 - own ))
  node - "$TMP/meas.json" "$TMP/plan-$n.json" "$other" "$n" "$rep" "$OUTLEN" <<'JS' | tee -a "$OUT"
const fs = require('fs');
const [mf, pf, other, n, rep, outlen] = process.argv.slice(2);
const m = JSON.parse(fs.readFileSync(mf, 'utf8').trim().split('\n').pop());
const p = JSON.parse(fs.readFileSync(pf, 'utf8'));
const L = m.layout;
const e = p.layouts.find((l) => l.tp === L.tp && l.pcp === L.pcp && l.dcp === L.dcp &&
  l.interleave === L.interleave && l.threads_per_rank === m.threads_per_rank);
if (!e) { console.error(`plan has no layout ${JSON.stringify(L)} x ${m.threads_per_rank} threads`); process.exit(1); }
console.log(JSON.stringify({rep: +rep, input_len: +n, output_len: +outlen, tp: L.tp, pcp: L.pcp, dcp: L.dcp, threads_per_rank: m.threads_per_rank,
  world_size: m.world_size, ttft_s: m.ttft_s, ttft_pred_s: e.ttft_s, ttft_err: e.ttft_s / m.ttft_s - 1,
  itl_s: m.itl_s, itl_pred_s: e.itl_s, itl_err: e.itl_s / m.itl_s - 1,
  comm_s: m.comm_s, prefill_comm_pred_s: e.prefill_comm_s, machine_busy_jiffies: +other}));
JS
}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
lscpu | grep -E "Model name" | tee "$TMP/cpu"
calibrate() {  # calibrate LEN: the plan (and its calibration) the points of LEN compare with
  "$CPINFER" plan --model "$M8" --context-len "$1" --kv-cache-dtype "$KV" --oversubscribe --json >"$TMP/plan-$1.json"
  node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));console.log("calibration", JSON.stringify(j.calibration))' "$TMP/plan-$1.json"
}
if [[ $PLAN_PER_ROUND != 1 ]]; then
  for n in 4096 16384; do calibrate "$n"; done
fi
for rep in $(seq 1 "$REPS"); do
  for n in 4096 16384; do
    [[ $PLAN_PER_ROUND == 1 ]] && calibrate "$n"
    point "$rep" "$n" "$CORES"
    point "$rep" "$n" 1 -pcp 2
    point "$rep" "$n" 1 -tp 2
    if [[ $n == 4096 ]]; then
      point "$rep" "$n" 1 -tp 2 -pcp 2
      point "$rep" "$n" 1 -pcp 4
    fi
  done
done
# Medians per point over the rounds, and their errors against the (fixed) prediction.
node - "$OUT" <<'JS' | tee -a "$OUT"
const fs = require('fs');
const rows = fs.readFileSync(process.argv[2], 'utf8').trim().split('\n').map(JSON.parse);
const med = (a) => { const s = [...a].sort((x, y) => x - y), m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };  // even count: the middle two's mean
const groups = new Map();
for (const r of rows) {
  const k = [r.input_len, r.tp, r.pcp, r.dcp, r.threads_per_rank].join(',');
  if (!groups.has(k)) groups.set(k, []);
  groups.get(k).push(r);
}
for (const g of groups.values()) {
  // Medians of the measurements and of the predictions (one per round with PLAN_PER_ROUND=1,
  // else all equal), each over the rounds.
  const r0 = g[0], ttft = med(g.map((r) => r.ttft_s)), itl = med(g.map((r) => r.itl_s));
  const ttft_pred = med(g.map((r) => r.ttft_pred_s)), itl_pred = med(g.map((r) => r.itl_pred_s));
  console.log(JSON.stringify({median: true, runs: g.length, input_len: r0.input_len,
    output_len: r0.output_len, tp: r0.tp,
    pcp: r0.pcp, dcp: r0.dcp, threads_per_rank: r0.threads_per_rank,
    ttft_s: ttft, ttft_runs: g.map((r) => r.ttft_s), ttft_pred_s: ttft_pred,
    ttft_pred_runs: g.map((r) => r.ttft_pred_s), ttft_err: ttft_pred / ttft - 1,
    itl_s: itl, itl_runs: g.map((r) => r.itl_s), itl_pred_s: itl_pred,
    itl_pred_runs: g.map((r) => r.itl_pred_s), itl_err: itl_pred / itl - 1,
    max_machine_busy_jiffies: Math.max(...g.map((r) => r.machine_busy_jiffies))}));
}
JS
