#!/usr/bin/env bash
# Decode-batch linear layers of two builds side by side (not part of the test suite):
# bench/linear_bench's Auto path over bf16 W on ISA's kernels (default avx2), M = 4, 8, 16,
# 32 and 64 x rows (MS, the skinny tiles from 4 rows on AVX2, from 5 elsewhere), the Qwen2.5-0.5B shapes (qkv, o, gate_up, down, the
# 151936-row LM head), 1 and 2 threads; ROUNDS rounds in which the two binaries alternate.
# Also records `cpinfer bench peak` (the FMA peak the GFLOP/s are compared with) and, per
# run, the CPU seconds other processes took meanwhile (the machine's busy time minus the
# run's own, at most 2 threads for its wall time: `other_cpu_s`, an upper bound's complement).
# One JSON line per benchmark and run to $OUT (the benchmark's best call: `best_gflops`).
#   OLD, NEW  the two linear_bench binaries (NEW default build/bench/linear_bench; OLD unset:
#             NEW alone); CPINFER (build/cpinfer) for the peak
#   ISA (avx2), MS ("4|8|16|32|64": a regex alternation), ROUNDS (2),
#   OUT (bench/results/skinny_ab.jsonl)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/cpu_time.sh
NEW=${NEW:-build/bench/linear_bench}
OLD=${OLD:-}
CPINFER=${CPINFER:-build/cpinfer}
ISA=${ISA:-avx2}
MS=${MS:-4|8|16|32|64}
ROUNDS=${ROUNDS:-2}
OUT=${OUT:-bench/results/skinny_ab.jsonl}
mkdir -p "$(dirname "$OUT")"
cpu=$(lscpu | sed -n 's/^Model name: *//p')
echo "{\"cpu\":\"$cpu\",\"peak\":$("$CPINFER" bench peak --json --repeats 3 | tail -1)}" | tee -a "$OUT"
builds=(new)
[[ -n "$OLD" ]] && builds=(old new)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for r in $(seq "$ROUNDS"); do
  for build in "${builds[@]}"; do
    bin=$NEW
    [[ "$build" == old ]] && bin=$OLD
    b0=$(busy_jiffies)
    s0=$(date +%s.%N)
    "$bin" --benchmark_filter="^$ISA/bf16/.*/M:($MS)/threads:(1|2)/min_time" \
      --benchmark_format=json 2>/dev/null >"$tmp"
    other=$(awk -v s0="$s0" -v s1="$(date +%s.%N)" -v b="$(( $(busy_jiffies) - b0 ))" \
      -v hz="$(getconf CLK_TCK)" 'BEGIN { o = b / hz - 2 * (s1 - s0); printf "%.2f", (o < 0 ? 0 : o) }')
    # One line per benchmark: its name's fields and its best call's GFLOP/s.
    node -e '
      const [file, round, build, other] = process.argv.slice(1);
      const t = require("fs").readFileSync(file, "utf8");  // a note line may come first
      const d = JSON.parse(t.slice(t.indexOf("{")));
      for (const b of d.benchmarks) {
        const f = Object.fromEntries(b.name.split("/").slice(3).filter((s) => s.includes(":")).map((s) => s.split(":")));
        console.log(JSON.stringify({ round: +round, build, other_cpu_s: +other,
          name: b.name, shape: b.name.split("/")[2], M: +f.M, threads: +f.threads,
          best_gflops: b["best_GFLOP/s"], mean_gflops: b["GFLOP/s"] }));
      }' "$tmp" "$r" "$build" "$other" | tee -a "$OUT"
  done
done
