#!/usr/bin/env bash
# `cpinfer plan`: the layouts it enumerates (exactly the valid ones), the JSON contract, the
# recommendation (the fitting layout with the least TTFT + output_len x ITL), its
# communication bytes (the formulas comm_bytes_test checks against the real collectives:
# tp 2 x pcp 2 at 1000 tokens of `tiny` is the docs' worked example, 4,807,808 bytes), the
# memory check, slower links costing more, the calibration run, and clear errors.
set -euo pipefail
CPINFER=${1:?usage: plan_test.sh path/to/cpinfer}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --out "$TMP/tiny" 2>/dev/null
RATES=(--gemm-gflops-per-core 50 --attention-gflops-per-core 40 --read-gbps-per-core 8 --local-gbps 5)
"$CPINFER" plan --model "$TMP/tiny" --context-len 1000 --cores-per-host 4 --memory-gib 16 "${RATES[@]}" --json >"$TMP/one.json"
"$CPINFER" plan --model "$TMP/tiny" --context-len 1000 --cores-per-host 4 --memory-gib 0.001 "${RATES[@]}" --json >"$TMP/nofit.json"
for gbps in 1 100; do
  "$CPINFER" plan --model "$TMP/tiny" --context-len 100000 --hosts 2 --cores-per-host 2 --link-gbps $gbps \
    --memory-gib 16 "${RATES[@]}" --json >"$TMP/link-$gbps.json"
done
node - "$TMP" <<'JS'
const fs = require('fs');
const dir = process.argv[2];
const load = (n) => JSON.parse(fs.readFileSync(`${dir}/${n}.json`, 'utf8'));
const fail = (m) => { console.error('FAIL:', m); process.exit(1); };
const one = load('one');
const fields = ['tp', 'pcp', 'dcp', 'interleave', 'threads_per_rank', 'ttft_s', 'itl_s',
  'kv_bytes_per_rank', 'comm_bytes_per_step', 'fits'];
for (const l of one.layouts) for (const f of fields) if (!(f in l)) fail(`layout lacks ${f}`);
// tiny: 16 q / 2 KV heads, intermediate 1024, 4 cores on one host: tp in {1, 2, 4}, tp x pcp
// dividing 4, dcp 2 only at tp 4 (tp > KV heads), interleave 1 or 16 when sharded.
const key = (l) => `${l.tp},${l.pcp},${l.dcp},${l.interleave},${l.threads_per_rank}`;
const want = ['1,1,1,1,4', '1,2,1,1,2', '1,2,1,16,2', '1,4,1,1,1', '1,4,1,16,1', '2,1,1,1,2',
  '2,2,1,1,1', '2,2,1,16,1', '4,1,1,1,1', '4,1,2,1,1', '4,1,2,16,1'];
