#!/usr/bin/env bash
# Load test of `cpinfer serve`: builds nothing. Starts a server on MODEL, drives it
# with CLIENTS concurrent streamed clients for DURATION seconds (bench/scripts/load_test.mjs:
# mixed prompt lengths and max_tokens, ~10% disconnects mid-stream, some requests that must
# be rejected) plus a fixed set of greedy requests; then a second server with a small KV pool
# (--num-kv-blocks PRESSURE_BLOCKS) and PRESSURE_CLIENTS clients for PRESSURE_DURATION
# seconds, which must preempt, and whose greedy outputs must equal the first run's.
# Each run appends one JSON line to $JSONL.
#
#   bench/scripts/load_test.sh path/to/cpinfer MODEL_DIR [extra serve args, e.g. -tp 2]
#   env: CLIENTS=64 DURATION=300 MIN_PROMPT=8 MAX_PROMPT=1024 MAX_TOKENS=128 DISCONNECT=0.1
#        REJECT=0.03 MAX_MODEL_LEN=1200 KV_SPACE=0.5 PRESSURE_BLOCKS=96 PRESSURE_CLIENTS=16
#        PRESSURE_DURATION=60 GREEDY_N=24 GREEDY_MAX_TOKENS=48 RSS_TOLERANCE=0.10
#        JSONL=bench/results/load_test.jsonl LABEL=load NODE=node
#        RSS_TAIL_TOLERANCE=-1 (>= 0: also check RSS growth over the last 20 minutes, for soaks)
#        SHARED_PREFIX=0 PREFIXES=4 (a fraction of the requests start with one of PREFIXES shared
#        prompts: prefix-cache hits) EARLY_CANCEL=0 EARLY_CANCEL_MS=3000 (a fraction dropped by
#        the client within EARLY_CANCEL_MS of the response's start: queued or mid-prefill)
set -euo pipefail
CPINFER=${1:?usage: load_test.sh path/to/cpinfer MODEL_DIR [serve args...]}
MODEL=${2:?usage: load_test.sh path/to/cpinfer MODEL_DIR [serve args...]}
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../scripts/lib/wait_for_server.sh"
ROOT=$(cd "$HERE/../.." && pwd)
CLIENTS=${CLIENTS:-64} DURATION=${DURATION:-300}
MIN_PROMPT=${MIN_PROMPT:-8} MAX_PROMPT=${MAX_PROMPT:-1024} MAX_TOKENS=${MAX_TOKENS:-128}
DISCONNECT=${DISCONNECT:-0.1} REJECT=${REJECT:-0.03} MAX_MODEL_LEN=${MAX_MODEL_LEN:-1200}
KV_SPACE=${KV_SPACE:-0.5} PRESSURE_BLOCKS=${PRESSURE_BLOCKS:-96}
PRESSURE_CLIENTS=${PRESSURE_CLIENTS:-16} PRESSURE_DURATION=${PRESSURE_DURATION:-60}
GREEDY_N=${GREEDY_N:-24} GREEDY_MAX_TOKENS=${GREEDY_MAX_TOKENS:-48}
RSS_TOLERANCE=${RSS_TOLERANCE:-0.10} LABEL=${LABEL:-load} NODE=${NODE:-node}
RSS_TAIL_TOLERANCE=${RSS_TAIL_TOLERANCE:--1}
SHARED_PREFIX=${SHARED_PREFIX:-0} PREFIXES=${PREFIXES:-4}
EARLY_CANCEL=${EARLY_CANCEL:-0} EARLY_CANCEL_MS=${EARLY_CANCEL_MS:-3000}
JSONL=${JSONL:-$ROOT/bench/results/load_test.jsonl}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TMP=$(mktemp -d)
SERVER_PID=
cleanup() {
  [[ -n "$SERVER_PID" ]] && kill "$SERVER_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
trap "exit 1" INT TERM
fail() { echo "FAIL: $*" >&2; [[ -n "${LOG:-}" ]] && tail -20 "$LOG" >&2; exit 1; }

start_server() {  # start_server NAME serve-args...; sets URL, SERVER_PID, RSS_PID, LOG
  local name=$1; shift
  LOG="$TMP/$name.log"
  "$CPINFER" serve --model "$MODEL" --port 0 --served-model-name load \
    --max-model-len "$MAX_MODEL_LEN" "$@" >"$LOG" 2>&1 &
  SERVER_PID=$!
  wait_for_server "$SERVER_PID" "$LOG" "$name" 120
  # The process that serves HTTP: the server itself, or rank 0 under mpirun.
  RSS_PID=$SERVER_PID
  local p
  for p in $(pgrep -f -- "serve --model $MODEL" || true); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=0'; then
      RSS_PID=$p
    fi
  done
}
stop_server() {  # SIGTERM: graceful, must exit within 60 s
  kill -TERM "$SERVER_PID"
  local rc=0
  for _ in $(seq 600); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$SERVER_PID" 2>/dev/null && fail "server did not exit within 60 s of SIGTERM"
  wait "$SERVER_PID" || rc=$?
  SERVER_PID=
  echo "server stopped (status $rc)"
}

# The host's TCP counters that tell connection trouble apart (nstat, from iproute2): accept
# queue overflows, resets sent for data on a closed socket, resets of established
# connections. Printed as the change over each run (other traffic on the host counts too).
tcp_counters() {
  nstat -az 2>/dev/null | awk '$1 ~ /^(TcpExtListenOverflows|TcpExtTCPAbortOnData|TcpEstabResets)$/ {printf "%s=%s ", $1, $2}'
}
tcp_delta() {  # tcp_delta "BEFORE" "AFTER"
  join <(tr ' ' '\n' <<<"$1" | grep = | tr = ' ' | sort) <(tr ' ' '\n' <<<"$2" | grep = | tr = ' ' | sort) |
    awk '{printf "%s +%d  ", $1, $3 - $2} END {print ""}'
}

common=(--clients "$CLIENTS" --min-prompt "$MIN_PROMPT" --max-prompt "$MAX_PROMPT"
        --max-tokens-max "$MAX_TOKENS" --disconnect "$DISCONNECT" --reject "$REJECT"
        --max-model-len "$MAX_MODEL_LEN" --greedy-n "$GREEDY_N"
        --shared-prefix "$SHARED_PREFIX" --prefixes "$PREFIXES"
        --early-cancel "$EARLY_CANCEL" --early-cancel-ms "$EARLY_CANCEL_MS"
        --greedy-max-tokens "$GREEDY_MAX_TOKENS" --rss-tolerance "$RSS_TOLERANCE" --jsonl "$JSONL")
mkdir -p "$(dirname "$JSONL")"
rc=0

echo "== run 1: $CLIENTS clients for $DURATION s, KV $KV_SPACE GiB per rank"
start_server base --kv-cache-space "$KV_SPACE" "$@"
tcp0=$(tcp_counters)
"$NODE" "$HERE/load_test.mjs" --url "$URL" --model load --pid "$RSS_PID" --label "$LABEL" \
  --duration "$DURATION" --greedy-out "$TMP/greedy_base.json" "${common[@]}" \
  --rss-tail-tolerance "$RSS_TAIL_TOLERANCE" || rc=1
echo "TCP counters over run 1: $(tcp_delta "$tcp0" "$(tcp_counters)")"
stop_server

echo "== run 2 (KV pressure): $PRESSURE_CLIENTS clients for $PRESSURE_DURATION s, $PRESSURE_BLOCKS pages per rank"
start_server pressure --num-kv-blocks "$PRESSURE_BLOCKS" "$@"
"$NODE" "$HERE/load_test.mjs" --url "$URL" --model load --pid "$RSS_PID" \
  --label "$LABEL-kv-pressure" --duration "$PRESSURE_DURATION" --expect-preemptions \
  --greedy-out "$TMP/greedy_pressure.json" "${common[@]}" --clients "$PRESSURE_CLIENTS" || rc=1
stop_server

echo "== greedy outputs with and without KV pressure"
"$NODE" "$HERE/load_test.mjs" --compare "$TMP/greedy_base.json" "$TMP/greedy_pressure.json" \
  --label "$LABEL-greedy-compare" | tee -a "$JSONL" || rc=1
((rc == 0)) && echo "PASS" || echo "FAIL"
exit $rc
