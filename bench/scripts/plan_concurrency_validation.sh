#!/usr/bin/env bash
# `cpinfer plan --concurrency B` against measured decode batches on this machine (not part of
# the test suite). For each round, each layout in LAYOUTS and each B in BATCHES:
# bench/scripts/pcp_decode_batch_ab.sh serves MODEL under the layout and `bench serve` runs B
# prompts of 64 tokens that decode OUTLEN tokens together (the streams' ITL p50 is the
# measured step time); then `cpinfer plan` predicts the same points at the decode's mean
# context (64 + OUTLEN / 2 tokens) with the KV dtype `serve` takes for the model (auto), and
# one summary line per (layout, B) gives the median of the rounds, the prediction and the
# error. Raw lines and summaries to $OUT (default bench/results/plan_concurrency_validation.jsonl).
# Environment: MODEL (models/qwen2.5-0.5b-L8), LAYOUTS ("1 pcp2 tp2": one rank x all cores,
# -pcp 2, -tp 2), BATCHES ("1 4 8"), OUTLEN (128), ROUNDS (2), OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
CPINFER=${CPINFER:-build/cpinfer}
MODEL=${MODEL:-models/qwen2.5-0.5b-L8}
LAYOUTS=${LAYOUTS:-1 pcp2 tp2}
BATCHES=${BATCHES:-1 4 8}
OUTLEN=${OUTLEN:-128}
ROUNDS=${ROUNDS:-2}
OUT=${OUT:-bench/results/plan_concurrency_validation.jsonl}
mkdir -p "$(dirname "$OUT")" models
[[ -f "$MODEL/config.json" ]] ||
  "$CPINFER" make-model --preset qwen2.5-0.5b --num-layers 8 --out "$MODEL" 2>/dev/null
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
flags() { case $1 in 1) echo "" ;; pcp2) echo "-pcp 2" ;; tp2) echo "-tp 2" ;; *) echo "unknown layout $1" >&2; exit 2 ;; esac; }
for round in $(seq "$ROUNDS"); do
  for lay in $LAYOUTS; do
    LAYOUT="$(flags "$lay")" ROUNDS=1 BATCHES="$BATCHES" OUTLEN="$OUTLEN" MODEL="$MODEL" \
      OUT="$TMP/measured.jsonl" bash bench/scripts/pcp_decode_batch_ab.sh "$lay=$CPINFER" >/dev/null
  done
done
ctx=$((64 + OUTLEN / 2))
for b in $BATCHES; do
  "$CPINFER" plan --model "$MODEL" --context-len "$ctx" --concurrency "$b" --json >"$TMP/plan-$b.json"
done
node - "$TMP" "$ctx" "$BATCHES" <<'JS' | tee -a "$OUT"
const fs = require('fs');
const [dir, ctx, batches] = [process.argv[2], +process.argv[3], process.argv[4].split(' ').map(Number)];
const measured = fs.readFileSync(`${dir}/measured.jsonl`, 'utf8').trim().split('\n').map(JSON.parse);
const median = (a) => { const s = [...a].sort((x, y) => x - y), h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2; };
const shape = { '1': [1, 1], pcp2: [1, 2], tp2: [2, 1] };
for (const m of measured) console.log(JSON.stringify({ raw: true, ...m }));
for (const lay of [...new Set(measured.map((m) => m.label))]) for (const b of batches) {
  const runs = measured.filter((m) => m.label === lay && m.batch === b);
  const plan = JSON.parse(fs.readFileSync(`${dir}/plan-${b}.json`, 'utf8'));
  const [tp, pcp] = shape[lay];
  const p = plan.layouts.find((l) => l.tp === tp && l.pcp === pcp && l.dcp === 1 &&
    (pcp === 1 || l.interleave === 1));
  const itl = runs.map((r) => r.result.median_itl_ms);
  const med = median(itl);
  console.log(JSON.stringify({ median: true, layout: lay, concurrency: b, context_len: ctx,
    itl_ms_measured: +med.toFixed(2), itl_ms_rounds: itl.map((x) => +x.toFixed(2)),
    itl_ms_predicted: +(p.itl_s * 1e3).toFixed(2), error: +((p.itl_s * 1e3 - med) / med).toFixed(4),
    others_jiffies: runs.map((r) => r.others_jiffies), cpu: runs[0].cpu,
    calibration_decode_rows: plan.calibration.decode_rows }));
}
JS
