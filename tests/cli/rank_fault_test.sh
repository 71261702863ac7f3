#!/usr/bin/env bash
# A rank of a multi-rank `cpinfer serve` killed with SIGKILL (or frozen with SIGSTOP): the whole job must
# notice within 10 s, /health must fail (503 while rank 0 still answers), requests in flight
# must end with an error (a streamed one: an SSE error event; a whole one: an error body
# and an incomplete transfer, so that the openai npm client raises on both) naming the dead rank, new requests get 503, and every process must exit, non-zero, with a
# message naming the rank; no cpinfer process may be left. Two scenarios:
#   decode:  under the user's mpiexec (2 ranks, pcp 2), rank 1 killed while two requests
#            decode (one streamed, one whole);
#   prefill: cpinfer relaunching itself under mpirun (2 ranks, pcp 2), rank 1 killed while
#            a long prompt is being prefilled;
#   frozen:  under the user's mpiexec, rank 1 stopped with SIGSTOP while a request decodes:
#            its heartbeats stop, rank 0 reports it "not responding" after --watchdog-timeout
#            (2 s here), and the stopped process is gone with the rest of the job.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib/wait_for_server.sh"
CPINFER=${1:?usage: rank_fault_test.sh path/to/cpinfer}
SRC=${CPINFER_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v mpiexec >/dev/null || { echo "FAIL: mpiexec not found (apt-get install openmpi-bin)" >&2; exit 1; }
TMP=$(mktemp -d)
MODEL="$TMP/tiny-fault-$$"  # unique: pgrep finds exactly this test's processes by it
cleanup() {
  local p  # this test's processes only: their command line names its unique model dir
  for p in $(pgrep -f -- "--model $MODEL " || true); do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -n "${LOG:-}" ]] && tail -20 "$LOG" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --seed 5 --out "$MODEL" 2>/dev/null

# rank_pid R: pid of world rank R of this test's job
rank_pid() {
  local p
  for p in $(pgrep -f -- "--model $MODEL " || true); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
      echo "$p"; return
    fi
  done
}
start_server() {  # start_server NAME launcher-prefix...; sets URL, JOB_PID, LOG
  local name=$1; shift
  LOG="$TMP/$name.log"
  "$@" "$CPINFER" serve --model "$MODEL" --port 0 --served-model-name tiny \
    --max-model-len 12000 --kv-cache-space 0.1 -pcp 2 ${WATCHDOG_FLAGS:-} >"$LOG" 2>&1 &
  JOB_PID=$!
  wait_for_server "$JOB_PID" "$LOG" "$name"
}
post() {  # post OUT BODY: a completion in the background, its body to OUT
  curl -sN -m 60 "$URL/v1/completions" -H 'Content-Type: application/json' -d "$2" >"$1" 2>&1 &
}
# After the kill at T_KILL: health, in-flight errors, 503 for new work, exit of everything.
# WHAT (default "died"): how the messages describe the lost rank.
check_failure() {  # check_failure SCENARIO DEAD_RANK OUTFILES...
  local scen=$1 dead=$2; shift 2
  local what=${WHAT:-died}
  local t_health="" saw503=0 new503=0 h
  for _ in $(seq 300); do
    h=$(curl -s -m 1 -o "$TMP/health.json" -w '%{http_code}' "$URL/health" || true)
    if [[ "$h" != 200 ]]; then
      [[ -z "$t_health" ]] && t_health=$(since "$T_KILL")
      if [[ "$h" == 503 ]]; then
        saw503=1
        grep -q "rank $dead $what" "$TMP/health.json" || fail "$scen: /health 503 does not name rank $dead: $(cat "$TMP/health.json")"
        local c
        c=$(curl -s -m 2 -o "$TMP/new.json" -w '%{http_code}' "$URL/v1/completions" \
              -H 'Content-Type: application/json' -d '{"model":"tiny","prompt":"hi","max_tokens":2}' || true)
        if [[ "$c" == 503 ]]; then
          grep -q "rank $dead $what" "$TMP/new.json" || fail "$scen: new request's 503 does not name rank $dead"
          new503=1
        fi
      fi
      break
    fi
    sleep 0.05
  done
  [[ -n "$t_health" ]] || fail "$scen: /health still 200 15 s after the kill"
  # Every process of the job gone (mpirun and the ranks), within 10 s of the kill.
  local t_exit=""
  for _ in $(seq 200); do
    if ! pgrep -f -- "--model $MODEL " >/dev/null; then t_exit=$(since "$T_KILL"); break; fi
    sleep 0.05
  done
  [[ -n "$t_exit" ]] || { pgrep -af -- "--model $MODEL " >&2; fail "$scen: processes left 10 s after the kill"; }
  local rc=0
  wait "$JOB_PID" || rc=$?
  ((rc != 0)) || fail "$scen: the job exited with status 0 after a rank died"
  grep -q "cpinfer: rank $dead $what" "$LOG" || fail "$scen: no exit message naming rank $dead"
  local f t_err
  for f in "$@"; do
    wait_for_curls
    grep -q "rank $dead $what" "$f" || fail "$scen: in-flight request $(basename "$f") got no error naming rank $dead: $(tail -c 300 "$f")"
  done
  t_err=$(awk -v a="$T_KILL" '{ printf "%.2f", $1 - a; exit }' "$TMP/err_time" 2>/dev/null || echo "?")
  awk -v h="$t_health" -v e="$t_exit" 'BEGIN { exit !(h <= 10 && e <= 10) }' ||
    fail "$scen: detection took too long (health $t_health s, exit $t_exit s)"
  echo "$scen: lost rank $dead; /health non-200 after $t_health s (503 seen: $saw503, new request 503: $new503), stream error after $t_err s, all processes gone after $t_exit s, job status $rc"
  grep "cpinfer: rank" "$LOG" | sed "s/^/  $scen log: /"
}
wait_for_curls() { for p in $(jobs -p); do [[ "$p" == "$JOB_PID" ]] || wait "$p" 2>/dev/null || true; done; }
# Records when the first error reaches FILE (polled every 20 ms, in the background).
watch_error() {
  ( for _ in $(seq 1000); do
      if grep -q "${WHAT:-died}" "$1" 2>/dev/null; then now >"$TMP/err_time"; exit; fi
      sleep 0.02
    done ) &
}

