#!/usr/bin/env bash
# What chunking a prompt costs: `generate` on one long prompt, unchunked and in chunks, for
# one or more cpinfer binaries (an A/B of two builds), interleaved round by round. One JSON
# line per run: binary label, chunk, time to first token, and the CPU time other processes
# used during the run (whole machine busy time minus the run's own; a large value marks a
# contaminated run).
#   bash bench/scripts/chunked_prefill_cost.sh LABEL=BINARY [LABEL=BINARY...]
# Knobs (environment): MODEL (models/tiny-8l), LAYOUT ("-pcp 2 --threads 1"), PROMPT_LEN
# (8192), CHUNKS ("128 8192"), ROUNDS (3), KV (bf16), JSONL (append the lines to this file).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/cpu_time.sh
MODEL=${MODEL:-models/tiny-8l}
LAYOUT=${LAYOUT--pcp 2 --threads 1}  # set and empty: one rank, all cores
PROMPT_LEN=${PROMPT_LEN:-8192}
CHUNKS=${CHUNKS:-128 8192}
ROUNDS=${ROUNDS:-3}
KV=${KV:-bf16}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
(($# >= 1)) || { echo "usage: $0 LABEL=BINARY [LABEL=BINARY...]" >&2; exit 2; }
[[ -d "$MODEL" ]] || { echo "no model at $MODEL (cpinfer make-model)" >&2; exit 2; }
# A fixed pseudo-random prompt of token ids (the same for every run).
ids=$(awk -v n="$PROMPT_LEN" 'BEGIN { x = 12345; for (i = 0; i < n; ++i) {
  x = (x * 1103515245 + 12345) % 2147483648; printf "%s%d", (i ? "," : ""), 1000 + x % 149000 } }')
for ((round = 1; round <= ROUNDS; ++round)); do
  for spec in "$@"; do
    label=${spec%%=*} bin=${spec#*=}
    for chunk in $CHUNKS; do
      b0=$(busy_jiffies); own_jiffies; o0=$own
      # shellcheck disable=SC2086
      out=$("$bin" generate --model "$MODEL" $LAYOUT --prompt-ids "$ids" --max-tokens 1 \
        --prefill-chunk "$chunk" --kv-cache-dtype "$KV" --json 2>/dev/null | tail -1)
      b1=$(busy_jiffies); own_jiffies
      others=$((b1 - b0 - (own - o0)))
      line=$(node -e '
        const r = JSON.parse(process.argv[1]);
        console.log(JSON.stringify({ label: process.argv[2], round: +process.argv[3],
          chunk: +process.argv[4], prompt_tokens: r.prompt_tokens, ttft_s: r.ttft_s,
          layout: r.layout, others_jiffies: +process.argv[5] }));' "$out" "$label" "$round" "$chunk" "$others")
      echo "$line"
      [[ -n "${JSONL:-}" ]] && echo "$line" >> "$JSONL"
    done
  done
done
