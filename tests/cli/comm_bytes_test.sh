#!/usr/bin/env bash
# The bytes every collective really moves (counted by Comm, reported by `bench latency` as
# comm_bytes) equal the formulas of docs/context-parallel.md §11 (comm_bytes_model), kind by
# kind, for the prefill step and a decode step, on several layouts: tensor x prefill context
# parallelism with an f32 and a bf16 cache (the docs' worked example: the exact figures are
# checked too), prompts with pads, an odd PCP size, a last token held by another PCP rank,
# and tp 4 x pcp 2 x dcp 2.
set -euo pipefail
CPINFER=${1:?usage: comm_bytes_test.sh path/to/cpinfer}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --out "$TMP/tiny" 2>/dev/null
run() {  # run NAME INPUT_LEN KV_DTYPE layout flags...
  local name=$1 n=$2 kv=$3; shift 3
  timeout 300 "$CPINFER" bench latency --model "$TMP/tiny" --input-len "$n" --output-len 2 \
    --num-iters 1 --warmup 0 --kv-cache-dtype "$kv" --json "$@" >"$TMP/$name.json" \
    2>"$TMP/$name.err" || { tail -5 "$TMP/$name.err" >&2; echo "FAIL: bench latency $*" >&2; exit 1; }
}
run one 50 f32
run tp2pcp2 1000 f32 -tp 2 -pcp 2
run tp2pcp2-bf16 1000 bf16 -tp 2 -pcp 2
run pcp2-n5 5 f32 -pcp 2
run pcp3 301 f32 -pcp 3
run tp4pcp2dcp2 301 bf16 -tp 4 -pcp 2 -dcp 2 --cp-kv-cache-interleave-size 8
node - "$TMP" <<'JS'
const fs = require('fs');
const dir = process.argv[2];
const load = (n) => JSON.parse(fs.readFileSync(`${dir}/${n}.json`, 'utf8').trim().split('\n').pop());
const fail = (m) => { console.error('FAIL:', m); process.exit(1); };
const kinds = ['kv_gather', 'query_gather', 'dcp_combine', 'pcp_combine', 'hidden_gather',
  'logits_gather', 'tp_all_reduce'];
const runs = {};
for (const n of ['one', 'tp2pcp2', 'tp2pcp2-bf16', 'pcp2-n5', 'pcp3', 'tp4pcp2dcp2']) {
  const r = runs[n] = load(n);
  for (const phase of ['prefill', 'decode'])
    for (const k of kinds) {
      const got = r.comm_bytes[phase][k], want = r.comm_bytes_model[phase][k];
      if (typeof got !== 'number' || got !== want) fail(`${n} ${phase} ${k}: counted ${got}, formula ${want}`);
    }
  console.log(`ok   ${n}: prefill ${r.comm_bytes.prefill.total} B, decode ${r.comm_bytes.decode.total} B per step`);
}
// One rank moves nothing (not even control traffic).
if (runs.one.comm_bytes.prefill.total !== 0 || runs.one.comm_bytes.decode.total !== 0) fail('one rank moved bytes');
// The docs' worked example, tp 2 x pcp 2, n 1000.
const p = runs.tp2pcp2.comm_bytes.prefill;
const expect = { kv_gather: 256000, hidden_gather: 0, logits_gather: 455808, tp_all_reduce: 4096000 };
for (const [k, v] of Object.entries(expect)) if (p[k] !== v) fail(`tp2pcp2 prefill ${k}: ${p[k]}, docs say ${v}`);
if (runs['tp2pcp2-bf16'].comm_bytes.prefill.kv_gather * 2 !== p.kv_gather) fail('a bf16 cache does not halve kv_gather');
// The last token of a 5-token prompt at pcp 2 is PCP rank 1's: one hidden row of 512 floats.
if (runs['pcp2-n5'].comm_bytes.prefill.hidden_gather !== 2048) fail('pcp2-n5 hidden_gather');
// DCP and PCP combines in decode are one all-to-all each.
const d = runs.tp4pcp2dcp2.comm_bytes.decode;
if (!(d.query_gather > 0 && d.dcp_combine > 0 && d.pcp_combine > 0)) fail('tp4pcp2dcp2 decode traffic missing');
console.log('comm_bytes_test: counted bytes equal the formulas');
JS