const got = one.layouts.map(key).sort();
if (JSON.stringify(got) !== JSON.stringify(want.slice().sort())) fail(`layouts ${got} != ${want}`);
const score = (l) => l.ttft_s + one.output_len * l.itl_s;
const best = Math.min(...one.layouts.filter((l) => l.fits).map(score));
if (!one.recommended || !one.recommended.fits || score(one.recommended) !== best) fail('recommended is not the best fitting layout');
const t22 = one.layouts.find((l) => key(l) === '2,2,1,1,1');
if (t22.comm_bytes_per_step !== 4807808) fail(`tp2 pcp2 comm_bytes_per_step ${t22.comm_bytes_per_step}`);
const solo = one.layouts.find((l) => key(l) === '1,1,1,1,4');
if (solo.comm_bytes_per_step !== 0) fail('one rank communicates');
// KV per rank: 1000 tokens x 2 layers x 2 (K, V) x 2 KV heads x 32 x 4 B on one rank.
if (solo.kv_bytes_per_rank !== 1000 * 2 * 2 * 2 * 32 * 4) fail(`kv_bytes_per_rank ${solo.kv_bytes_per_rank}`);
if (one.calibration !== null) fail('calibrated although every rate was given');
const nofit = load('nofit');
if (nofit.recommended !== null || nofit.layouts.some((l) => l.fits)) fail('1 MiB should fit nothing');
// Two hosts: PCP crosses the link, so a slower link costs a PCP layout more.
const slow = load('link-1'), fast = load('link-100');
const p = (j) => j.layouts.find((l) => l.tp === 1 && l.pcp === 4 && l.interleave === 1);
if (!(p(slow).ttft_s > p(fast).ttft_s)) fail('a 1 Gbit/s link is not slower than 100 Gbit/s');
if (slow.layouts.some((l) => (l.tp * l.pcp) % 2 !== 0)) fail('a layout does not split over 2 hosts');
console.log(`ok   ${one.layouts.length} layouts; recommended tp ${one.recommended.tp} x pcp ${one.recommended.pcp}`);
JS
# Decode: the layers' weights at the decode GEMV's rate, the LM head at its own (by default
# the same), the KV at the read rate. tiny (f32, 2 layers, tied embeddings) on one rank of 4
# cores: layers 2 x 2,162,688 MACs x 4 B = 17,301,504 B, the 151936 x 512 LM head
# 311,164,928 B (together 328,466,432 B); KV 1000 x 2 x 2 x 2 x 32 x 4 = 1,024,000 B.
# At 4 GB/s for weights and 8 for reads: 328466432 / 16e9 + 1024000 / 32e9 s; with the LM
# head at 2 GB/s: 17301504 / 16e9 + 311164928 / 8e9 + 1024000 / 32e9 s.
"$CPINFER" plan --model "$TMP/tiny" --context-len 1000 --cores-per-host 4 --memory-gib 16 "${RATES[@]}" \
  --weight-read-gbps-per-core 4 --json >"$TMP/gemv.json"
"$CPINFER" plan --model "$TMP/tiny" --context-len 1000 --cores-per-host 4 --memory-gib 16 "${RATES[@]}" \
  --weight-read-gbps-per-core 4 --lm-head-read-gbps-per-core 2 --json >"$TMP/head.json"
node - "$TMP" <<'JS'
const fs = require('fs');
const load = (n) => JSON.parse(fs.readFileSync(`${process.argv[2]}/${n}.json`, 'utf8'));
const fail = (m) => { console.error('FAIL:', m); process.exit(1); };
const solo = (j) => j.layouts.find((l) => l.tp === 1 && l.pcp === 1);
const near = (a, b) => Math.abs(a - b) <= 1e-12 + 1e-9 * Math.abs(b);
const g = load('gemv'), one = load('one'), h = load('head');
if (g.machine.weight_read_gbps_per_core !== 4) fail(`weight rate ${g.machine.weight_read_gbps_per_core}`);
if (one.machine.weight_read_gbps_per_core !== 8) fail('every other rate given: weights should read at the read rate');
if (!near(solo(g).decode_read_s, 328466432 / 16e9 + 1024000 / 32e9)) fail(`decode_read_s ${solo(g).decode_read_s}`);
if (!near(solo(one).decode_read_s, 328466432 / 32e9 + 1024000 / 32e9)) fail(`decode_read_s ${solo(one).decode_read_s}`);
if (!(solo(g).itl_s > solo(one).itl_s)) fail('a slower GEMV does not slow the decode');
if (g.machine.lm_head_read_gbps_per_core !== 4) fail(`LM head rate ${g.machine.lm_head_read_gbps_per_core} (the GEMV rate expected)`);
if (h.machine.lm_head_read_gbps_per_core !== 2) fail(`LM head rate ${h.machine.lm_head_read_gbps_per_core}`);
if (!near(solo(h).decode_read_s, 17301504 / 16e9 + 311164928 / 8e9 + 1024000 / 32e9)) fail(`decode_read_s with the LM head rate ${solo(h).decode_read_s}`);
console.log('ok   decode time = layers at the GEMV rate + LM head at its rate + KV at the read rate');
JS
# Fewer decodes than PCP ranks on one host: only the home ranks' cores stream the layers, at
# the all-busy rate scaled by the busy share of the host's cores, at most the one-thread-alone
# rate. pcp 2 x 2 threads on 4 cores, B = 1: 2 busy cores of 4, so min(alone, 4 x 4 / 2 = 8).
for alone in 6 20; do
  "$CPINFER" plan --model "$TMP/tiny" --context-len 1000 --cores-per-host 4 --memory-gib 16 "${RATES[@]}" \
    --weight-read-gbps-per-core 4 --weight-read-gbps-alone $alone --json >"$TMP/alone-$alone.json"
