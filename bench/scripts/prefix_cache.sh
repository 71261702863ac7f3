#!/usr/bin/env bash
# Prefix caching on a long document (not part of the test suite). For each layout in LAYOUTS
# (default: one rank, and tp 2 x pcp 2), `cpinfer serve` on the qwen2.5-0.5b preset with
# prefix caching on, then:
#   doc     `bench serve --dataset-name prefix-repetition`: one DOC-token document and
#           QUESTIONS questions of 64 tokens after it, one at a time (--max-concurrency 1):
#           the first request prefills the document, the others should find it cached.
#           Reports the first request's TTFT, the others' median, and the hit rate.
#   decode  8 random 512-token prompts, 128 tokens each, all at once, with caching on and
#           off (a server each, REPEATS times, which one runs first alternating): TPOT and
#           ITL medians, to show that caching does not slow decoding.
# Other processes' CPU time during each run (from /proc/stat, all CPUs minus this job) is
# stored with the result. One JSON line per run to $OUT (default
# bench/results/prefix_cache.jsonl).
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib/wait_for_server.sh"
source "$(dirname "$0")/../../scripts/lib/cpu_time.sh"
cd "$(dirname "$0")/../.."
CPINFER=${CPINFER:-build/cpinfer}
OUT=${OUT:-bench/results/prefix_cache.jsonl}
MODEL=${MODEL:-models/qwen2.5-0.5b}
DOC=${DOC:-16384}
QUESTIONS=${QUESTIONS:-8}
REPEATS=${REPEATS:-3}
PARTS=${PARTS:-"doc decode"}
LAYOUTS=${LAYOUTS:-"one tp2-pcp2"}
mkdir -p "$(dirname "$OUT")" models
[[ -f "$MODEL/config.json" ]] || "$CPINFER" make-model --preset qwen2.5-0.5b --out "$MODEL" 2>/dev/null
layout_flags() { [[ $1 == one ]] && echo "" || echo "-tp 2 -pcp 2"; }
CPU=$(lscpu | sed -n 's/^Model name: *//p')

# run NAME LAYOUT CACHING bench-serve-args...: one server, one bench serve, one JSON line.
run() {
  local part=$1 layout=$2 caching=$3; shift 3
  local flag=--enable-prefix-caching log res server b0 s0 b1 s1
  ((caching)) || flag=--no-enable-prefix-caching
  log=$(mktemp); res=$(mktemp)
  # shellcheck disable=SC2046
  "$CPINFER" serve "$MODEL" --port 0 --served-model-name m --max-model-len $((DOC + 256)) \
    --kv-cache-space 1 $(layout_flags "$layout") "$flag" >"$log" 2>&1 &
  server=$!
  wait_for_server "$server" "$log" "$part-$layout" 300
  "$CPINFER" bench serve --url "$URL" --num-prompts 2 --input-len 16 --output-len 4 --json >/dev/null
  b0=$(busy_jiffies); s0=$(tree_jiffies "$server")
  "$CPINFER" bench serve --url "$URL" "$@" --timeout 3600 --json >"$res"
  b1=$(busy_jiffies); s1=$(tree_jiffies "$server")
  echo "{\"part\":\"$part\",\"layout\":\"$layout\",\"caching\":$caching,\"cpu\":\"$CPU\",\"busy_jiffies\":$((b1 - b0)),\"server_jiffies\":$((s1 - s0)),\"bench\":$(cat "$res")}" | tee -a "$OUT"
  kill -TERM "$server"; wait "$server" 2>/dev/null || true
  rm -f "$log" "$res"
}

for layout in $LAYOUTS; do
  if [[ " $PARTS " == *" doc "* ]]; then
    run doc "$layout" 1 --dataset-name prefix-repetition --prefix-repetition-num-prefixes 1 \
      --prefix-repetition-prefix-len "$DOC" --prefix-repetition-suffix-len 64 \
      --prefix-repetition-output-len 32 --num-prompts "$QUESTIONS" --max-concurrency 1
  fi
  if [[ " $PARTS " == *" decode "* ]]; then
    for rep in $(seq "$REPEATS"); do
      order="1 0"; ((rep % 2)) || order="0 1"  # alternate which runs first
      for caching in $order; do
        run decode "$layout" "$caching" --num-prompts 8 --input-len 512 --output-len 128 --seed "$rep"
      done
    done
  fi
done
