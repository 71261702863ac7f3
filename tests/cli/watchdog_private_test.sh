#!/usr/bin/env bash
# The rank watchdog's side channel of a multi-rank `cpinfer serve` is private to the job:
# on one host it listens on 127.0.0.1 only (never on every interface), it closes once every
# rank has registered, and strangers (a forged hello for a live rank, a connection that says
# nothing, 1000 connections) change nothing: the job keeps serving and no rank is reported
# dead. A killed rank is still noticed (the registration really happened). An explicit
# --watchdog-address this host lacks is refused at start-up with a message naming it.
# Strangers flooding the port while the ranks register change nothing either (section 5; the
# listener's and the worker's sides of it: tests/unit/watchdog_test.cpp).
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib/wait_for_server.sh"
CPINFER=${1:?usage: watchdog_private_test.sh path/to/cpinfer}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v mpiexec >/dev/null || { echo "FAIL: mpiexec not found (apt-get install openmpi-bin)" >&2; exit 1; }
command -v ss >/dev/null || { echo "FAIL: ss not found (apt-get install iproute2)" >&2; exit 1; }
TMP=$(mktemp -d)
MODEL="$TMP/tiny-wd-$$"  # unique: pgrep finds exactly this test's processes by it
cleanup() {
  local p
  for p in $(pgrep -f -- "--model $MODEL " || true); do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -n "${LOG:-}" ]] && tail -20 "$LOG" >&2; exit 1; }
MPIEXEC=(mpiexec -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --seed 5 --out "$MODEL" 2>/dev/null

# 1. A --watchdog-address that rank 0's host lacks: a clear error at start-up, non-zero exit.
rc=0
timeout 120 "${MPIEXEC[@]}" "$CPINFER" serve --model "$MODEL" --port 0 -pcp 2 \
  --watchdog-address 203.0.113.77 >"$TMP/bad.log" 2>&1 || rc=$?
((rc != 0)) || fail "serve accepted --watchdog-address 203.0.113.77"
grep -q -- "--watchdog-address 203.0.113.77: no interface of this host" "$TMP/bad.log" ||
  { cat "$TMP/bad.log" >&2; fail "no error naming --watchdog-address"; }
echo "ok   a foreign --watchdog-address is refused: $(grep -m1 -o -- '--watchdog-address 203[^;]*' "$TMP/bad.log")"

# 1b. --watchdog-port: a port that is taken is an error naming the flag (an explicit port is a
#     firewall rule's port: no silent fallback); a free one is used as given.
node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port); setTimeout(()=>{},60000)})' >"$TMP/busy_port" &
BUSY_PID=$!
for _ in $(seq 50); do [[ -s "$TMP/busy_port" ]] && break; sleep 0.1; done
BUSY=$(cat "$TMP/busy_port")
rc=0
timeout 120 "${MPIEXEC[@]}" "$CPINFER" serve --model "$MODEL" --port 0 -pcp 2 \
  --watchdog-port "$BUSY" >"$TMP/busy.log" 2>&1 || rc=$?
kill "$BUSY_PID" 2>/dev/null || true
((rc != 0)) || fail "serve started with --watchdog-port $BUSY, a port in use"
grep -q "cannot listen on 127.0.0.1:$BUSY.*choose another --watchdog-port" "$TMP/busy.log" ||
  { cat "$TMP/busy.log" >&2; fail "no error naming the busy --watchdog-port"; }
echo "ok   a --watchdog-port in use is refused"

# 2. A serving job on a given watchdog port: where the watchdog listens.
FREE=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port); s.close()})')
LOG="$TMP/serve.log"
"${MPIEXEC[@]}" "$CPINFER" serve --model "$MODEL" --port 0 --served-model-name tiny \
  --max-model-len 2048 --kv-cache-space 0.05 -pcp 2 --watchdog-port "$FREE" >"$LOG" 2>&1 &
