#!/usr/bin/env bash
# Decode batches under prefill context parallelism, one or more cpinfer binaries side by side
# (not part of the test suite). For each round, each binary, each batch size in BATCHES:
# `cpinfer serve MODEL LAYOUT`, then `bench serve` with BATCH prompts of 64 tokens that all
# start at once and decode OUTLEN tokens each. Reports the streams' ITL p50 / p99 and the
# output token rate; the other processes' CPU time during the run (whole machine busy time
# minus the server's and the client's) is stored with the result.
#   bash bench/scripts/pcp_decode_batch_ab.sh LABEL=BINARY [LABEL=BINARY...]
# Knobs (environment): MODEL (models/qwen2.5-0.5b-L8), LAYOUT ("-pcp 2"), BATCHES ("1 8"),
# OUTLEN (256), ROUNDS (3), OUT (bench/results/pcp_decode_batch_ab.jsonl).
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib/wait_for_server.sh"
source "$(dirname "$0")/../../scripts/lib/cpu_time.sh"
cd "$(dirname "$0")/../.."
MODEL=${MODEL:-models/qwen2.5-0.5b-L8}
LAYOUT=${LAYOUT-"-pcp 2"}  # set and empty: one rank
BATCHES=${BATCHES:-1 8}
OUTLEN=${OUTLEN:-256}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-bench/results/pcp_decode_batch_ab.jsonl}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
(($# >= 1)) || { echo "usage: $0 LABEL=BINARY [LABEL=BINARY...]" >&2; exit 2; }
[[ -f "$MODEL/config.json" ]] || { echo "no model at $MODEL (cpinfer make-model)" >&2; exit 2; }
mkdir -p "$(dirname "$OUT")"
cpu=$(lscpu | sed -n 's/^Model name: *//p')
for round in $(seq "$ROUNDS"); do
  for spec in "$@"; do
    label=${spec%%=*} bin=${spec#*=}
    for batch in $BATCHES; do
      log=$(mktemp) res=$(mktemp)
      # shellcheck disable=SC2086
      "$bin" serve "$MODEL" --port 0 --served-model-name m --max-model-len 4096 \
        --kv-cache-space 0.5 $LAYOUT --generation-config vllm >"$log" 2>&1 &
      server=$!
      wait_for_server "$server" "$log" "$label" 120
      "$bin" bench serve --url "$URL" --num-prompts 2 --input-len 16 --output-len 4 --json >/dev/null
      b0=$(busy_jiffies) s0=$(tree_jiffies "$server")
      own_jiffies
      c0=$own
      "$bin" bench serve --url "$URL" --num-prompts "$batch" --input-len 64 --output-len "$OUTLEN" \
        --seed "$round" --json >"$res"
      b1=$(busy_jiffies) s1=$(tree_jiffies "$server")
      own_jiffies
      c1=$own
      others=$(((b1 - b0) - (s1 - s0) - (c1 - c0)))
      echo "{\"label\":\"$label\",\"round\":$round,\"batch\":$batch,\"layout\":\"$LAYOUT\",\"model\":\"$MODEL\",\"cpu\":\"$cpu\",\"others_jiffies\":$others,\"result\":$(cat "$res")}" | tee -a "$OUT"
      kill -TERM "$server"; wait "$server" 2>/dev/null || true
      rm -f "$log" "$res"
    done
  done
done
