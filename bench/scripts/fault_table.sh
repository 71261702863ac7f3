#!/usr/bin/env bash
# The fault table (not part of the test suite; it takes minutes): `cpinfer serve` with tp 2 x
# pcp 2 (4 ranks) on two "hosts", two network namespaces joined by a veth pair
# (scripts/lib/two_hosts.sh, as tests/cli/mpi_two_namespace_test.sh). `--map-by slot` with 2
# slots per host puts ranks 0,1 on host A and 2,3 on host B: each TP group stays inside a
# host and both PCP groups ({0,2}, {1,3}) cross the veth link, over OpenMPI's TCP BTL.
# For each fault, a fresh server, one streamed and one non-streamed completion in flight
# (curl, from host A), then the fault:
#   kill-prefill  kill -9 rank 2 (host B) while two ~10000-token prompts are being prefilled
#   kill-decode   kill -9 rank 2 (host B) while two requests decode
#   cut-2s        host B's end of the veth pair down for 2 s (`ip link set down`), then up
#   cut-60s       the same for 60 s (any cut-Ns: N s)
#   stop-30s      SIGSTOP rank 3 (host B) for 30 s, then SIGCONT (any stop-Ns: N s)
# Every 0.1 s after the fault: /health, the clients, the job, the processes left. Every wait
# is bounded: a client that has not ended by the run's limit is recorded as a hang. Records:
# whether the job survived, detection times (fault -> /health non-200, -> each client's end
# or error), what each client saw (HTTP status, curl status, SSE error event text or
# finish_reason), the processes left (cpinfer by this run's unique model path, and anything
# still running in the namespaces, e.g. an orted) at the end, and, after a fault the job
# survived, whether a new request is served. One JSON line per fault to $OUT (default
# bench/results/fault_table.jsonl; the file is rewritten). FAULTS="kill-decode cut-2s" runs a
# subset; MPIRUN_EXTRA adds mpirun arguments; TCP_RETRIES2=N sets net.ipv4.tcp_retries2 in both
# namespaces (how many times the kernel retransmits unacknowledged data before it gives up on
# the connection: 15, the default, is ~15 minutes; 6 is ~25 s).
# Needs root (CAP_SYS_ADMIN), iproute2, mpirun, curl, jq, node.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/wait_for_server.sh
CPINFER=$(realpath "${CPINFER:-build/cpinfer}")
OUT=${OUT:-bench/results/fault_table.jsonl}
FAULTS=${FAULTS:-"kill-prefill kill-decode cut-2s cut-60s stop-30s"}
DECODE_TOKENS=${DECODE_TOKENS:-400}  # per decode request: long enough to span the fault
for c in ip mpirun curl jq node; do
  command -v "$c" >/dev/null || { echo "fault_table: $c not found" >&2; exit 1; }
done
if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
mkdir -p "$(dirname "$OUT")"
: >"$OUT"

NS_A=cpf$$a NS_B=cpf$$b VETH_A=cpu$$a VETH_B=cpu$$b
IP_A=10.215.0.1 IP_B=10.215.0.2 SUBNET=10.215.0.0/24
TMP=$(mktemp -d)
MODEL=$TMP/tiny-faults-$$  # unique: pgrep finds exactly this script's processes by it
source scripts/lib/two_hosts.sh
job_pids() { pgrep -f -- "--model $MODEL " || true; }
ns_pids() { ip netns pids "$NS_A" 2>/dev/null || true; ip netns pids "$NS_B" 2>/dev/null || true; }
kill_all() {  # this script's processes only: the job's (by model path) and the namespaces'
  local p
  for p in $(job_pids) $(ns_pids); do kill -9 "$p" 2>/dev/null || true; done
}
cleanup() {
  ip -n "$NS_B" link set "$VETH_B" up 2>/dev/null || true
  kill_all
  wait 2>/dev/null || true
  two_hosts_cleanup
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "fault_table: $*" >&2; exit 1; }

two_hosts_up
if [[ -n ${TCP_RETRIES2:-} ]]; then
  for ns in "$NS_A" "$NS_B"; do ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2="$TCP_RETRIES2"; done
