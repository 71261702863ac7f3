#!/usr/bin/env bash
# `cpinfer bench serve` against a real `cpinfer serve` (one rank, tiny model): every request
# completes with exactly --output-len tokens, the JSON has the contract's fields, and a
# finite --request-rate and --max-concurrency work; the prefix-repetition dataset, one
# request at a time, finds every repeated prefix in the server's prefix cache; a bad URL
# and bad dataset flags are clear errors.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib/wait_for_server.sh"
CPINFER=${1:?usage: bench_serve_cli_test.sh path/to/cpinfer}
TMP=$(mktemp -d)
SERVER_PID=""
trap '[[ -n "$SERVER_PID" ]] && kill "$SERVER_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; tail -5 "$TMP/server.log" >&2; exit 1; }
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --out "$TMP/tiny" 2>/dev/null
"$CPINFER" serve "$TMP/tiny" --port 0 --served-model-name tiny --max-model-len 512 \
  --kv-cache-space 0.02 >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
wait_for_server "$SERVER_PID" "$TMP/server.log" tiny

"$CPINFER" bench serve --url "$URL" --num-prompts 12 --input-len 40 --output-len 9 --json \
  >"$TMP/inf.json" 2>"$TMP/inf.err" || { cat "$TMP/inf.err"; fail "bench serve (rate inf)"; }
"$CPINFER" bench serve --url "$URL" --num-prompts 6 --input-len 20 --output-len 5 \
  --request-rate 30 --max-concurrency 2 --seed 3 --json >"$TMP/rate.json" 2>"$TMP/rate.err" ||
  { cat "$TMP/rate.err"; fail "bench serve (rate 30)"; }
# 2 prefixes of 64 tokens (4 whole 16-token blocks) + 8 fresh tokens, round robin: requests
# 0 and 1 fill the cache, each of the 4 others finds exactly its 64 prefix tokens there.
"$CPINFER" bench serve --url "$URL" --dataset-name prefix-repetition \
  --prefix-repetition-num-prefixes 2 --prefix-repetition-prefix-len 64 \
  --prefix-repetition-suffix-len 8 --num-prompts 6 --max-concurrency 1 --output-len 4 --json \
  >"$TMP/prefix.json" 2>"$TMP/prefix.err" ||
  { cat "$TMP/prefix.err"; fail "bench serve (prefix)"; }
node - "$TMP/inf.json" "$TMP/rate.json" "$TMP/prefix.json" <<'JS' || fail "bench serve results"
const fs = require('fs');
const [inf, rate, prefix] = process.argv.slice(2).map((f) => JSON.parse(fs.readFileSync(f, 'utf8').trim().split('\n').pop()));
const fields = ['completed', 'failed', 'duration_s', 'total_input_tokens', 'total_output_tokens',
  'request_throughput', 'output_throughput', 'total_token_throughput',
  ...['ttft', 'tpot', 'itl', 'e2el'].flatMap((m) => ['mean', 'median', 'p90', 'p99'].map((s) => `${s}_${m}_ms`)),
  'max_concurrent_requests', 'num_prompts', 'input_len', 'output_len', 'request_rate', 'model', 'url'];
let bad = fields.filter((f) => !(f in inf));
if (bad.length) { console.error('missing fields', bad); process.exit(1); }
const ok = (c, w) => { if (!c) { console.error('FAIL:', w); process.exit(1); } };
ok(inf.completed === 12 && inf.failed === 0, 'all 12 requests complete');
ok(inf.total_input_tokens === 12 * 40 && inf.total_output_tokens === 12 * 9, 'token totals');
ok(inf.median_ttft_ms > 0 && inf.median_ttft_ms <= inf.median_e2el_ms, 'ttft <= e2el');
ok(inf.p99_itl_ms >= inf.median_itl_ms && inf.median_itl_ms > 0, 'itl percentiles');
ok(inf.request_rate === null && inf.model === 'tiny', 'inf rate is null, model from /v1/models');
ok(rate.completed === 6 && rate.failed === 0 && rate.max_concurrent_requests <= 2, 'rate 30, concurrency 2');
ok(rate.request_rate === 30 && rate.total_output_tokens === 30, 'rate run totals');
ok(inf.dataset_name === 'random' && typeof inf.total_cached_tokens === 'number',
  'random dataset fields');
ok(prefix.dataset_name === 'prefix-repetition' && prefix.completed === 6 && prefix.failed === 0,
  'prefix run completes');
ok(prefix.input_len === 72 && prefix.total_input_tokens === 6 * 72, 'prefix run prompt lengths');
ok(prefix.prefix_cache_hit_rate > 0, `prefix cache hit rate ${prefix.prefix_cache_hit_rate} > 0`);
ok(prefix.total_cached_tokens === 4 * 64,
  `total_cached_tokens ${prefix.total_cached_tokens} == 256`);
ok(prefix.shareable_tokens === 4 * 64 && prefix.hit_rate_of_shareable === 1,
  `hit_rate_of_shareable ${prefix.hit_rate_of_shareable} == 1`);
const pr = prefix.prefix_repetition;
ok(pr.num_prefixes === 2 && pr.prefix_len === 64 && pr.suffix_len === 8 && pr.output_len === 4,
  'prefix_repetition parameters');
ok(prefix.median_ttft_first_of_prefix_ms > 0 && prefix.median_ttft_repeated_prefix_ms > 0,
  'first/repeated TTFT');
JS
if "$CPINFER" bench serve --url "https://127.0.0.1:1" --num-prompts 1 --json >/dev/null 2>"$TMP/bad.err"; then
  fail "an https URL must be refused"
fi
grep -qi "http" "$TMP/bad.err" || fail "no clear error for an https URL: $(cat "$TMP/bad.err")"
# Bad dataset flags are refused before any request, with the flag named.
refused() {  # FLAG ARGS...: bench serve ARGS must fail with a message naming FLAG
  local flag=$1
  shift
  if "$CPINFER" bench serve --url "$URL" --num-prompts 1 --json "$@" \
    >/dev/null 2>"$TMP/bad.err"; then
    fail "bench serve $* must be refused"
  fi
  grep -q -- "$flag" "$TMP/bad.err" || fail "no error naming $flag for $*: $(cat "$TMP/bad.err")"
}
PR=(--dataset-name prefix-repetition)
refused --dataset-name --dataset-name sharegpt
refused --prefix-repetition-num-prefixes "${PR[@]}" --prefix-repetition-num-prefixes 0
refused --prefix-repetition-prefix-len "${PR[@]}" --prefix-repetition-prefix-len -1
refused --prefix-repetition-suffix-len "${PR[@]}" --prefix-repetition-suffix-len 0
refused --prefix-repetition-output-len "${PR[@]}" --prefix-repetition-output-len 0
refused --input-len "${PR[@]}" --input-len 32
refused --prefix-repetition-prefix-len --prefix-repetition-prefix-len 32  # random dataset
# vLLM's spelling is accepted.
"$CPINFER" bench serve --url "$URL" --dataset-name prefix_repetition --num-prompts 1 \
  --prefix-repetition-prefix-len 16 --prefix-repetition-suffix-len 4 --output-len 2 --json \
  >"$TMP/vllm.json" 2>"$TMP/vllm.err" ||
  { cat "$TMP/vllm.err"; fail "--dataset-name prefix_repetition"; }
grep -q '"dataset_name":"prefix-repetition"' "$TMP/vllm.json" ||
  fail "prefix_repetition run: $(cat "$TMP/vllm.json")"
echo "bench_serve_cli_test: all checks passed"
