#!/usr/bin/env bash
# A two-"host" MPI job on one machine: two network namespaces joined by a veth pair
# (10.213.0.1 <-> 10.213.0.2, addresses that exist only inside the namespaces), mpirun in the
# first one, and no sshd: OpenMPI's rsh launcher is pointed (plm_rsh_agent) at a small script
# that runs the remote daemon with `ip netns exec`. Checks that the ranks really sit in
# different namespaces, runs comm_test across them over TCP (2 ranks, one per host, and 4
# ranks, TP inside a host and PCP across), measures a 1 MB all-gather between the hosts, and
# serves across them: the rank watchdog must listen on rank 0's MPI interface (10.213.0.1,
# from btl_tcp_if_include), a killed rank on the other host must still be noticed, and a cut
# link must be reported (the rank's heartbeats stop: "not responding"; or keepalive:
# "unreachable"), every rank ending.
# Needs `ip` (iproute2) and CAP_SYS_ADMIN; otherwise prints "SKIPPED: <reason>" and exits 0.
set -euo pipefail
BIN_DIR=${CPINFER_BINARY_DIR:?}
COMM_TEST=$BIN_DIR/tests/comm_test
BENCH=$BIN_DIR/bench/comm_bench
skip() { echo "SKIPPED: $*"; exit 0; }
fail() { echo "FAIL: $*" >&2; [[ -f ${TMP:-}/out ]] && sed 's/^/  | /' "$TMP/out" >&2; exit 1; }

[[ -x "$COMM_TEST" ]] || fail "$COMM_TEST is not built"
command -v mpirun >/dev/null || fail "mpirun not found (apt-get install openmpi-bin)"
command -v ip >/dev/null || skip "the ip command is missing (apt-get install iproute2)"
if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

NS_A=cpi$$a NS_B=cpi$$b VETH_A=cpv$$a VETH_B=cpv$$b
IP_A=10.213.0.1 IP_B=10.213.0.2 SUBNET=10.213.0.0/24
TMP=$(mktemp -d)
source "$(dirname "$0")/../../scripts/lib/two_hosts.sh"
cleanup() {
  two_hosts_cleanup
  rm -rf "$TMP"
}
trap cleanup EXIT

ip netns add "$NS_A" 2>"$TMP/err" \
  || skip "cannot create network namespaces: $(head -c 200 "$TMP/err")"
ip netns add "$NS_B"
ip link add "$VETH_A" type veth peer name "$VETH_B" 2>"$TMP/err" \
  || skip "cannot create a veth pair: $(head -c 200 "$TMP/err")"
two_hosts_wire
# The "remote shell": mpirun calls `agent <host> <command...>` to start its daemon there.
# TCP only, on the veth subnet, for both MPI traffic (btl) and the daemons' wire-up (oob).
two_hosts_mpirun "$TMP" 2

# 1. The two ranks run in the two namespaces.
timeout 60 "${MPIRUN[@]}" -np 2 --map-by node \
  sh -c 'echo "$OMPI_COMM_WORLD_RANK $(readlink /proc/self/ns/net)"' >"$TMP/out" 2>&1 \
  || fail "mpirun across the namespaces"
want_a=$(ip netns exec "$NS_A" readlink /proc/self/ns/net)
want_b=$(ip netns exec "$NS_B" readlink /proc/self/ns/net)
grep -qxF "0 $want_a" "$TMP/out" || fail "rank 0 is not in $NS_A"
grep -qxF "1 $want_b" "$TMP/out" || fail "rank 1 is not in $NS_B"
echo "ok   rank 0 in $NS_A ($IP_A), rank 1 in $NS_B ($IP_B)"
# --map-by slot fills a host first: ranks 0,1 on A, 2,3 on B, so TP groups (consecutive
# ranks) stay inside a host and PCP groups cross: the layout to use across machines.
timeout 60 "${MPIRUN[@]}" -np 4 --map-by slot \
  sh -c 'echo "$OMPI_COMM_WORLD_RANK $(readlink /proc/self/ns/net)"' >"$TMP/out" 2>&1 \
  || fail "mpirun -np 4 across the namespaces"
