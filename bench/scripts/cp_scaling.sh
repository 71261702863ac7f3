#!/usr/bin/env bash
# Context-parallel benchmarks (not part of the test suite):
#  1. PCP strong scaling: a 16k-token prompt on the qwen2.5-0.5b shape with 8 layers, pcp 1 vs
#     pcp 2 (and pcp 4, oversubscribed, at 4k), 1 thread per rank: time to first token.
#  2. kv_bytes_per_rank at W = 1, 2, 4, 8 against the single-rank figure / W.
#  3. The share of prefill and of a decode step spent in collectives, per layout.
# One JSON line per run to $OUT (default bench/results/cp_scaling.jsonl).
set -euo pipefail
cd "$(dirname "$0")/../.."
CPINFER=${CPINFER:-build/cpinfer}
OUT=${OUT:-bench/results/cp_scaling.jsonl}
LONG=${LONG:-16384}
mkdir -p "$(dirname "$OUT")" models
: >"$OUT"
M8=models/qwen2.5-0.5b-L8
[[ -f "$M8/model.safetensors" ]] || "$CPINFER" make-model --preset qwen2.5-0.5b --num-layers 8 --out "$M8"
TINY=models/tiny-L4
[[ -f "$TINY/model.safetensors" ]] || "$CPINFER" make-model --preset tiny --out "$TINY"
run() {  # run TAG args...
  local tag=$1; shift
  local line
  line=$("$CPINFER" bench latency "$@" --threads-per-rank 1 --json 2>/dev/null)
  echo "{\"tag\":\"$tag\",\"result\":$line}" | tee -a "$OUT"
}
# 1. strong scaling (one timed request each; the prefill dominates)
run scaling "--model" "$M8" --input-len "$LONG" --output-len 4 --num-iters 1 --warmup 0
run scaling "--model" "$M8" --input-len "$LONG" --output-len 4 --num-iters 1 --warmup 0 -pcp 2
run scaling4k "--model" "$M8" --input-len 4096 --output-len 4 --num-iters 1 --warmup 0
run scaling4k "--model" "$M8" --input-len 4096 --output-len 4 --num-iters 1 --warmup 0 -pcp 2
run scaling4k "--model" "$M8" --input-len 4096 --output-len 4 --num-iters 1 --warmup 0 -pcp 4
# 2 + 3. KV per rank and communication shares on tiny (16 q / 2 kv heads) at W = 1, 2, 4, 8
for layout in "" "-pcp 2" "-tp 4 -dcp 2" "-pcp 4" "-tp 4 -pcp 2 -dcp 2 --cp-kv-cache-interleave-size 8" "-pcp 8"; do
  # shellcheck disable=SC2086
  run kv --model "$TINY" --input-len 4096 --output-len 16 --num-iters 1 --warmup 0 $layout
done
