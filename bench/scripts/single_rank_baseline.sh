#!/usr/bin/env bash
# Single-rank baseline on the default model (qwen2.5-0.5b, bf16, full depth):
# load time, prefill tokens/s at 512 and 2048 prompt tokens, decode tokens/s, peak RSS, on 1
# and 2 threads; medians of 5 runs. Writes one JSON line per measurement to $OUT (default
# bench/results/single_rank_baseline.jsonl) and prints them. Not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/../.."
CPINFER=${CPINFER:-build/cpinfer}
MODEL=${MODEL:-models/qwen2.5-0.5b}
OUT=${OUT:-bench/results/single_rank_baseline.jsonl}
mkdir -p "$(dirname "$OUT")"
[[ -f "$MODEL/model.safetensors" ]] || "$CPINFER" make-model --preset qwen2.5-0.5b --out "$MODEL"
: >"$OUT"
# CPU time other processes used during a run, from /proc/stat (jiffies of all CPUs minus ours).
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
for t in 1 2; do
  for n in 512 2048; do
    b0=$(busy)
    line=$("$CPINFER" bench latency --model "$MODEL" --input-len "$n" --output-len 1 \
      --num-iters 5 --warmup 1 --threads-per-rank "$t" --json 2>/dev/null)
    echo "{\"what\":\"prefill\",\"threads\":$t,\"busy_jiffies\":$(( $(busy) - b0 )),\"result\":$line}" | tee -a "$OUT"
  done
  line=$("$CPINFER" bench latency --model "$MODEL" --input-len 16 --output-len 65 \
    --num-iters 5 --warmup 1 --threads-per-rank "$t" --json 2>/dev/null)
  echo "{\"what\":\"decode\",\"threads\":$t,\"result\":$line}" | tee -a "$OUT"
done
# Load time: median of 5 runs of a one-token generate (weights in the page cache).
for i in 1 2 3 4 5; do
  "$CPINFER" generate --model "$MODEL" --prompt-ids 1 --max-tokens 1 --json 2>/dev/null | tail -n 1
done | node -e '
const lines = require("fs").readFileSync(0, "utf8").trim().split("\n").map(JSON.parse);
const load = lines.map(j => j.load_s).sort((a, b) => a - b);
console.log(JSON.stringify({what: "load", load_s_median: load[2], load_s: load,
                            peak_rss_bytes: lines[0].peak_rss_bytes}));' | tee -a "$OUT"
