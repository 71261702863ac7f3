#!/usr/bin/env bash
# Decode attention over a bf16 KV cache, the two arithmetic paths side by side (not part of
# the test suite): bf16 dot products (vdpbf16ps, --bf16-math dot) and f32 FMA on widened
# K/V (--bf16-math exact), as a fraction of the read bandwidth measured in the same run, on
# the head shapes of qwen2.5-0.5b (14 q / 2 kv heads, 64) and Llama-3 8B (32 / 8, 128),
# 8192 tokens of context, batch 1 and 4, 1 and 2 threads, ROUNDS interleaved rounds. Also
# prints bench peak's units (fp32 FMA vs bf16 dot throughput of this CPU). One JSON line per
# run to $OUT (default bench/results/decode_attention_units.jsonl); with LABEL set, each line
# also carries "build": LABEL (for A/B runs of two builds, one script run per build and round).
set -euo pipefail
cd "$(dirname "$0")/../.."
CPINFER=${CPINFER:-build/cpinfer}
OUT=${OUT:-bench/results/decode_attention_units.jsonl}
ROUNDS=${ROUNDS:-3}
LABEL=${LABEL:-}
build_field=""
[[ -n "$LABEL" ]] && build_field="\"build\":\"$LABEL\","

mkdir -p "$(dirname "$OUT")"
lscpu | grep "Model name"
"$CPINFER" bench peak --json --repeats 3 --read-mib 512 | tee -a "$OUT"
for r in $(seq "$ROUNDS"); do
  for shape in "14 2 64" "32 8 128"; do
    read -r hq hkv d <<<"$shape"
    for batch in 1 4; do
      for t in 1 2; do
        for math in dot exact; do
          line=$("$CPINFER" bench attention --mode decode --context-len 8192 --batch "$batch" \
            --num-q-heads "$hq" --num-kv-heads "$hkv" --head-dim "$d" --kv-cache-dtype bf16 \
            --bf16-math "$math" --threads "$t" --repeats 7 --measure-peak --json 2>/dev/null | tail -1)
          echo "{${build_field}\"round\":$r,\"result\":$line}" | tee -a "$OUT"
        done
      done
    done
  done
done
