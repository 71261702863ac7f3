#!/usr/bin/env bash
# `cpinfer bench latency`: the JSON fields, their consistency (tokens/s from the times, MFU
# and MBU from the model's FLOPs / bytes and the measured peaks), on one rank and under
# pcp 2 (KV per rank about half of the single-rank figure).
set -euo pipefail
CPINFER=${1:?usage: bench_latency_test.sh path/to/cpinfer}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --out "$TMP/tiny" 2>/dev/null
"$CPINFER" bench latency --model "$TMP/tiny" --input-len 96 --output-len 5 --num-iters 2 \
  --warmup 0 --json --profile >"$TMP/one.json" 2>/dev/null
"$CPINFER" bench latency --model "$TMP/tiny" --input-len 96 --output-len 5 --num-iters 1 \
  --warmup 0 -pcp 2 --json >"$TMP/pcp.json" 2>/dev/null
"$CPINFER" bench latency --model "$TMP/tiny" --input-len 96 --output-len 2 --num-iters 1 \
  --warmup 0 -pcp 2 --json --overlap-comm on --timeline "$TMP/timeline.json" >"$TMP/overlap.json" 2>/dev/null
"$CPINFER" bench latency --model "$TMP/tiny" --input-len 96 --output-len 2 --num-iters 1 \
  --warmup 0 -pcp 2 --json --no-overlap-comm >"$TMP/serial.json" 2>/dev/null
if "$CPINFER" bench latency --model "$TMP/tiny" --input-len 8 --overlap-comm maybe >/dev/null 2>"$TMP/err"; then
  echo "FAIL: --overlap-comm maybe accepted"; exit 1
fi
grep -q "overlap-comm" "$TMP/err" || { cat "$TMP/err"; echo "FAIL: the error does not name --overlap-comm"; exit 1; }
node - "$TMP/one.json" "$TMP/pcp.json" "$TMP/serial.json" "$TMP/overlap.json" "$TMP/timeline.json" <<'JS'
const fs = require('fs');
const [one, pcp, serial, overlap] = process.argv.slice(2, 6).map((f) => JSON.parse(fs.readFileSync(f, 'utf8').trim().split('\n').pop()));
const timeline = JSON.parse(fs.readFileSync(process.argv[6], 'utf8'));
const fail = (m) => { console.error('FAIL:', m); process.exit(1); };
for (const k of ['ttft_s', 'itl_s', 'prefill_tokens_per_s', 'decode_tokens_per_s', 'comm_s', 'comm_decode_s',
  'kv_bytes_per_rank', 'kv_bytes_without_cp', 'peak_rss_bytes', 'mfu', 'mbu', 'prefill_flops',
  'decode_bytes_per_token', 'peak_fma_gflops_per_core', 'peak_read_gbps', 'peak_read_gbps_min',
  'peak_read_gbps_max', 'cores_used'])
  for (const r of [one, pcp]) if (typeof r[k] !== 'number' || !(r[k] >= 0)) fail(`field ${k}: ${r[k]}`);
