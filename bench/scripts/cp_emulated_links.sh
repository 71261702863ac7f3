#!/usr/bin/env bash
# PCP prefill over emulated links (not part of the test suite): two "hosts" are two network
# namespaces joined by a veth pair (MTU 9000) whose both ends are rate-limited with a `tc tbf`
# qdisc at 1, 10 and 25 Gbit/s; OpenMPI runs over TCP between them (one rank per namespace,
# launched through `ip netns exec`, as tests/cli/mpi_two_namespace_test.sh does). For each
# rate: `bench latency` of a $LONG-token prompt (default 16384) on the qwen2.5-0.5b shape
# with 8 layers, pcp 2, 1 thread per rank, with the K/V gather overlapped (default) and not
# (--no-overlap-comm), at 10 Gbit/s also with a bf16 cache; plus pcp 1 on one rank (1 thread)
# for the strong-scaling ratio. No
# latency is added: this kernel has no netem qdisc ("Specified qdisc kind is unknown"), so the
# link's delay is the veth's own (~tens of us through the TCP stack). One JSON line per run
# to $OUT (default bench/results/cp_emulated_links.jsonl), with other processes' CPU time
# during the run. REPS (default 1) repeats the whole sequence, pcp 1 included, so that the
# pcp 1 and pcp 2 runs alternate; the end prints each run's median TTFT and its speed-up over
# the median pcp 1. VARIANTS (default "overlap no-overlap bf16") picks the pcp 2 runs (bf16:
# at 10 Gbit/s only). Needs root (CAP_SYS_ADMIN) and iproute2.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/cpu_time.sh
CPINFER=$(realpath "${CPINFER:-build/cpinfer}")
OUT=${OUT:-bench/results/cp_emulated_links.jsonl}
LONG=${LONG:-16384}
RATES=${RATES:-"1 10 25"}
REPS=${REPS:-1}
VARIANTS=${VARIANTS:-"overlap no-overlap bf16"}
mkdir -p "$(dirname "$OUT")" models
: >"$OUT"
M8=$(realpath -m models/qwen2.5-0.5b-L8)
[[ -f "$M8/model.safetensors" ]] || "$CPINFER" make-model --preset qwen2.5-0.5b --num-layers 8 --out "$M8"
if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
NS_A=cpl$$a NS_B=cpl$$b VETH_A=cpw$$a VETH_B=cpw$$b
IP_A=10.214.0.1 IP_B=10.214.0.2 SUBNET=10.214.0.0/24
TMP=$(mktemp -d)
source scripts/lib/two_hosts.sh
cleanup() {
  two_hosts_cleanup
  rm -rf "$TMP"
}
trap cleanup EXIT
two_hosts_up mtu 9000
# One rank per "host", 1 thread each, on this machine's 2 cores: no rank's threads compete for a
# core, so no sched_yield while waiting (as cpinfer's own launcher decides); MPI_YIELD=1 turns
# it on (for an A/B).
two_hosts_mpirun "$TMP" 1 "${MPI_YIELD:-0}"
MPIRUN+=(-np 2 --map-by node -x CPINFER_THREADS_PER_RANK=1)
lscpu | grep "Model name"
record() {  # record TAG RATE JSON_FILE OTHER_JIFFIES
  node -e 'const fs=require("fs"); const [tag, rate, f, other, round] = process.argv.slice(1);
    const r = JSON.parse(fs.readFileSync(f, "utf8").trim().split("\n").pop());
    console.log(JSON.stringify({tag, round: +round, link_gbps: +rate || null, machine_busy_jiffies: +other, result: r}))' "$@" "$ROUND" | tee -a "$OUT"
}
run() {  # run TAG RATE cmd...
  local tag=$1 rate=$2; shift 2
  local b0 own
  b0=$(busy_jiffies)
  /usr/bin/time -f "%U %S" -o "$TMP/cpu" "$@" >"$TMP/run.json" 2>"$TMP/run.err" ||
    { tail -5 "$TMP/run.err" >&2; exit 1; }
  own=$(awk '{printf "%d", ($1 + $2) * 100}' "$TMP/cpu")
  record "$tag" "$rate" "$TMP/run.json" $(( $(busy_jiffies) - b0 - own ))
}
LAT=(bench latency --model "$M8" --input-len "$LONG" --output-len 4 --num-iters 1 --warmup 0 --json)
has() { [[ " $VARIANTS " == *" $1 "* ]]; }
for ROUND in $(seq 1 "$REPS"); do
  run pcp1 0 "$CPINFER" "${LAT[@]}" --threads-per-rank 1
  for rate in $RATES; do
    burst=$(( rate * 1000000000 / 8 / 250 ))  # 4 ms of traffic: >= rate / HZ for any HZ >= 250
    for dev in "$NS_A:$VETH_A" "$NS_B:$VETH_B"; do
      ip netns exec "${dev%%:*}" tc qdisc replace dev "${dev##*:}" root tbf rate "${rate}gbit" burst "$burst" latency 50ms
    done
    if has overlap; then
      run "pcp2-overlap" "$rate" "${MPIRUN[@]}" "$CPINFER" "${LAT[@]}" -pcp 2 --overlap-comm on --timeline "$TMP/timeline.json"
      cp "$TMP/timeline.json" "${OUT%.jsonl}_timeline_${rate}g.json"
    fi
    if has no-overlap; then
      run "pcp2-no-overlap" "$rate" "${MPIRUN[@]}" "$CPINFER" "${LAT[@]}" -pcp 2 --no-overlap-comm
    fi
    if [[ $rate == 10 ]] && has bf16; then  # a bf16 cache: half the K/V bytes on the link
      run "pcp2-overlap-bf16" "$rate" "${MPIRUN[@]}" "$CPINFER" "${LAT[@]}" -pcp 2 --overlap-comm on --kv-cache-dtype bf16
    fi
  done
done
# Medians over the rounds and the speed-up of each over the median pcp 1 run.
node -e '
  const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
  const med = (a) => { const s = [...a].sort((x, y) => x - y), m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };  // even count: the middle two's mean
  const groups = new Map();
  for (const r of rows) {
    const k = r.tag + (r.link_gbps ? ` at ${r.link_gbps} Gbit/s` : "");
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(r.result.ttft_s);
  }
  const base = med(groups.get("pcp1") || [NaN]);
  for (const [k, v] of groups)
    console.log(`${k}: TTFT median ${med(v).toFixed(2)} s [${v.map((x) => x.toFixed(2)).join(", ")}],` +
                ` speed-up over pcp 1 ${(base / med(v)).toFixed(3)}x`);' "$OUT"