fi
two_hosts_mpirun "$TMP" 2
MPIRUN+=(-np 4 --map-by slot -x CPINFER_THREADS_PER_RANK=1)
# MPIRUN_EXTRA: more mpirun arguments (e.g. OpenMPI's daemon keepalive settings), word-split.
# shellcheck disable=SC2206
MPIRUN+=(${MPIRUN_EXTRA:-})
nsa() { ip netns exec "$NS_A" "$@"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --seed 5 --out "$MODEL" 2>/dev/null
CPU=$(lscpu | sed -n 's/^Model name: *//p')
echo "fault_table: $CPU, $(nproc) CPUs; tp 2 x pcp 2, ranks 0,1 on $NS_A, 2,3 on $NS_B"

rank_pids() {  # the job's ranks (cpinfer processes; not mpirun, whose command line names the model too)
  local p
  for p in $(job_pids); do [[ $(cat "/proc/$p/comm" 2>/dev/null) == cpinfer ]] && echo "$p"; done
  return 0
}
rank_pid() {  # rank_pid R: pid of world rank R of this run's job
  local p
  for p in $(job_pids); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
      echo "$p"; return
    fi
  done
}
# A prompt of N token ids, different per SEED (prefix caching must not shorten a prefill).
long_prompt() { node -e 'const [n, s] = process.argv.slice(1).map(Number);
  console.log(JSON.stringify(Array.from({length: n}, (_, i) => 1000 + (i * 7919 + s * 104729) % 50000)))' "$1" "$2"; }
# client NAME BODY: a completion from host A in the background; its body to $D/NAME.out (each
# SSE line also to NAME.ts with its arrival time), its response headers to NAME.hdr, curl's
# exit status to NAME.rc and the end time to NAME.end.
client() {
  ( set +e
    nsa curl -sN -m 300 -D "$D/$1.hdr" "$URL/v1/completions" \
      -H 'Content-Type: application/json' -d @"$2" 2>/dev/null |
      perl -MTime::HiRes=time -e 'open(my $o, ">", $ARGV[0]) or die; open(my $t, ">", $ARGV[1]) or die;
        $o->autoflush(1); $t->autoflush(1);
        while (<STDIN>) { print $o $_; printf $t "%.3f\t%s", time, $_ if /^data: /; }' "$D/$1.out" "$D/$1.ts"
    rc=${PIPESTATUS[0]}
    now >"$D/$1.end.tmp"; echo "$rc" >"$D/$1.rc"; mv "$D/$1.end.tmp" "$D/$1.end" ) &
}
chunks() { grep '^data: {' "$1" 2>/dev/null | grep -vc '^data: {"error"' || true; }  # SSE chunks
# What a client saw, as one line of text.
saw() {
  local f=$D/$1.out code rc
  code=$(awk 'NR == 1 { print $2 }' "$D/$1.hdr" 2>/dev/null || true)
  [[ -f $D/$1.rc ]] && rc=$(cat "$D/$1.rc") || rc="still running"
  local body=""
  if grep -q '^data: ' "$f" 2>/dev/null; then
    local err fin n
    err=$(sed -n 's/^data: \({"error".*\)$/\1/p' "$f" | head -1 | jq -r '.error.message' 2>/dev/null || true)
    n=$(chunks "$f")
    fin=$(sed -n 's/^data: \({.*\)$/\1/p' "$f" | grep -v '^{"error"' |
          jq -r '.choices[0].finish_reason // empty' 2>/dev/null | tail -1 || true)
    if [[ -n $err ]]; then body="SSE error event after $n chunks: $err"
    elif grep -q '^data: \[DONE\]' "$f"; then body="completed: $n chunks, finish_reason $fin, [DONE]"
    else body="stream cut after $n chunks, no error event, no [DONE]"; fi
  elif [[ -s $f ]]; then
    body=$(jq -r 'if .error then "error body: " + .error.message
                  elif .choices then "completed: finish_reason " + .choices[0].finish_reason +
                    ", " + (.usage.completion_tokens | tostring) + " tokens"
                  else "?" end' "$f" 2>/dev/null || echo "unparsable body: $(head -c 200 "$f" | tr -d '\n')")
  else body="empty body"; fi
  echo "HTTP ${code:-none}, curl exit $rc; $body"
}
end_time() { [[ -f $D/$1.end ]] && awk -v a="$T0" '{ printf "%.2f", $1 - a }' "$D/$1.end" || echo ""; }
procs_left() {  # "pid:comm" of what is left of this run, space-separated
  local p out=""
  for p in $( { job_pids; ns_pids; } | sort -un); do
    [[ -d /proc/$p ]] && out+="$p:$(cat "/proc/$p/comm" 2>/dev/null) "
  done
  echo "${out% }"
}

run_fault() {  # run_fault NAME
  local name=$1 phase=decode restore_at="" restore="" limit=40 victim=2
  case $name in
    kill-prefill) phase=prefill ;;
    kill-decode) ;;
    cut-*s) restore_at=${name#cut-}; restore_at=${restore_at%s}; limit=$((restore_at + 90)) ;;
    stop-*s) restore_at=${name#stop-}; restore_at=${restore_at%s}; limit=$((restore_at + 150)); victim=3 ;;
    *) fail "unknown fault $name" ;;
  esac
  D=$TMP/$name; mkdir -p "$D"
  local log=$D/serve.log
  "${MPIRUN[@]}" "$CPINFER" serve --model "$MODEL" --port 0 -tp 2 -pcp 2 --served-model-name tiny \
    --max-model-len 12000 --kv-cache-space 0.05 >"$log" 2>&1 &
  local job=$!
  wait_for_server "$job" "$log" "$name" 120
  # Requests: streamed and whole; long prompts for the prefill fault, long answers otherwise.
  local seed=$RANDOM
  if [[ $phase == prefill ]]; then
    printf '{"model":"tiny","prompt":%s,"max_tokens":8,"stream":true}' "$(long_prompt 10000 "$seed")" >"$D/stream.json"
    printf '{"model":"tiny","prompt":%s,"max_tokens":8}' "$(long_prompt 10000 $((seed + 1)))" >"$D/whole.json"
  else
    printf '{"model":"tiny","prompt":"run %s streamed","max_tokens":%d,"ignore_eos":true,"stream":true}' "$seed" "$DECODE_TOKENS" >"$D/stream.json"
    printf '{"model":"tiny","prompt":"run %s whole","max_tokens":%d,"ignore_eos":true}' "$seed" "$DECODE_TOKENS" >"$D/whole.json"
  fi
  local t_sent
  t_sent=$(now)
  client stream "$D/stream.json"
  client whole "$D/whole.json"
  if [[ $phase == prefill ]]; then
    sleep 2  # both prompts in the prefill (checked below: no token yet)
  else
    for _ in $(seq 300); do grep -q '"text"' "$D/stream.out" 2>/dev/null && break; sleep 0.1; done
    sleep 1
  fi
  local running waiting tokens_before
  nsa curl -s -m 2 "$URL/metrics" >"$D/metrics.txt" || true
  running=$(awk '$1 ~ /^vllm:num_requests_running/ { print $2 }' "$D/metrics.txt")
  waiting=$(awk '$1 ~ /^vllm:num_requests_waiting/ { print $2 }' "$D/metrics.txt")
  tokens_before=$(chunks "$D/stream.out")
  local pid
  pid=$(rank_pid "$victim")
  [[ -n $pid ]] || fail "$name: rank $victim not found"
  # The fault.
  T0=$(now)
  case $name in
    kill-*) kill -9 "$pid"; restore="" ;;
    cut-*) ip -n "$NS_B" link set "$VETH_B" down; restore="ip -n $NS_B link set $VETH_B up" ;;
    stop-*) kill -STOP "$pid"; restore="kill -CONT $pid" ;;
  esac
  echo "$name: fault at +$(awk -v a="$t_sent" -v b="$T0" 'BEGIN { printf "%.1f", b - a }') s after the requests were sent (running: ${running:-?}, waiting: ${waiting:-?}, streamed chunks so far: $tokens_before)"
  # Observe, every 0.1 s, until both clients and the job have ended (or the job survived and
  # both clients ended after the restore), at most $limit s.
  local t_health="" health_code="" t_job="" t_noproc="" t_ranks="" t_restored="" procs_cut=""
  local t h
  while :; do
    t=$(since "$T0")
    if [[ -n $restore && -z $t_restored ]] && awk -v t="$t" -v r="$restore_at" 'BEGIN { exit !(t >= r) }'; then
      procs_cut=$(procs_left)
      $restore 2>/dev/null || true  # a stopped rank may be gone by then (the job ended)
      t_restored=$t
    fi
    if [[ -z $t_job ]] && ! kill -0 "$job" 2>/dev/null; then t_job=$t; fi
    if [[ -z $t_health ]]; then  # a refused connection (job gone) counts as unhealthy
      h=$(nsa curl -s -m 1 -o "$D/health.json" -w '%{http_code}' "$URL/health" || true)
      [[ $h == 200 ]] || { t_health=$t; health_code=$h; cp "$D/health.json" "$D/health_bad.json" 2>/dev/null || true; }
    fi
    if [[ -z $t_ranks && -z $(rank_pids) ]]; then t_ranks=$t; fi
    if [[ -z $t_noproc && -z $(job_pids) ]]; then t_noproc=$t; fi
    if [[ -f $D/stream.end && -f $D/whole.end ]]; then
      if [[ -n $t_job && -n $t_noproc ]]; then
        [[ -z $restore || -n $t_restored ]] && break
      elif [[ -n $t_restored || -z $restore ]] && [[ -z $t_job && -z $t_health ]]; then
        break  # the job lives on and both clients are done
      fi
    fi
    awk -v t="$t" -v l="$limit" 'BEGIN { exit !(t >= l) }' && break
    sleep 0.1
  done
  local t_end
  t_end=$(since "$T0")
  sleep 2  # let the job's last processes go before counting what is left
  local survived=false served_after="" left
  if kill -0 "$job" 2>/dev/null && [[ -z $t_health ]]; then
    survived=true
    local code
    code=$(nsa curl -s -m 60 -o "$D/after.json" -w '%{http_code}' "$URL/v1/completions" \
      -H 'Content-Type: application/json' -d '{"model":"tiny","prompt":"after","max_tokens":8}' || true)
    served_after="HTTP $code: $(jq -r 'if .choices then "completed, " + (.usage.completion_tokens | tostring) + " tokens" else (.error.message // "?") end' "$D/after.json" 2>/dev/null || echo '?')"
  fi
  if $survived; then
    # A normal shutdown (SIGTERM to mpirun), bounded; then nothing may be left.
    kill -TERM "$job" 2>/dev/null || true
    timeout 30 tail --pid="$job" -f /dev/null || true
    sleep 1
  fi
  left=$(procs_left)
  # The streamed client's longest wait between two SSE lines, and when it began (from the fault).
  local gap t_stream_err  # the error event's arrival time, from the SSE line's timestamp
  t_stream_err=$(awk -v a="$T0" -F'\t' '$2 ~ /^data: {"error"/ { printf "%.2f", $1 - a; exit }' "$D/stream.ts" 2>/dev/null || true)
  gap=$(awk -v a="$T0" 'NR > 1 && $1 - p > m { m = $1 - p; at = p - a } { p = $1 }
                        END { if (NR > 1) printf "%.2f %.2f", m, at }' "$D/stream.ts" 2>/dev/null || true)
  local line
  line=$(jq -cn --arg fault "$name" --arg cpu "$CPU" --arg survived "$survived" \
    --arg t_health "$t_health" --arg health_code "$health_code" \
    --arg health_body "$(head -c 300 "$D/health_bad.json" 2>/dev/null || true)" \
    --arg t_stream_err "$t_stream_err" --arg t_stream_end "$(end_time stream)" \
    --arg t_whole_end "$(end_time whole)" --arg t_job_exit "$t_job" --arg t_ranks "$t_ranks" --arg t_no_cpinfer "$t_noproc" \
    --arg t_restored "$t_restored" --arg observed_s "$t_end" --arg limit_s "$limit" \
    --arg stream "$(saw stream)" --arg whole "$(saw whole)" --arg running "${running:-}" --arg waiting "${waiting:-}" \
    --arg chunks_before "$tokens_before" --arg procs_during "$procs_cut" --arg procs_left "$left" \
    --arg tcp_retries2 "$(ip netns exec "$NS_B" cat /proc/sys/net/ipv4/tcp_retries2)" \
    --arg mpirun_extra "${MPIRUN_EXTRA:-}" \
    --arg served_after "$served_after" --arg gap "${gap% *}" --arg gap_at "${gap#* }" \
    --arg log "$(grep -E '^cpinfer:|rank watchdog|ERROR|WARN|orted|mpirun|MPI' "$log" | grep -v 'listening on' | head -c 2000)" \
    'def num: if . == "" then null else tonumber end;
     def str: if . == "" then null else . end;
     {fault: $fault, layout: "tp2 x pcp2; ranks 0,1 on host A, 2,3 on host B; PCP groups cross the link",
      survived: ($survived == "true"), requests_running_at_fault: ($running | num), requests_waiting_at_fault: ($waiting | num),
      streamed_chunks_before_fault: ($chunks_before | num),
      health_unhealthy_after_s: ($t_health | num), health_status: ($health_code | str),
      health_body: ($health_body | str), stream_error_event_after_s: ($t_stream_err | num),
      stream_client_end_after_s: ($t_stream_end | num), whole_client_end_after_s: ($t_whole_end | num),
      stream_longest_gap_s: ($gap | num), stream_longest_gap_from_s: ($gap_at | num),
      stream_client: $stream, whole_client: $whole, ranks_gone_after_s: ($t_ranks | num), job_exit_after_s: ($t_job_exit | num),
      no_cpinfer_process_after_s: ($t_no_cpinfer | num), restored_after_s: ($t_restored | num),
      procs_at_restore: ($procs_during | str), procs_left: ($procs_left | str),
      new_request_after: ($served_after | str), observed_s: ($observed_s | num),
      limit_s: ($limit_s | num), tcp_retries2: ($tcp_retries2 | num), mpirun_extra: ($mpirun_extra | str),
      cpu: $cpu, job_log: $log}')
  echo "$line" | tee -a "$OUT"
  # Whatever is left goes before the next fault (it is recorded above).
  kill_all
  ip -n "$NS_B" link set "$VETH_B" up 2>/dev/null || true
  wait "$job" 2>/dev/null || true
  wait 2>/dev/null || true
}

for f in $FAULTS; do run_fault "$f"; done