JOB_PID=$!
wait_for_server "$JOB_PID" "$LOG" watchdog
WD=$(grep -o "rank watchdog: port [0-9.]*:[0-9]*" "$LOG" | grep -o "[0-9.]*:[0-9]*$" || true)
[[ -n "$WD" ]] || fail "no 'rank watchdog: port' line"
WD_HOST=${WD%:*} WD_PORT=${WD#*:}
[[ "$WD_HOST" == 127.0.0.1 ]] || fail "one host, yet the watchdog listens on $WD_HOST, not 127.0.0.1"
[[ "$WD_PORT" == "$FREE" ]] || fail "--watchdog-port $FREE given, the watchdog took $WD_PORT"
echo "ok   the watchdog listened on $WD (loopback: every rank is on this host)"

complete() {  # one greedy completion; prints the text
  curl -sf -m 60 "$URL/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"tiny","prompt":"hello there","max_tokens":8,"temperature":0}' |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).choices[0].text))'
}
BEFORE=$(complete) || fail "a completion before the strangers failed"

# The port is closed once both ranks have registered (they have: the server is up).
for _ in $(seq 50); do
  ss -Hltn "sport = :$WD_PORT" | grep -q . || break
  sleep 0.1
done
! ss -Hltn "sport = :$WD_PORT" | grep -q . || fail "the watchdog port $WD_PORT still listens after start-up: $(ss -Hltn "sport = :$WD_PORT")"
echo "ok   the watchdog port is closed after registration"

# 3. Strangers: a forged hello for rank 1 (112 bytes, wrong secret), a silent connection and
#    1000 connections, on the watchdog's port and on every local address.
node - "$WD_PORT" >"$TMP/strangers.txt" <<'JS'
const net = require("net");
const port = Number(process.argv[2]);
const hello = Buffer.alloc(112);
hello.write("CPIWDOG1", 0);              // the magic; the secret (bytes 8..39) left zero
hello.writeInt32LE(1, 40);               // rank 1
let refused = 0, accepted = 0, pending = 0;
function attempt(host, payload, hold) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.on("connect", () => { accepted++; if (payload) s.write(payload);
                            setTimeout(() => { s.destroy(); resolve(); }, hold); });
    s.on("error", () => { refused++; resolve(); });
  });
}
(async () => {
  await attempt("127.0.0.1", hello, 200);
  await attempt("127.0.0.1", null, 500);
  for (let i = 0; i < 1000; i += 50)
    await Promise.all(Array.from({ length: 50 }, () => attempt("127.0.0.1", i % 100 ? null : hello, 0)));
  console.log(`refused ${refused} accepted ${accepted}`);
})();
JS
cat "$TMP/strangers.txt"
grep -q "refused 1002 accepted 0" "$TMP/strangers.txt" || fail "strangers could connect: $(cat "$TMP/strangers.txt")"

sleep 1
AFTER=$(complete) || fail "a completion after the strangers failed"
[[ "$AFTER" == "$BEFORE" ]] || fail "the completion changed after the strangers: '$BEFORE' vs '$AFTER'"
H=$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")
[[ "$H" == 200 ]] || fail "/health is $H after the strangers"
! grep -q "died" "$LOG" || fail "a rank was reported dead: $(grep died "$LOG")"
echo "ok   after 1002 stranger connections the job still serves (same completion, /health 200)"

# 4. The registration is real: killing rank 1 is still noticed.
R1=""
for p in $(pgrep -f -- "--model $MODEL " || true); do
  tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && R1=$p
done
[[ -n "$R1" ]] || fail "rank 1 not found"
kill -9 "$R1"
for _ in $(seq 100); do grep -q "cpinfer: rank 1 died" "$LOG" && break; sleep 0.1; done
grep -q "cpinfer: rank 1 died" "$LOG" || fail "the death of rank 1 went unnoticed for 10 s"
rc=0; wait "$JOB_PID" || rc=$?
((rc != 0)) || fail "the job exited 0 after rank 1 died"
echo "ok   killing rank 1 is still noticed: $(grep -m1 'cpinfer: rank 1 died' "$LOG")"