done
"$CPINFER" plan --model "$TMP/tiny" --context-len 1000 --cores-per-host 4 --memory-gib 16 "${RATES[@]}" \
  --weight-read-gbps-per-core 4 --weight-read-gbps-alone 6 --concurrency 2 --json >"$TMP/alone-b2.json"
# Oversubscribed (8 ranks on 4 cores, half a core each while all are busy): the one home
# rank's thread has a whole core for the layers.
"$CPINFER" plan --model "$TMP/tiny" --context-len 1000 --cores-per-host 4 --memory-gib 16 "${RATES[@]}" \
  --weight-read-gbps-per-core 4 --weight-read-gbps-alone 6 --oversubscribe --json >"$TMP/alone-over.json"
node - "$TMP" <<'JS'
const fs = require('fs');
const load = (n) => JSON.parse(fs.readFileSync(`${process.argv[2]}/${n}.json`, 'utf8'));
const fail = (m) => { console.error('FAIL:', m); process.exit(1); };
const near = (a, b) => Math.abs(a - b) <= 1e-12 + 1e-9 * Math.abs(b);
const find = (x, tp, pcp) => x.layouts.find((l) => l.tp === tp && l.pcp === pcp && l.dcp === 1 && l.interleave === 1);
const layersB = 17301504, headB = 311164928;
const a6 = load('alone-6'), a20 = load('alone-20'), b2 = load('alone-b2'), g = load('gemv');
if (a6.machine.weight_read_gbps_alone !== 6) fail(`weight_read_gbps_alone ${a6.machine.weight_read_gbps_alone}`);
if (g.machine.weight_read_gbps_alone !== 0) fail('rates given without the alone rate: it should be 0 (none)');
// pcp 2, B = 1: layers on rank 0's 2 cores at min(alone, 8), its half of the LM head at the
// all-busy rate (every rank runs its cut), 500 tokens of KV at the read rate.
const want = (rate) => layersB / (2 * rate * 1e9) + headB / 2 / (2 * 4e9) + 512000 / (2 * 8e9);
if (!near(find(a6, 1, 2).decode_read_s, want(6))) fail(`pcp 2, alone 6: ${find(a6, 1, 2).decode_read_s} != ${want(6)}`);
if (!near(find(a20, 1, 2).decode_read_s, want(8))) fail(`pcp 2, alone 20: ${find(a20, 1, 2).decode_read_s} != ${want(8)} (capped at the busy share)`);
// tp 2 x pcp 2 x 1 thread, B = 1: the home PCP rank is a TP group of 2 ranks, 2 busy cores of
// 4, so its layer shard (half the bytes) reads at min(20, 4 x 4 / 2) = 8 instead of 4.
const tp2pcp2 = (x) => find(x, 2, 2).decode_read_s;
const wantDelta = layersB / 2 * (1 / 4e9 - 1 / 8e9);
if (!near(tp2pcp2(g) - tp2pcp2(a20), wantDelta)) fail(`tp 2 x pcp 2: ${tp2pcp2(g) - tp2pcp2(a20)} s faster, want ${wantDelta}`);
// One rank (every core busy) and pcp 2 at B = 2 (every rank busy) keep the all-busy rate.
if (!near(find(a6, 1, 1).decode_read_s, find(g, 1, 1).decode_read_s)) fail('one rank moved with the alone rate');
const pass = (bytes, macs, rows, cores) => Math.max(bytes / (cores * 4e9), 2 * rows * macs / (cores * 50e9));
const wantB2 = layersB / (2 * 4e9) + pass(headB / 2, 151936 * 512 / 2, 2, 2) + 2 * 512000 / (2 * 8e9);
if (!near(find(b2, 1, 2).decode_read_s, wantB2)) fail(`pcp 2, B = 2: ${find(b2, 1, 2).decode_read_s} != ${wantB2}`);
// pcp 8 x 1 thread on 4 cores, B = 1: the layers on one whole core at min(alone 6, 4 x 4 / 1);
// the LM head cut over 8 ranks and 125 tokens of KV each on half a core.
const over = load('alone-over'), p8 = find(over, 1, 8);
if (!p8) fail('no pcp 8 layout with --oversubscribe on 4 cores');
const wantP8 = layersB / (1 * 6e9) + headB / 8 / (0.5 * 4e9) + 128000 / (0.5 * 8e9);
if (!near(p8.decode_read_s, wantP8)) fail(`pcp 8 on 4 cores, B = 1: ${p8.decode_read_s} != ${wantP8} (the home rank's layers on a whole core)`);
console.log(`ok   fewer decodes than PCP ranks: pcp 2 layers at ${(layersB / (2 * 6e9) * 1e3).toFixed(3)} ms (alone 6), capped at 8 GB/s`);
JS
# Several sequences decoding together (--concurrency B): rank 0 runs ceil(B / pcp) rows of
# the layers and all B rows of its cut of the LM head; with every rate given (nothing
# calibrated at more rows) each pass takes the larger of reading its weights at the one-row
# rate and its FLOPs at the GEMM rate. At B = 64 on tiny (f32, 2 layers) both passes are
# bound by the FLOPs: one rank of 4 cores, layers max(17301504 / 16e9, 2 x 64 x 4325376 /
# 200e9) s. The KV per rank and the memory check hold all B sequences; max_concurrency is
# the memory rule solved for B.
for b in 64 200; do
  "$CPINFER" plan --model "$TMP/tiny" --context-len 1000 --cores-per-host 4 --memory-gib 0.5 "${RATES[@]}" \
    --weight-read-gbps-per-core 4 --concurrency $b --json >"$TMP/conc-$b.json"