for r in 0 1; do grep -qxF "$r $want_a" "$TMP/out" || fail "rank $r is not in $NS_A"; done
for r in 2 3; do grep -qxF "$r $want_b" "$TMP/out" || fail "rank $r is not in $NS_B"; done
echo "ok   -np 4 --map-by slot: ranks 0,1 in $NS_A, ranks 2,3 in $NS_B"

# 2. Every collective across the hosts.
timeout 120 "${MPIRUN[@]}" -np 2 --map-by node "$COMM_TEST" --gtest_color=no --tp 2 --dcp 2 \
  >"$TMP/out" 2>&1 || fail "comm_test, 2 ranks on 2 hosts"
grep -q PASSED "$TMP/out" || fail "comm_test, 2 ranks: no PASSED line"
echo "ok   comm_test -np 2 (tp 2, dcp 2) across the namespaces"
timeout 120 "${MPIRUN[@]}" -np 4 --map-by slot "$COMM_TEST" --gtest_color=no \
  --tp 2 --pcp 2 --dcp 2 >"$TMP/out" 2>&1 || fail "comm_test, 4 ranks on 2 hosts"
grep -q PASSED "$TMP/out" || fail "comm_test, 4 ranks: no PASSED line"
echo "ok   comm_test -np 4 (tp 2 per host, pcp 2 across) across the namespaces"

# 3. 1 MB all-gather between the hosts (each rank contributes 1 MiB).
if [[ -x "$BENCH" ]]; then
  timeout 120 "${MPIRUN[@]}" -np 2 --map-by node "$BENCH" --bytes 1048576 --ops all_gather \
    --reps 21 >"$TMP/out" 2>&1 || fail "comm_bench across the namespaces"
  median=$(awk -F'|' '/^\| all_gather/ { gsub(/ /, "", $6); print $6 }' "$TMP/out")
  [[ -n $median ]] || fail "no all_gather line from comm_bench"
  echo "two-namespace 1 MiB all-gather (2 ranks over veth/TCP): median $median us"
else
  echo "note: $BENCH not built; no all-gather timing"
