#!/usr/bin/env bash
# Online serving benchmark (not part of the test suite): `cpinfer serve` on the
# qwen2.5-0.5b shape (full depth, bf16 weights, f32 KV) driven by `cpinfer bench serve`,
# on one rank and under tp 2 x pcp 2, with all requests at once (rate inf) and with Poisson
# arrivals. CPU time of other processes during each run is read from /proc/stat (all CPUs
# minus this job's) and stored with the result: repeat runs where it is large.
# One JSON line per run to $OUT (default bench/results/serve_bench.jsonl). SERVE_ARGS adds
# flags to `serve` (e.g. "--quantization int8 --int8-math dot"); the line records them.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib/wait_for_server.sh"
cd "$(dirname "$0")/../.."
CPINFER=${CPINFER:-build/cpinfer}
OUT=${OUT:-bench/results/serve_bench.jsonl}
MODEL=${MODEL:-models/qwen2.5-0.5b}
NUM=${NUM:-16}
IN=${IN:-256}
OUTLEN=${OUTLEN:-32}
RATES=${RATES:-"inf 0.5"}
LAYOUTS=${LAYOUTS:-"1 2,2"}
SERVE_ARGS=${SERVE_ARGS:-}
mkdir -p "$(dirname "$OUT")" models
[[ -f "$MODEL/model.safetensors" ]] || "$CPINFER" make-model --preset qwen2.5-0.5b --out "$MODEL"

busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }       # all CPUs, busy
tree_jiffies() {  # CPU time (utime + stime) of process $1 and all its descendants
  local pids
  pids=$(ps -e -o pid=,ppid= | awk -v root="$1" '
    { parent[$1] = $2 } END { for (p in parent) { q = p; while (q != "" && q != root && q in parent && q != 1) q = parent[q]; if (q == root) print p } }')
  local total=0
  for p in $pids; do
    [[ -r /proc/$p/stat ]] && total=$((total + $(awk '{print $14+$15}' "/proc/$p/stat")))
  done
  echo "$total"
}

for layout in $LAYOUTS; do
  IFS=, read -r tp pcp <<<"$layout"
  args=(); [[ -n "${pcp:-}" ]] && args=(-tp "$tp" -pcp "$pcp")
  log=$(mktemp)
  "$CPINFER" serve "$MODEL" --port 0 --served-model-name qwen --max-model-len 4096 \
    --kv-cache-space 1 "${args[@]}" $SERVE_ARGS >"$log" 2>&1 &
  server=$!
  wait_for_server "$server" "$log" "$layout" 120
  url=$URL
  "$CPINFER" bench serve --url "$url" --num-prompts 2 --input-len 16 --output-len 4 --json >/dev/null  # warm-up
  for rate in $RATES; do
    b0=$(busy_jiffies); s0=$(tree_jiffies "$server")
    line=$("$CPINFER" bench serve --url "$url" --num-prompts "$NUM" --input-len "$IN" \
      --output-len "$OUTLEN" --request-rate "$rate" --seed 1 --json)
    b1=$(busy_jiffies); s1=$(tree_jiffies "$server")
    echo "{\"layout\":\"tp ${tp} pcp ${pcp:-1}\",\"serve_args\":\"$SERVE_ARGS\",\"busy_jiffies\":$((b1 - b0)),\"server_jiffies\":$((s1 - s0)),\"result\":$line}" | tee -a "$OUT"
  done
  kill -TERM "$server"; wait "$server" 2>/dev/null || true
  rm -f "$log"
done
