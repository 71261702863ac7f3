#!/usr/bin/env bash
# Prefill of two cpinfer builds side by side (not part of the test suite): `bench latency`
# on MODEL (models/qwen2.5-0.5b) with a LEN-token prompt (2048), one rank x all cores,
# 3 timed runs after a warm-up; ROUNDS rounds (3) in which OLD and NEW (build/cpinfer)
# alternate. One JSON line per run to $OUT (bench/results/prefill_ab.jsonl): the build, the
# round, the whole machine's busy jiffies during the run (this run's own included) and the
# `bench latency --json` result (ttft_s, prefill_tokens_per_s, mfu and its unit).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/cpu_time.sh
OLD=${OLD:?OLD=path/to/old/cpinfer}
NEW=${NEW:-build/cpinfer}
MODEL=${MODEL:-models/qwen2.5-0.5b}
LEN=${LEN:-2048}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-bench/results/prefill_ab.jsonl}
mkdir -p "$(dirname "$OUT")" models
[[ -f "$MODEL/model.safetensors" ]] || "$NEW" make-model --preset qwen2.5-0.5b --out "$MODEL"
for r in $(seq "$ROUNDS"); do
  for b in old new; do
    bin=$NEW
    [[ $b == old ]] && bin=$OLD
    b0=$(busy_jiffies)
    out=$("$bin" bench latency --model "$MODEL" --input-len "$LEN" --output-len 1 --num-iters 3 \
      --warmup 1 --json 2>/dev/null | tail -1)
    echo "{\"round\":$r,\"build\":\"$b\",\"busy_jiffies\":$(($(busy_jiffies) - b0)),\"result\":$out}" | tee -a "$OUT"
  done
done