# 5. A flood racing the registrations: strangers hammer a fixed watchdog port (500 connections
#    in flight, silent, kept open) from before the job starts until it serves, so they arrive
#    while the 3 worker ranks of a tp 2 x pcp 2 job register (the workers wait 400 ms before
#    registering, CPINFER_WATCHDOG_REGISTER_DELAY_MS, so the flood surely fills rank 0's
#    64 slots for connections without a hello first). Every rank still registers (a worker
#    dropped by rank 0's cap connects again), the job serves, no rank is lost.
FLOOD_PORT=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port); s.close()})')
node - "$FLOOD_PORT" "$TMP/flood.txt" <<'JS' &
const net = require("net"), fs = require("fs");
const [port, out] = [Number(process.argv[2]), process.argv[3]];
let connected = 0, stopping = false;
const held = [];
function one() {
  if (stopping) return;
  const s = net.connect({ host: "127.0.0.1", port });
  s.on("connect", () => { connected++; held.push(s); });
  s.on("error", () => {});
  s.on("close", () => setImmediate(one));  // refused or dropped: the next one
}
for (let i = 0; i < 500; i++) one();
process.on("SIGTERM", () => {
  stopping = true;
  fs.writeFileSync(out, `connected ${connected}\n`);
  for (const s of held) s.destroy();
  process.exit(0);
});
JS
FLOOD_PID=$!
sleep 1
LOG="$TMP/flood-serve.log"
CPINFER_WATCHDOG_REGISTER_DELAY_MS=400 mpiexec -np 4 --oversubscribe --bind-to none \
  --mca mpi_yield_when_idle 1 -x CPINFER_WATCHDOG_REGISTER_DELAY_MS \
  "$CPINFER" serve --model "$MODEL" --port 0 --served-model-name tiny --max-model-len 2048 \
  --kv-cache-space 0.05 -tp 2 -pcp 2 --watchdog-port "$FLOOD_PORT" >"$LOG" 2>&1 &
JOB_PID=$!
wait_for_server "$JOB_PID" "$LOG" watchdog-flood
sleep 1  # past the registrations: the port is closed by now
kill -TERM "$FLOOD_PID"; wait "$FLOOD_PID" 2>/dev/null || true
FLOODED=$(grep -o "connected [0-9]*" "$TMP/flood.txt" | grep -o "[0-9]*$" || echo 0)
((FLOODED > 0)) || fail "the flood never reached the watchdog port (the race did not happen)"
grep -q "too many connections without a hello" "$LOG" ||
  fail "rank 0 never reached its cap of connections without a hello (the flood was too thin)"
for _ in $(seq 50); do
  [[ $(grep -c "cannot register\|has not answered\|lost rank 0\|died\|only [0-9]* of 3 ranks" "$LOG") == 0 ]] || break
  sleep 0.1
done
! grep -E "cannot register|has not answered|lost rank 0|died|only [0-9]* of 3 ranks" "$LOG" ||
  fail "a rank did not register or was lost under the flood"
TEXT=$(complete) || fail "a completion after the flood failed"
[[ "$TEXT" == "$BEFORE" ]] || fail "tp 2 x pcp 2 under the flood answered '$TEXT', pcp 2 '$BEFORE'"
! ss -Hltn "sport = :$FLOOD_PORT" | grep -q . || fail "the watchdog port still listens"
RETRIED=$(grep -c "registered with rank 0's watchdog after" "$LOG" || true)
echo "ok   $FLOODED stranger connections raced the registrations of tp 2 x pcp 2: every rank" \
  "registered ($RETRIED after a drop), same completion, the port closed"
kill -TERM "$JOB_PID" 2>/dev/null || true
wait "$JOB_PID" 2>/dev/null || true
echo "PASS"
