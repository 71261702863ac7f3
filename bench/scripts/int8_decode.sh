#!/usr/bin/env bash
# Decode speed with --quantization int8 against the unquantized weights (not part of the test
# suite): `bench latency` on a synthetic preset (default qwen2.5-0.5b, bf16 weights, full
# depth) at an empty context (16-token prompt, 65 tokens decoded) and after an 8192-token
# prompt (CONTEXT_8K=0 skips it), 1 and 2 threads, the two quantizations interleaved over
# ROUNDS rounds so that the machine's drift hits both alike. One JSON line per run to $OUT
# (default bench/results/int8_decode.jsonl) with the CPU time other processes took during
# the run (busy jiffies of all CPUs minus this run's own). RUNS (default "none int8-exact
# int8-dot") lists the configurations: none, or int8 with that --int8-math (plain "int8":
# the default, auto).
set -euo pipefail
cd "$(dirname "$0")/../.."
CPINFER=${CPINFER:-build/cpinfer}
OUT=${OUT:-bench/results/int8_decode.jsonl}
PRESET=${PRESET:-qwen2.5-0.5b}
MODEL=${MODEL:-models/$PRESET}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-"2 1"}
RUNS=${RUNS:-"none int8-exact int8-dot"}
mkdir -p "$(dirname "$OUT")" models
[[ -f "$MODEL/model.safetensors" ]] || "$CPINFER" make-model --preset "$PRESET" --out "$MODEL"

busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
run() {  # run TAG THREADS RUN args... (RUN: none, int8 or int8-MATH)
  local tag=$1 t=$2 q=$3; shift 3
  local b0 b1 line self tf
  local -a qa=(--quantization "${q%%-*}")
  [[ $q == int8-* ]] && qa+=(--int8-math "${q#int8-}")
  tf=$(mktemp)
  b0=$(busy)
  { TIMEFORMAT='%U %S'; time "$CPINFER" bench latency --model "$MODEL" --threads-per-rank "$t" \
      "${qa[@]}" --kv-cache-dtype bf16 "$@" --json >"$tf.out" 2>/dev/null; } 2>"$tf"
  b1=$(busy)
  line=$(tail -1 "$tf.out")
  self=$(tail -1 "$tf" | awk '{printf "%d", ($1 + $2) * 100}')
  rm -f "$tf" "$tf.out"
  echo "{\"tag\":\"$tag\",\"threads\":$t,\"quantization\":\"$q\",\"busy_jiffies\":$((b1 - b0)),\"self_jiffies\":$self,\"result\":$line}" | tee -a "$OUT"
}
for r in $(seq "$ROUNDS"); do
  for t in $THREADS; do
    for q in $RUNS; do
      run "decode_empty" "$t" "$q" --input-len 16 --output-len 65 --num-iters 3 --warmup 1
    done
  done
done
if [[ "${CONTEXT_8K:-1}" == 1 ]]; then
  for q in $RUNS; do
    run "decode_8k" 2 "$q" --input-len 8192 --output-len 33 --num-iters 1 --warmup 0
  done
fi