fi
# 4. `cpinfer serve` across the hosts (pcp 2): the watchdog's address and a remote rank's death.
CPINFER=${1:-$BIN_DIR/cpinfer}
if [[ -x "$CPINFER" ]]; then
  MODEL=$TMP/tiny
  "$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --seed 5 --out "$MODEL" 2>/dev/null
  # The PCP group spans the two hosts: the K/V gather overlaps the attention by default.
  timeout 120 "${MPIRUN[@]}" -np 2 --map-by node "$CPINFER" bench latency --model "$MODEL" \
    --input-len 64 --output-len 2 --num-iters 1 --warmup 0 -pcp 2 --json >"$TMP/out" 2>&1 ||
    fail "bench latency across the namespaces"
  grep -q '"overlap_comm":true' "$TMP/out" || fail "overlap is not on for a PCP group across hosts"
  echo "ok   bench latency -pcp 2 across the namespaces: the K/V gather overlaps by default"
  # serve_across WHAT: `serve -pcp 2` with a rank per host, in the background; sets job, url.
  serve_across() {
    "${MPIRUN[@]}" -np 2 --map-by node "$CPINFER" serve --model "$MODEL" --port 0 -pcp 2 \
      --served-model-name tiny --max-model-len 1024 --kv-cache-space 0.05 >"$TMP/serve.log" 2>&1 &
    job=$!
    for _ in $(seq 600); do
      grep -q "listening on http" "$TMP/serve.log" && break
      kill -0 "$job" 2>/dev/null || { cp "$TMP/serve.log" "$TMP/out"; fail "serve ($1) exited at start-up"; }
      sleep 0.1
    done
    url=$(grep -o "http://[0-9.]*:[0-9]*" "$TMP/serve.log" | head -1)
    [[ -n "$url" ]] || { cp "$TMP/serve.log" "$TMP/out"; fail "serve ($1) did not start"; }
  }
  rank1_pid() {  # rank 1 runs in the second namespace
    local p
    for p in $(ip netns pids "$NS_B"); do
      tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && echo "$p"
    done
    return 0
  }
  serve_across "across the namespaces"
  wd=$(grep -o "rank watchdog: port [0-9.]*:[0-9]*" "$TMP/serve.log" | grep -o "[0-9.]*:[0-9]*$" || true)
  [[ "${wd%:*}" == "$IP_A" ]] || { cp "$TMP/serve.log" "$TMP/out"; fail "the watchdog listens on '${wd}', not on $IP_A"; }
  ip netns exec "$NS_A" curl -sf -m 60 "$url/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"tiny","prompt":"hi","max_tokens":4}' >"$TMP/out" || fail "a completion across the namespaces"
  grep -q '"text"' "$TMP/out" || fail "no completion text across the namespaces"
  # Rank 1 runs in the second namespace: kill it there; rank 0 must notice and the job end.
  r1=$(rank1_pid)
  [[ -n "$r1" ]] || fail "rank 1 not found in $NS_B"
  kill -9 "$r1"
  for _ in $(seq 100); do grep -q "cpinfer: rank 1 died" "$TMP/serve.log" && break; sleep 0.1; done
  grep -q "cpinfer: rank 1 died" "$TMP/serve.log" || { cp "$TMP/serve.log" "$TMP/out"; fail "rank 1's death on the other host went unnoticed for 10 s"; }
  timeout 30 tail --pid="$job" -f /dev/null || fail "the job did not end within 30 s of rank 1's death"
  echo "ok   serve across the namespaces: watchdog on $wd; rank 1 killed on $NS_B: noticed"
  # The link cut (host B's end down): no process dies, so no connection closes; rank 1's
  # heartbeats stop arriving (after --watchdog-timeout, 5 s) and the keepalive probes go
  # unanswered (~7 s). Rank 0 must report rank 1 lost (not dead) within 10 s and answer 503;
  # rank 1 must end by itself, cut off from rank 0 (its heartbeats unacknowledged for 7 s).
  serve_across "link cut"
  ip netns exec "$NS_A" curl -sf -m 60 "$url/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"tiny","prompt":"hi","max_tokens":4}' >"$TMP/out" || fail "a completion before the link cut"
  r1=$(rank1_pid)
  [[ -n "$r1" ]] || fail "rank 1 not found in $NS_B (link cut)"
  ip -n "$NS_B" link set "$VETH_B" down
  t_cut=$SECONDS
  lost="cpinfer: rank 1 (is not responding \\(pid $r1 .*network to it is cut|is unreachable \\(pid $r1 .*keepalive)"
  for _ in $(seq 100); do grep -Eq "$lost" "$TMP/serve.log" && break; sleep 0.1; done
  grep -Eq "$lost" "$TMP/serve.log" ||
    { ip -n "$NS_B" link set "$VETH_B" up; cp "$TMP/serve.log" "$TMP/out"; fail "the link cut: rank 0 did not report rank 1 lost within 10 s"; }
  h=$(ip netns exec "$NS_A" curl -s -m 2 "$url/health" || true)
  [[ $h == *"rank 1 is not responding"* || $h == *"rank 1 is unreachable"* ]] ||
    { ip -n "$NS_B" link set "$VETH_B" up; fail "the link cut: /health said '$h'"; }
  timeout 10 tail --pid="$r1" -f /dev/null ||
    { ip -n "$NS_B" link set "$VETH_B" up; fail "the link cut: rank 1 still runs, cut off from rank 0"; }
  t_ranks=$((SECONDS - t_cut))
  # mpirun learns that rank 1 ended (and gets its output) only through its daemon on host B:
  # over the link.
  ip -n "$NS_B" link set "$VETH_B" up
  timeout 60 tail --pid="$job" -f /dev/null || fail "the job did not end within 60 s of the link's return"
  grep -q "cpinfer: rank 1: lost rank 0 (unreachable" "$TMP/serve.log" ||
    { cp "$TMP/serve.log" "$TMP/out"; fail "the link cut: rank 1 did not say rank 0 was unreachable"; }
  echo "ok   serve across the namespaces: link cut: rank 0: $(grep -Eo "rank 1 (is not responding|is unreachable)" "$TMP/serve.log" | head -1); rank 1 ended by itself within ${t_ranks} s"
fi
echo "mpi_two_namespace_test: all passed"
