#!/usr/bin/env bash
# Short variant of bench/scripts/load_test.sh for ctest: 16 streamed clients for
# 12 s on the tiny preset (mixed prompt lengths and max_tokens, ~10% disconnects mid-stream,
# requests that must be rejected), then a server with a KV pool too small for the load, which
# must preempt and give the same greedy outputs as the first. Every request must be
# accounted for against /metrics, every KV page back on every rank, RSS flat.
set -euo pipefail
CPINFER=${1:?usage: load_test.sh path/to/cpinfer}
SRC=${CPINFER_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --seed 5 --out "$TMP/tiny" 2>/dev/null
CLIENTS=16 DURATION=12 MIN_PROMPT=8 MAX_PROMPT=256 MAX_TOKENS=32 MAX_MODEL_LEN=600 \
  KV_SPACE=0.1 PRESSURE_BLOCKS=40 PRESSURE_CLIENTS=8 PRESSURE_DURATION=6 GREEDY_N=8 \
  GREEDY_MAX_TOKENS=24 RSS_TOLERANCE=0.15 LABEL=ctest JSONL="$TMP/load_test.jsonl" \
  bash "$SRC/bench/scripts/load_test.sh" "$CPINFER" "$TMP/tiny"