const near = (a, b) => Math.abs(a - b) <= 1e-6 * Math.abs(b);
for (const r of [one, pcp]) {
  if (!near(r.prefill_tokens_per_s, 96 / r.ttft_s)) fail('prefill tokens/s != input_len / ttft');
  if (!near(r.decode_tokens_per_s, 1 / r.itl_s)) fail('decode tokens/s != 1 / itl');
  if (!near(r.mfu, r.prefill_flops / (r.ttft_s * r.peak_fma_gflops_per_core * 1e9 * r.cores_used))) fail('mfu formula');
  if (!near(r.mbu, r.decode_bytes_per_token / (r.itl_s * r.peak_read_gbps * 1e9))) fail('mbu formula');
  if (!(r.peak_read_gbps_min <= r.peak_read_gbps && r.peak_read_gbps <= r.peak_read_gbps_max && r.peak_read_gbps_min > 0))
    fail('peak_read_gbps outside [min, max]');
  // No upper bound on mbu: the tiny model's weights sit in L2/L3, so its decode reads them
  // faster than DRAM (mbu > 1 is real here; the bandwidth samples also drop under load).
  if (!(r.mfu > 0 && r.mfu < 1.2 && r.mbu > 0 && Number.isFinite(r.mbu))) fail(`mfu ${r.mfu} / mbu ${r.mbu} out of range`);
}
// One rank samples the bandwidth 3 times after each of its 2 iterations: a spread exists.
if (!(one.peak_read_gbps_min < one.peak_read_gbps_max)) fail('one rank: no spread of 6 read samples');
if (pcp.peak_read_gbps_min !== pcp.peak_read_gbps_max) fail('pcp 2: one after-run sample expected');
if (one.kv_bytes_per_rank !== one.kv_bytes_without_cp) fail('one rank: kv per rank != without cp');
if (!(pcp.kv_bytes_per_rank <= pcp.kv_bytes_without_cp / 2 + 8 * 4096)) fail('pcp 2: kv per rank not about half');
if (pcp.world_size !== 2 || pcp.layout.pcp !== 2) fail('pcp 2 layout');
// --profile: every phase of a one-rank forward pass, prefill and decode, summing to at most
// the step (the rest is planning and the step's own overhead), busy threads within the pool.
const want = ['embedding', 'norm', 'qkv_rope', 'attention', 'o_proj', 'gate_up_silu', 'down_proj', 'lm_head', 'sampling'];
for (const k of ['prefill', 'decode']) {
  const ph = one.phases && one.phases[k];
  if (!Array.isArray(ph)) fail(`phases.${k} missing`);
  const names = ph.map((p) => p.phase);
  for (const w of want) if (!names.includes(w)) fail(`phases.${k} lacks ${w}: ${names}`);
  if (names.includes('tp_all_reduce')) fail('one rank has no TP all-reduce');
  const share = ph.reduce((a, p) => a + p.share, 0);
  if (!(share > 0.3 && share <= 1.001)) fail(`phases.${k} shares sum to ${share}`);
  for (const p of ph) if (!(p.ms >= 0 && p.busy_threads >= 0 && p.busy_threads <= one.threads_per_rank + 0.1))
    fail(`phase ${k}.${p.phase}: ${JSON.stringify(p)}`);
}
if (pcp.phases !== undefined) fail('phases reported without --profile');
// The PCP K/V gather: on one host `auto` does not overlap (all of the gather exposed), nor
// does --no-overlap-comm; --overlap-comm on does (its exposed part is at most its time); one
// rank gathers nothing.
if (pcp.overlap_comm !== false || serial.overlap_comm !== false || overlap.overlap_comm !== true ||
    one.overlap_comm !== false) fail('overlap_comm flags');
// Overlapped: the exposed time is what the compute threads waited after their own-rows
// attention (it includes the hand-back from the communication thread, so on a loaded
// machine it can exceed the gather itself); both equal the sums over the timeline's layers
// (one timed iteration: the timeline is that prefill's).
const sum = (f) => timeline.layers.reduce((a, l) => a + f(l), 0) / 1e3;
if (!(overlap.kv_gather_s > 0 && overlap.kv_gather_exposed_s >= 0)) fail(`overlapped gather ${overlap.kv_gather_s} / exposed ${overlap.kv_gather_exposed_s}`);
if (Math.abs(overlap.kv_gather_s - sum((l) => l.gather_end_ms - l.gather_start_ms)) > 1e-6 ||
    Math.abs(overlap.kv_gather_exposed_s - sum((l) => l.wait_end_ms - l.local_attention_end_ms)) > 1e-6)
  fail(`gather ${overlap.kv_gather_s} / exposed ${overlap.kv_gather_exposed_s} differ from the timeline's sums`);
for (const r of [pcp, serial])
  if (!(r.kv_gather_s > 0 && r.kv_gather_exposed_s === r.kv_gather_s)) fail('serial gather not all exposed');
if (one.kv_gather_s !== 0 || one.kv_gather_exposed_s !== 0) fail('one rank gathered');
if (!near(overlap.comm_exposed_s, overlap.comm_s - (overlap.kv_gather_s - overlap.kv_gather_exposed_s))) fail('comm_exposed_s formula');
// --timeline: one entry per layer (2), in order: gather start <= its end <= wait end, and the
// own-rows attention ends before the wait does.
if (timeline.layers.length !== 2 || timeline.overlap_comm !== true) fail(`timeline ${JSON.stringify(timeline)}`);
for (const l of timeline.layers)
  if (!(l.gather_start_ms >= 0 && l.gather_start_ms <= l.gather_end_ms && l.gather_end_ms <= l.wait_end_ms + 1e-6 &&
        l.gather_start_ms <= l.local_attention_end_ms && l.local_attention_end_ms <= l.wait_end_ms && l.wait_end_ms <= timeline.ttft_ms))
    fail(`timeline layer ${JSON.stringify(l)}`);
console.log('bench_latency_test: all checks passed');
JS