done
node - "$TMP" <<'JS'
const fs = require('fs');
const load = (n) => JSON.parse(fs.readFileSync(`${process.argv[2]}/${n}.json`, 'utf8'));
const fail = (m) => { console.error('FAIL:', m); process.exit(1); };
const near = (a, b) => Math.abs(a - b) <= 1e-12 + 1e-9 * Math.abs(b);
const j = load('conc-64'), big = load('conc-200');
if (j.concurrency !== 64) fail(`concurrency ${j.concurrency}`);
const find = (x, tp, pcp) => x.layouts.find((l) => l.tp === tp && l.pcp === pcp && l.dcp === 1 && l.interleave === 1);
const layersB = 17301504, layersMacs = 4325376, headB = 311164928, headMacs = 151936 * 512, kv1 = 1024000;
const pass = (bytes, macs, rows, cores) => Math.max(bytes / (cores * 4e9), 2 * rows * macs / (cores * 50e9));
const solo = find(j, 1, 1), pcp2 = find(j, 1, 2);
const wantSolo = pass(layersB, layersMacs, 64, 4) + pass(headB, headMacs, 64, 4) + 64 * kv1 / (4 * 8e9);
if (!near(solo.decode_read_s, wantSolo)) fail(`one rank, B 64: decode_read_s ${solo.decode_read_s} != ${wantSolo}`);
// pcp 2, 2 cores per rank: 32 rows of the layers, the LM head's half for 64 rows, rank 0's
// 500 of the 1000 tokens of each sequence.
const wantPcp = pass(layersB, layersMacs, 32, 2) + pass(headB / 2, headMacs / 2, 64, 2) + 64 * 512000 / (2 * 8e9);
if (!near(pcp2.decode_read_s, wantPcp)) fail(`pcp 2, B 64: decode_read_s ${pcp2.decode_read_s} != ${wantPcp}`);
if (solo.kv_bytes_per_rank !== 64 * kv1) fail(`kv_bytes_per_rank ${solo.kv_bytes_per_rank} for 64 sequences`);
if (!near(solo.decode_tokens_per_s, 64 / solo.itl_s)) fail('decode_tokens_per_s is not B / itl_s');
// 0.5 GiB per host: one rank holds floor((0.9 x 0.5 GiB - 328466432) / 1024000) sequences.
const wantMax = Math.floor((0.9 * 0.5 * 2 ** 30 - 328466432) / kv1);
if (solo.max_concurrency !== wantMax) fail(`max_concurrency ${solo.max_concurrency} != ${wantMax}`);
for (const x of [j, big]) for (const l of x.layouts)
  if (l.fits !== (x.concurrency <= l.max_concurrency)) fail(`fits ${l.fits} but max_concurrency ${l.max_concurrency} at B ${x.concurrency}`);
