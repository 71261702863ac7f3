#!/usr/bin/env bash
# Accuracy of --quantization int8 against the unquantized weights (not part of the test
# suite), on a synthetic preset (default qwen2.5-0.5b, bf16): from a fixed 32-token prompt,
#  1. free-running greedy agreement: both generate 256 greedy tokens; the length of their
#     common prefix;
#  2. teacher-forced: both score the prompt followed by the unquantized run's 256 tokens
#     (generate --prompt-logits-out), and the 256 next-token distributions are compared row
#     by row: max |logit difference|, argmax agreement, KL(P_unquantized || P_int8).
# int8 runs once per --int8-math in INT8_MATHS (default "exact dot": f32 activations, and
# activations quantized to int8 as well). One JSON line per int8 math to $OUT (default
# bench/results/int8_accuracy.jsonl).
set -euo pipefail
cd "$(dirname "$0")/../.."
CPINFER=${CPINFER:-build/cpinfer}
OUT=${OUT:-bench/results/int8_accuracy.jsonl}
PRESET=${PRESET:-qwen2.5-0.5b}
MODEL=${MODEL:-models/$PRESET}
STEPS=${STEPS:-256}
INT8_MATHS=${INT8_MATHS:-"exact dot"}
mkdir -p "$(dirname "$OUT")" models
[[ -f "$MODEL/model.safetensors" ]] || "$CPINFER" make-model --preset "$PRESET" --out "$MODEL"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
V=$(node -e 'console.log(require(process.argv[1]).vocab_size)' "$PWD/$MODEL/config.json")
prompt=$(node -e 'let x=7, a=[]; for (let i=0;i<32;i++){x=(x*1103515245+12345)%2147483648; a.push(x%150000);} console.log(a.join(","))')

# Runs: none, and int8-MATH for each math ("--quantization int8 --int8-math MATH").
runs="none"
for m in $INT8_MATHS; do runs+=" int8-$m"; done
qargs() { [[ $1 == none ]] && echo "--quantization none" || echo "--quantization int8 --int8-math ${1#int8-}"; }
for q in $runs; do
  "$CPINFER" generate --model "$MODEL" --prompt-ids "$prompt" --max-tokens "$STEPS" --ignore-eos --generation-config vllm \
    --json $(qargs "$q") 2>/dev/null | tail -1 >"$TMP/free-$q.json"
done
forced=$(node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[2],"utf8")); console.log([...process.argv[1].split(","), ...j.token_ids.slice(0, -1)].join(","))' "$prompt" "$TMP/free-none.json")
for q in $runs; do
  "$CPINFER" generate --model "$MODEL" --prompt-ids "$forced" --max-tokens 1 --json --generation-config vllm \
    $(qargs "$q") --prompt-logits-out "$TMP/forced-$q.bin" 2>/dev/null | tail -1 >"$TMP/forced-$q.json"
done
# Row 31 (after the 32-token prompt) predicts generated token 0, ..., row 31 + 255 token 255.
for m in $INT8_MATHS; do
  cmp=$(node bench/scripts/compare_logits.js "$TMP/forced-none.bin" "$TMP/forced-int8-$m.bin" "$V" 31)
  node -e '
    const fs = require("fs");
    const a = JSON.parse(fs.readFileSync(process.argv[1])), b = JSON.parse(fs.readFileSync(process.argv[2]));
    let i = 0; while (i < a.token_ids.length && a.token_ids[i] === b.token_ids[i]) i++;
    const fn = JSON.parse(fs.readFileSync(process.argv[5])), f8 = JSON.parse(fs.readFileSync(process.argv[6]));
    console.log(JSON.stringify({preset: process.argv[3], int8_math: process.argv[7], steps: a.token_ids.length,
      free_running_common_prefix: i, teacher_forced: JSON.parse(process.argv[4]),
      rss_bytes: {none: fn.rss_bytes, int8: f8.rss_bytes},
      peak_rss_bytes: {none: fn.peak_rss_bytes, int8: f8.peak_rss_bytes}}));
  ' "$TMP/free-none.json" "$TMP/free-int8-$m.json" "$PRESET" "$cmp" "$TMP/forced-none.json" \
    "$TMP/forced-int8-$m.json" "$m" | tee -a "$OUT"
done
