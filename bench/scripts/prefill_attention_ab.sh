#!/usr/bin/env bash
# Prefill (or decode) attention kernel of two builds side by side (not part of the test suite):
# `bench attention --mode prefill` (causal, page 16; MODE=decode: one decode row over LEN
# tokens of context, the cache cycled through 256 MiB of layers so that it streams from
# memory as in a forward pass) on the head shapes of Qwen2.5-0.5B (14 q / 2 KV
# heads, head_dim 64), 16 / 2 / 128, Qwen2.5-7B (28 / 4 / 128) and Llama-3.1-8B (32 / 8 /
# 128), f32 and bf16 KV caches, 1 and 2 threads, ROUNDS rounds in which the two binaries
# alternate run by run. Also records `bench peak` (the FMA peak the GFLOP/s are compared with)
# and, per run, the CPU time other processes took meanwhile (/proc/stat minus the run's own:
# `other_cpu_s`), so contaminated runs can be spotted. One JSON line per run to $OUT.
#   OLD, NEW  the two cpinfer binaries (default: NEW=build/cpinfer, OLD unset: NEW alone)
#   MODE (prefill), LEN (4096 for prefill, 32768 for decode), ROUNDS (2),
#   OUT (bench/results/prefill_attention_ab.jsonl), BF16_MATH (exact: f32 FMAs; dot: bf16 dot
#   products over a bf16 cache where the CPU has them), KVS (the cache dtypes: "f32 bf16")
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/cpu_time.sh
NEW=${NEW:-build/cpinfer}
OLD=${OLD:-}
MODE=${MODE:-prefill}
case $MODE in
  prefill) LEN=${LEN:-4096}; len_flag=--seq-len; reps=3 ;;
  decode) LEN=${LEN:-32768}; len_flag=--context-len; reps=9 ;;
  *) echo "MODE must be prefill or decode, not '$MODE'" >&2; exit 2 ;;
esac
ROUNDS=${ROUNDS:-2}
BF16_MATH=${BF16_MATH:-exact}
KVS=${KVS:-f32 bf16}
OUT=${OUT:-bench/results/prefill_attention_ab.jsonl}
mkdir -p "$(dirname "$OUT")"
lscpu | grep "Model name"
echo "{\"peak\":$("$NEW" bench peak --json --repeats 3 | tail -1)}" | tee -a "$OUT"
builds=(new)
[[ -n "$OLD" ]] && builds=(old new)
for r in $(seq "$ROUNDS"); do
  for shape in "14 2 64" "16 2 128" "28 4 128" "32 8 128"; do
    read -r hq hkv d <<<"$shape"
    for kv in $KVS; do
      for t in 1 2; do
        for build in "${builds[@]}"; do
          bin=$NEW
          [[ "$build" == old ]] && bin=$OLD
          b0=$(busy_jiffies)
          s0=$(date +%s.%N)
          line=$("$bin" bench attention --mode "$MODE" "$len_flag" "$LEN" --num-q-heads "$hq" \
            --num-kv-heads "$hkv" --head-dim "$d" --kv-cache-dtype "$kv" --bf16-math "$BF16_MATH" \
            --threads "$t" --repeats "$reps" --json 2>/dev/null | tail -1)
          # Other processes' CPU seconds: the machine's busy time minus this run's own (at
          # most t threads busy for the whole wall time: an upper bound of its own share).
          other=$(awk -v s0="$s0" -v s1="$(date +%s.%N)" -v b="$(( $(busy_jiffies) - b0 ))" \
            -v hz="$(getconf CLK_TCK)" -v t="$t" \
            'BEGIN { o = b / hz - t * (s1 - s0); printf "%.2f", (o < 0 ? 0 : o) }')
          echo "{\"round\":$r,\"build\":\"$build\",\"other_cpu_s\":$other,\"result\":$line}" | tee -a "$OUT"
        done
      done
    done
  done
done
