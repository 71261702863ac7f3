#!/usr/bin/env bash
# `cpinfer bench attention` and `cpinfer bench peak` on small shapes: one JSON line each with
# the documented fields (seconds, gflops / gbps, ...), --compare's side-by-side rows, every
# ISA the machine has, and clear errors for bad options.
set -euo pipefail
CPINFER=${1:?usage: bench_attention_test.sh path/to/cpinfer}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# check_json FILE FIELD... : the last line of FILE is one JSON object with every FIELD, all
# numbers positive and finite where numeric.
check_json() {
  local file=$1; shift
  node -e '
const lines = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n");
const j = JSON.parse(lines[lines.length - 1]);
for (const k of process.argv.slice(2)) {
  if (!(k in j)) {
    console.error("missing field " + k + " in " + lines[lines.length - 1]); process.exit(1); }
  if (typeof j[k] === "number" && !(isFinite(j[k]) && j[k] > 0)) {
    console.error("field " + k + " = " + j[k]); process.exit(1); }
}' "$file" "$@"
}

"$CPINFER" bench attention --mode prefill --seq-len 200 --num-q-heads 4 --num-kv-heads 2 \
  --head-dim 64 --threads 2 --repeats 2 --json >"$TMP/prefill.json" || fail "bench prefill"
[[ $(wc -l <"$TMP/prefill.json") -eq 1 ]] || fail "prefill printed more than one line"
check_json "$TMP/prefill.json" seconds gflops seq_len threads isa kernel \
  || fail "prefill JSON fields"

"$CPINFER" bench attention --mode decode --context-len 3000 --batch 2 --kv-cache-dtype bf16 \
  --num-q-heads 16 --num-kv-heads 2 --head-dim 128 --threads 2 --repeats 2 --compare \
  --cold-mib 16 --json \
  >"$TMP/decode.json" || fail "bench decode --compare"
check_json "$TMP/decode.json" seconds gbps gflops context_len batch kv_cache_dtype compare \
  speedup_vs_reference thread_scaling_flash || fail "decode JSON fields"
node -e '
const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
const kinds = j.compare.map(r => r.kernel + "/" + r.threads).sort().join(",");
if (kinds !== "flash/1,flash/2,reference/1,reference/2") {
  console.error("compare rows " + kinds); process.exit(1); }
if (j.kv_cache_dtype !== "bf16") { console.error("dtype " + j.kv_cache_dtype); process.exit(1); }
' "$TMP/decode.json" || fail "decode --compare rows"

# Every ISA this CPU supports runs (CPINFER_ISA forces one); the kernel field says which.
for isa in generic avx2 avx512; do
  if CPINFER_ISA=$isa "$CPINFER" bench attention --mode decode --context-len 500 --repeats 1 \
       --cold-mib 4 --json >"$TMP/isa.json" 2>"$TMP/isa.err"; then
    grep -q "\"isa\":\"$isa\"" "$TMP/isa.json" || fail "CPINFER_ISA=$isa not honoured"
  else
    grep -q "not supported" "$TMP/isa.err" || fail "CPINFER_ISA=$isa failed: $(cat "$TMP/isa.err")"
  fi
done

# The GEMV's prefetch override takes 0 or 1; anything else is refused before work starts.
if CPINFER_GEMV_PREFETCH=yes "$CPINFER" bench peak --json --seconds 0.05 --repeats 1 \
     --read-mib 64 >/dev/null 2>"$TMP/env.err"; then
  fail "CPINFER_GEMV_PREFETCH=yes accepted"
fi
grep -q "CPINFER_GEMV_PREFETCH='yes' is not 0 or 1" "$TMP/env.err" ||
  fail "CPINFER_GEMV_PREFETCH error: $(cat "$TMP/env.err")"

"$CPINFER" bench peak --json --seconds 0.05 --repeats 1 --read-mib 64 --threads 2 \
  >"$TMP/peak.json" || fail "bench peak"
check_json "$TMP/peak.json" fma_gflops_per_thread read_gbps_per_thread read_gbps_all_threads \
  threads isa || fail "peak JSON fields"
# Every unit is listed; a unit /proc/cpuinfo reports is present (measured unless AMX), an
# unlisted one absent with a reason; fp32 FMA agrees with the top-level figure within 25%.
node -e '
  const fs = require("fs");
  const j = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  const flags = new Set((fs.readFileSync("/proc/cpuinfo", "utf8").match(/^flags\s*:(.*)$/m) || ["", ""])[1].trim().split(/\s+/));
  const avx512 = flags.has("avx512f") && flags.has("avx512bw") && flags.has("avx512vl") && flags.has("avx512dq");
  const want = {fp32_fma: true, bf16_dot: avx512 && flags.has("avx512_bf16"), fp16_fma: avx512 && flags.has("avx512_fp16"),
                int8_vnni512: avx512 && flags.has("avx512_vnni"), int8_avx_vnni: flags.has("avx2") && flags.has("avx_vnni"),
                amx_bf16: flags.has("amx_bf16"), amx_int8: flags.has("amx_int8")};
  for (const [u, present] of Object.entries(want)) {
    const e = j.units[u];
    if (!e) throw new Error("unit " + u + " missing");
    if (e.present !== present) throw new Error(u + ": present " + e.present + ", /proc/cpuinfo says " + present);
    const measurable = present && !u.startsWith("amx");
    if (measurable !== (typeof e.gops_per_thread === "number" && e.gops_per_thread > 0))
      throw new Error(u + ": gops_per_thread " + e.gops_per_thread);
    if (!measurable && !e.note) throw new Error(u + ": no reason given");
  }
  const r = j.units.fp32_fma.gops_per_thread / j.fma_gflops_per_thread;
  if (r < 0.75 || r > 1.33) throw new Error("fp32_fma " + j.units.fp32_fma.gops_per_thread + " vs " + j.fma_gflops_per_thread);
' "$TMP/peak.json" || fail "peak units"

# Errors name the bad value.
if "$CPINFER" bench attention --mode sideways 2>"$TMP/err.txt"; then fail "bad --mode accepted"; fi
grep -q "sideways" "$TMP/err.txt" || fail "bad --mode error: $(cat "$TMP/err.txt")"
if "$CPINFER" bench attention --num-q-heads 6 --num-kv-heads 4 2>"$TMP/err.txt"; then
  fail "bad head counts accepted"
fi
grep -q "multiple" "$TMP/err.txt" || fail "head count error: $(cat "$TMP/err.txt")"
if "$CPINFER" bench attention --kv-cache-dtype f16 2>"$TMP/err.txt"; then fail "f16 accepted"; fi
grep -q "f16" "$TMP/err.txt" || fail "dtype error: $(cat "$TMP/err.txt")"
echo OK
