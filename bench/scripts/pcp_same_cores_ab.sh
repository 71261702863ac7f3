#!/usr/bin/env bash
# The same cores two ways, interleaved: one rank x all cores against pcp 2 x (cores / 2)
# threads per rank, prefill of one long prompt (`bench latency`, TTFT), for each KV-cache
# dtype in KV_DTYPES, REPS rounds. Not part of the test suite. One JSON line per run to $OUT
# (default bench/results/pcp_same_cores_ab.jsonl) with other processes' CPU time during the
# run (a busy machine spoils the point); then the medians and their ratio per dtype.
# Environment: CPINFER (build/cpinfer), MODEL (models/qwen2.5-0.5b-L8, made if missing),
# LEN (16384), REPS (3), KV_DTYPES ("bf16 f32"), BF16_MATH (auto), OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/cpu_time.sh
CPINFER=${CPINFER:-build/cpinfer}
MODEL=${MODEL:-models/qwen2.5-0.5b-L8}
LEN=${LEN:-16384}
REPS=${REPS:-3}
KV_DTYPES=${KV_DTYPES:-bf16 f32}
BF16_MATH=${BF16_MATH:-auto}
OUT=${OUT:-bench/results/pcp_same_cores_ab.jsonl}
CORES=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$(dirname "$OUT")" models
: >"$OUT"
[[ -f "$MODEL/model.safetensors" ]] ||
  "$CPINFER" make-model --preset qwen2.5-0.5b --num-layers 8 --out "$MODEL"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
lscpu | grep -E "Model name"
run() {  # run ROUND KV LABEL THREADS layout-flags...
  local round=$1 kv=$2 label=$3 threads=$4 b0 own other
  shift 4
  b0=$(busy_jiffies)
  /usr/bin/time -f "%U %S" -o "$TMP/cpu-time" "$CPINFER" bench latency --model "$MODEL" \
    --input-len "$LEN" --output-len 1 --num-iters 1 --warmup 0 --threads-per-rank "$threads" \
    --kv-cache-dtype "$kv" --bf16-math "$BF16_MATH" --profile --json "$@" \
    >"$TMP/out.json" 2>/dev/null
  own=$(awk '{printf "%d", ($1 + $2) * 100}' "$TMP/cpu-time")
  other=$(($(busy_jiffies) - b0 - own))
  node -e '
    const fs = require("fs");
    const [f, round, kv, label, other] = process.argv.slice(1);
    const m = JSON.parse(fs.readFileSync(f, "utf8").trim().split("\n").pop());
    const ph = Object.fromEntries((m.phases?.prefill || []).map((p) => [p.phase, +p.ms.toFixed(0)]));
    console.log(JSON.stringify({round: +round, kv_cache_dtype: kv, layout: label,
      threads_per_rank: m.threads_per_rank, world_size: m.world_size, input_len: m.input_len,
      ttft_s: m.ttft_s, prefill_tokens_per_s: m.prefill_tokens_per_s,
      phases_ms_rank0: ph, other_busy_jiffies: +other}));' \
    "$TMP/out.json" "$round" "$kv" "$label" "$other" | tee -a "$OUT"
}
for r in $(seq 1 "$REPS"); do
  for kv in $KV_DTYPES; do
    run "$r" "$kv" "1x$CORES" "$CORES"
    run "$r" "$kv" "pcp2x$((CORES / 2))" "$((CORES / 2))" -pcp 2
  done
done
node -e '
  const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
  // True median: the mean of the two middle values of an even count.
  const med = (a) => { const s = [...a].sort((x, y) => x - y), m = s.length >> 1;
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
  for (const kv of [...new Set(rows.map((r) => r.kv_cache_dtype))]) {
    const one = rows.filter((r) => r.kv_cache_dtype === kv && r.world_size === 1).map((r) => r.ttft_s);
    const pcp = rows.filter((r) => r.kv_cache_dtype === kv && r.world_size === 2).map((r) => r.ttft_s);
    // Runs come in pairs (one rank, then pcp 2) within a round: their ratios, round by round.
    const ratios = one.map((x, i) => x / pcp[i]).filter((x) => Number.isFinite(x));
    console.log(`${kv} KV: one rank ${med(one).toFixed(2)} s [${one.map((x) => x.toFixed(2))}], ` +
      `pcp 2 ${med(pcp).toFixed(2)} s [${pcp.map((x) => x.toFixed(2))}]: pcp 2 speed / one rank ` +
      `${(med(one) / med(pcp)).toFixed(3)} at the medians, per round ` +
      `[${ratios.map((x) => x.toFixed(3))}] (median ${med(ratios).toFixed(3)})`);
  }' "$OUT"
