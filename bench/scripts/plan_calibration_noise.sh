#!/usr/bin/env bash
# How much a burst of other work moves `cpinfer plan`'s calibrated rates (not part of the test
# suite). For each build (NAME=BINARY arguments, e.g. old=/tmp/old/cpinfer new=build/cpinfer):
# QUIET runs with nothing beside them, whose per-rate medians are that build's reference; then
# one run per fraction in FRACS with a burst of BURST_S seconds of busy loops on every core,
# started at that fraction of the build's quiet run time. Each run's deviation is the largest
# |rate / reference - 1| over its rates (prefill GEMM, attention, decode layer and LM head at
# one row and at the rows of --concurrency CONC). Builds alternate run by run. One JSON line
# per run to $OUT (default bench/results/plan_calibration_noise.jsonl), then a summary per
# build: the median and the largest deviation of its burst runs, and how many rates moved by
# more than 10%.
# Environment: MODEL (models/qwen2.5-0.5b-L8, made if missing), CTX (4096), CONC (8), QUIET (2),
# FRACS ("0.15 0.3 0.45 0.6 0.75"), BURST_S (1.0), OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=${MODEL:-models/qwen2.5-0.5b-L8}
CTX=${CTX:-4096}
CONC=${CONC:-8}
QUIET=${QUIET:-2}
FRACS=${FRACS:-0.15 0.3 0.45 0.6 0.75}
BURST_S=${BURST_S:-1.0}
OUT=${OUT:-bench/results/plan_calibration_noise.jsonl}
(($# > 0)) || { echo "usage: $0 NAME=BINARY [NAME=BINARY ...]" >&2; exit 2; }
mkdir -p "$(dirname "$OUT")" models
: >"$OUT"
first_bin=${1#*=}
[[ -f "$MODEL/config.json" ]] ||
  "$first_bin" make-model --preset qwen2.5-0.5b --num-layers 8 --out "$MODEL" 2>/dev/null
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
lscpu | grep -E "Model name"
declare -A quiet_s
# run NAME BIN KIND FRAC: one calibration, with a burst at FRAC of the quiet time unless quiet.
run() {
  local name=$1 bin=$2 kind=$3 frac=$4 t0 t1 pid
  t0=$(date +%s.%N)
  "$bin" plan --model "$MODEL" --context-len "$CTX" --concurrency "$CONC" --json >"$TMP/plan.json" &
  pid=$!
  if [[ $kind == burst ]]; then
    sleep "$(node -e "console.log(($frac * ${quiet_s[$name]}).toFixed(2))")"
    for _ in $(seq "$(nproc)"); do timeout "$BURST_S" bash -c 'while :; do :; done' & done
  fi
  wait "$pid"
  wait
  t1=$(date +%s.%N)
  node -e '
    const fs = require("fs");
    const [f, name, kind, frac, secs] = process.argv.slice(1);
    const c = JSON.parse(fs.readFileSync(f, "utf8")).calibration;
    const rates = { gemm: c.gemm_gflops_per_core, attention: c.attention_gflops_per_core,
      decode_1: c.weight_read_gbps_per_core, lm_head_1: c.lm_head_read_gbps_per_core };
    for (const r of c.decode_rows) {
      rates[`decode_${r.rows}`] = r.weight_read_gbps_per_core;
      rates[`lm_head_${r.rows}`] = r.lm_head_read_gbps_per_core;
    }
    console.log(JSON.stringify({ build: name, kind, burst_at: kind === "burst" ? +frac : null,
      seconds: +(+secs).toFixed(2), rounds: c.rounds ?? 1, rates }));' \
    "$TMP/plan.json" "$name" "$kind" "$frac" "$(node -e "console.log($t1 - $t0)")" | tee -a "$OUT"
}
for i in $(seq "$QUIET"); do
  for nb in "$@"; do run "${nb%%=*}" "${nb#*=}" quiet 0; done
done
for nb in "$@"; do
  quiet_s[${nb%%=*}]=$(node -e '
    const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse)
      .filter((r) => r.build === process.argv[2] && r.kind === "quiet");
    console.log(Math.min(...rows.map((r) => r.seconds)));' "$OUT" "${nb%%=*}")
done
for frac in $FRACS; do
  for nb in "$@"; do run "${nb%%=*}" "${nb#*=}" burst "$frac"; done
done
node -e '
  const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
  const med = (a) => { const s = [...a].sort((x, y) => x - y), m = s.length >> 1;
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
  for (const b of [...new Set(rows.map((r) => r.build))]) {
    const quiet = rows.filter((r) => r.build === b && r.kind === "quiet");
    const ref = {};
    for (const k of Object.keys(quiet[0].rates)) ref[k] = med(quiet.map((r) => r.rates[k]));
    const devs = [], moved = [];
    for (const r of rows.filter((r) => r.build === b && r.kind === "burst")) {
      const d = Object.keys(ref).map((k) => Math.abs(r.rates[k] / ref[k] - 1));
      devs.push(Math.max(...d));
      moved.push(d.filter((x) => x > 0.1).length);
    }
    console.log(`${b}: quiet ${quiet.map((r) => r.seconds)} s; burst runs: largest deviation ` +
      `median ${(100 * med(devs)).toFixed(1)}%, max ${(100 * Math.max(...devs)).toFixed(1)}% ` +
      `[${devs.map((x) => (100 * x).toFixed(1))}]; rates off by > 10%: [${moved}] of ` +
      `${Object.keys(ref).length}`);
  }' "$OUT"