if (!find(j, 1, 1).fits || find(big, 1, 1).fits) fail('one rank should hold 64 sequences of 1000 tokens in 0.5 GiB and not 200');
// More decodes per step cost more bytes and time than one (the B = 1 figures: one.json).
const one = find(load('one'), 1, 2);
if (!(pcp2.comm_bytes_decode_step > one.comm_bytes_decode_step)) fail('64 decodes communicate no more than one');
console.log(`ok   concurrency 64: one rank ${(solo.itl_s * 1e3).toFixed(2)} ms, pcp 2 ${(pcp2.itl_s * 1e3).toFixed(2)} ms; max ${solo.max_concurrency} sequences`);
JS
# The calibration run and the text table.
"$CPINFER" plan --model "$TMP/tiny" --context-len 4096 >"$TMP/text.out" 2>"$TMP/text.err"
grep -q "calibrated per core.*decode layers [0-9.]* GB/s, LM head [0-9.]* GB/s" "$TMP/text.out" || { cat "$TMP/text.out"; echo "FAIL: no calibration line"; exit 1; }
grep -q "^recommended: " "$TMP/text.out" || { cat "$TMP/text.out"; echo "FAIL: no recommendation"; exit 1; }
# The calibration in JSON: every rate measured, positive and finite.
"$CPINFER" plan --model "$TMP/tiny" --context-len 4096 --concurrency 4 --json >"$TMP/cal.json"
node - "$TMP/cal.json" <<'JS'
const j = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'));
const fail = (m) => { console.error('FAIL:', m); process.exit(1); };
for (const k of ['gemm_gflops_per_core', 'attention_gflops_per_core', 'read_gbps_per_core',
                 'weight_read_gbps_per_core', 'lm_head_read_gbps_per_core', 'read_gbps_1t', 'fma_gflops_1t'])
  if (!(Number.isFinite(j.calibration[k]) && j.calibration[k] > 0)) fail(`calibration.${k} = ${j.calibration[k]}`);
if (j.machine.lm_head_read_gbps_per_core !== j.calibration.lm_head_read_gbps_per_core) fail('the LM head rate is not the calibrated one');
// The one-thread-alone decode rate: measured with more than one thread, 0 (none) with one.
if (j.calibration.threads > 1 ? !(j.calibration.weight_read_gbps_alone > 0) : j.calibration.weight_read_gbps_alone !== 0)
  fail(`calibration.weight_read_gbps_alone = ${j.calibration.weight_read_gbps_alone} with ${j.calibration.threads} threads`);