# ---- scenario 1: mid-decode, under the user's mpiexec -----------------------------------
rm -f "$TMP/err_time"
start_server decode mpiexec -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1
post "$TMP/stream.txt" '{"model":"tiny","prompt":"hello there","max_tokens":4000,"ignore_eos":true,"stream":true}'
post "$TMP/whole.json" '{"model":"tiny","prompt":"hello again","max_tokens":4000,"ignore_eos":true}'
# The same through the openai npm client, whole and streamed: it must raise, not return.
for mode in whole stream; do
  node "$SRC/tests/server/failing_request_client.mjs" "$URL" tiny "$mode" >"$TMP/client-$mode.json" 2>&1 &
done
for _ in $(seq 100); do grep -q '"text"' "$TMP/stream.txt" 2>/dev/null && break; sleep 0.1; done
grep -q '"text"' "$TMP/stream.txt" || fail "decode: the streamed request produced no token"
for _ in $(seq 100); do  # the two curl and two openai-client requests all running
  [[ "$(curl -s "$URL/metrics" | awk '$1 ~ /^vllm:num_requests_running/ { print $2 }')" -ge 4 ]] && break
  sleep 0.1
done
sleep 0.5
R1=$(rank_pid 1)
[[ -n "$R1" ]] || fail "decode: rank 1 not found"
watch_error "$TMP/stream.txt"
T_KILL=$(now)
kill -9 "$R1"
check_failure decode 1 "$TMP/stream.txt" "$TMP/whole.json"
grep -q '^data: {"error"' "$TMP/stream.txt" || fail "decode: the stream has no SSE error event"
# A whole response whose status (200) went out before the failure ends without its last
# chunk: curl reports the transfer incomplete, the openai client raises.
for mode in whole stream; do
  grep -q '"outcome":"raised"' "$TMP/client-$mode.json" ||
    fail "decode: the openai client did not raise on the failed $mode request: $(cat "$TMP/client-$mode.json")"
  echo "decode: openai client, $mode request: $(cat "$TMP/client-$mode.json")"
done

# ---- scenario 2: mid-prefill, relaunched under mpirun by cpinfer itself ------------------
rm -f "$TMP/err_time"
start_server prefill env
PROMPT=$(node -e 'console.log(JSON.stringify(Array.from({length: 10000}, (_, i) => 1000 + (i * 7919) % 50000)))')
post "$TMP/prefill.txt" "{\"model\":\"tiny\",\"prompt\":$PROMPT,\"max_tokens\":8,\"stream\":true}"
sleep 1
grep -q '"text"' "$TMP/prefill.txt" && fail "prefill: the prompt was already prefilled after 1 s (make it longer)"
R1=$(rank_pid 1)
[[ -n "$R1" ]] || fail "prefill: rank 1 not found"
watch_error "$TMP/prefill.txt"
T_KILL=$(now)
kill -9 "$R1"
check_failure prefill 1 "$TMP/prefill.txt"

# ---- scenario 3: rank 1 frozen (SIGSTOP) mid-decode, under the user's mpiexec -------------
rm -f "$TMP/err_time"
WATCHDOG_FLAGS="--watchdog-timeout 2"
start_server frozen mpiexec -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1
post "$TMP/frozen.txt" '{"model":"tiny","prompt":"hello there","max_tokens":4000,"ignore_eos":true,"stream":true}'
for _ in $(seq 100); do grep -q '"text"' "$TMP/frozen.txt" 2>/dev/null && break; sleep 0.1; done
grep -q '"text"' "$TMP/frozen.txt" || fail "frozen: the streamed request produced no token"
R1=$(rank_pid 1)
[[ -n "$R1" ]] || fail "frozen: rank 1 not found"
WHAT="is not responding"
watch_error "$TMP/frozen.txt"
T_KILL=$(now)
kill -STOP "$R1"
check_failure frozen 1 "$TMP/frozen.txt"
grep -q '^data: {"error"' "$TMP/frozen.txt" || fail "frozen: the stream has no SSE error event"
echo "PASS"
