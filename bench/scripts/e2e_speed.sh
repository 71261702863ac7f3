#!/usr/bin/env bash
# End-to-end speed (not part of the test suite): `bench latency` on the
# qwen2.5-0.5b preset (bf16 weights, full depth, f32 KV) with 1 and 2 threads: prefill
# tokens/s and MFU for prompts of 512 to 16384 tokens, decode tokens/s and MBU at contexts
# of 16 to 16384 tokens (the long prompts are decoded for 32 tokens after their prefill).
# Short prompts: median of 3 timed runs after a warm-up (with --profile: per-phase time and
# busy threads); prompts >= 4096: one run each, except the 8192-token target point with 2
# threads (3 runs). CONTEXT_32K=1 adds one 2-thread decode at ~32.7k tokens of context (its
# prefill takes ~7 minutes).
# One JSON line per run to $OUT (default bench/results/e2e_speed.jsonl) with the CPU time
# of other processes during the run (busy jiffies of all CPUs minus this run's own).
set -euo pipefail
cd "$(dirname "$0")/../.."
CPINFER=${CPINFER:-build/cpinfer}
OUT=${OUT:-bench/results/e2e_speed.jsonl}
MODEL=${MODEL:-models/qwen2.5-0.5b}
THREADS=${THREADS:-"2 1"}
mkdir -p "$(dirname "$OUT")" models
[[ -f "$MODEL/model.safetensors" ]] || "$CPINFER" make-model --preset qwen2.5-0.5b --out "$MODEL"

busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
run() {  # run TAG THREADS args...
  local tag=$1 t=$2; shift 2
  local b0 b1 line self tf
  tf=$(mktemp)
  b0=$(busy)
  # bash's `time` keyword: user and system CPU seconds of the command
  { TIMEFORMAT='%U %S'; time "$CPINFER" bench latency --model "$MODEL" --threads-per-rank "$t" "$@" --json >"$tf.out" 2>/dev/null; } 2>"$tf"
  b1=$(busy)
  line=$(tail -1 "$tf.out")
  self=$(tail -1 "$tf" | awk '{printf "%d", ($1 + $2) * 100}')
  rm -f "$tf" "$tf.out"
  echo "{\"tag\":\"$tag\",\"threads\":$t,\"busy_jiffies\":$((b1 - b0)),\"self_jiffies\":$self,\"result\":$line}" | tee -a "$OUT"
}
for t in $THREADS; do
  for n in 512 1024 2048; do run "prefill" "$t" --input-len "$n" --output-len 1 --num-iters 3 --warmup 1 --profile; done
  run "decode" "$t" --input-len 16 --output-len 65 --num-iters 3 --warmup 1 --profile
  for n in 4096 8192 16384; do
    iters=1
    [[ $n == 8192 && $t == 2 ]] && iters=3
    run "prefill+decode" "$t" --input-len "$n" --output-len 33 --num-iters "$iters" --warmup 0
  done
done
if [[ ${CONTEXT_32K:-0} == 1 ]]; then
  # 32704 + 33 stays inside max_position_embeddings (32768)
  run "prefill+decode" 2 --input-len 32704 --output-len 33 --num-iters 1 --warmup 0
fi