if (j.calibration.rounds !== 3) fail(`calibration.rounds = ${j.calibration.rounds}, want 3 (each rate the median of 3 interleaved rounds)`);
// --concurrency 4 on this machine's cores: the layouts need 4 rows (pcp 1: the layers and
// the LM head) and, where pcp 2 or 4 fits in the cores, 2 or 1 rows of the layers; each row
// count above one is measured for both passes.
const rows = j.calibration.decode_rows.map((r) => r.rows);
const need = new Set([4]);
for (const l of j.layouts) if (Math.ceil(4 / l.pcp) > 1) need.add(Math.ceil(4 / l.pcp));
if (JSON.stringify(rows) !== JSON.stringify([...need].sort((a, b) => a - b))) fail(`calibrated rows ${rows}, want ${[...need]}`);
for (const r of j.calibration.decode_rows)
  for (const k of ['weight_read_gbps_per_core', 'lm_head_read_gbps_per_core'])
    if (!(Number.isFinite(r[k]) && r[k] > 0)) fail(`decode_rows ${r.rows}: ${k} = ${r[k]}`);
console.log('ok   calibration', JSON.stringify(j.calibration));
JS
# Errors name the problem.
if "$CPINFER" plan --model "$TMP/missing" --context-len 10 >/dev/null 2>"$TMP/err"; then echo "FAIL: missing model accepted"; exit 1; fi
grep -q "missing" "$TMP/err" || { cat "$TMP/err"; echo "FAIL: error does not name the directory"; exit 1; }
if "$CPINFER" plan --model "$TMP/tiny" --context-len 0 >/dev/null 2>"$TMP/err"; then echo "FAIL: --context-len 0 accepted"; exit 1; fi
grep -q "context-len" "$TMP/err" || { cat "$TMP/err"; echo "FAIL: error does not name --context-len"; exit 1; }
if "$CPINFER" plan --model "$TMP/tiny" --context-len 10 --concurrency 0 >/dev/null 2>"$TMP/err"; then echo "FAIL: --concurrency 0 accepted"; exit 1; fi
grep -q "concurrency" "$TMP/err" || { cat "$TMP/err"; echo "FAIL: error does not name --concurrency"; exit 1; }
if "$CPINFER" plan --model "$TMP/tiny" --context-len 10 --weight-read-gbps-alone 0 >/dev/null 2>"$TMP/err"; then echo "FAIL: --weight-read-gbps-alone 0 accepted"; exit 1; fi
grep -q "weight-read-gbps-alone" "$TMP/err" || { cat "$TMP/err"; echo "FAIL: error does not name --weight-read-gbps-alone"; exit 1; }
# --kv-cache-dtype auto (the default) is the model's dtype (config.json torch_dtype): f32
# for the f32 model above, bf16 (half the KV bytes per rank) for a bfloat16 config.
mkdir -p "$TMP/tiny-bf16"
node -e 'const fs=require("fs"); const c=JSON.parse(fs.readFileSync(process.argv[1]+"/config.json"));
  c.torch_dtype="bfloat16"; fs.writeFileSync(process.argv[2]+"/config.json", JSON.stringify(c));' "$TMP/tiny" "$TMP/tiny-bf16"
for m in tiny tiny-bf16; do
  for kv in auto f32; do
    "$CPINFER" plan --model "$TMP/$m" --context-len 1000 --cores-per-host 4 --memory-gib 16 "${RATES[@]}" \
      --kv-cache-dtype $kv --json >"$TMP/kv-$m-$kv.json"
  done
done
node - "$TMP" <<'JS'
const fs = require('fs');
const load = (n) => JSON.parse(fs.readFileSync(`${process.argv[2]}/${n}.json`, 'utf8'));
const fail = (m) => { console.error('FAIL:', m); process.exit(1); };
const kv = (j) => j.layouts.find((l) => l.tp === 1 && l.pcp === 1).kv_bytes_per_rank;
if (load('kv-tiny-auto').kv_cache_dtype !== 'f32' || kv(load('kv-tiny-auto')) !== kv(load('kv-tiny-f32'))) fail('auto on an f32 model is not f32');
if (load('kv-tiny-bf16-auto').kv_cache_dtype !== 'bf16') fail(`auto on a bf16 model: ${load('kv-tiny-bf16-auto').kv_cache_dtype}`);
if (2 * kv(load('kv-tiny-bf16-auto')) !== kv(load('kv-tiny-bf16-f32'))) fail('auto on a bf16 model does not halve the KV bytes');
JS
echo "plan_test: ok"
