#!/usr/bin/env bash
# `cpinfer serve` end to end: curl-level checks of every endpoint and bad request,
# the official `openai` npm client (tests/server/openai_client_test.mjs), client
# disconnects that must cancel requests and free their pages, on one rank and under
# tp 2 x pcp 2; greedy answers under the CP layout must equal the single-rank ones, and
# the server must be healthy with every KV page back in every rank's pool afterwards.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib/wait_for_server.sh"
source "$(dirname "$0")/../../scripts/lib/cpu_time.sh"
CPINFER=${1:?usage: serve_test.sh path/to/cpinfer}
SRC=${CPINFER_SOURCE_DIR:?}
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
MODEL="$TMP/tiny"
# The vocabulary cut to 4099 ids (make-model --vocab-size; the Qwen tokenizer cut to match,
# so text, chat templates and tool calls go through a real byte-level BPE): what is checked is
# the API, and the real 151936 ids would make each step mostly the LM head.
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --seed 5 --vocab-size 4099 \
  --out "$MODEL" 2>/dev/null
KEY=test-key
fail() { echo "FAIL: $*" >&2; [[ -n "${LOG:-}" ]] && tail -20 "$LOG" >&2; exit 1; }

start_server() {  # start_server NAME args... ; sets URL, SERVER_PID, LOG
  local name=$1; shift
  LOG="$TMP/$name.log"
  "$CPINFER" serve --model "$MODEL" --port 0 --api-key "$KEY" --served-model-name tiny \
    --max-model-len 8192 --kv-cache-space 0.05 --max-request-body-bytes 100000 "$@" \
    >"$LOG" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  wait_for_server "$SERVER_PID" "$LOG" "$name"
}
auth=(-H "Authorization: Bearer $KEY" -H "Content-Type: application/json")

# status BODY_FILE method path [data]: prints the HTTP status, the body goes to BODY_FILE
status() {
  local out=$1 method=$2 path=$3; shift 3
  curl -s -o "$out" -w "%{http_code}" -X "$method" "${auth[@]}" "$URL$path" "$@"
}
expect_error() {  # expect_error CODE WHAT curl-args...
  local code=$1 what=$2; shift 2
  local got
  got=$(status "$TMP/err.json" "$@")
  [[ "$got" == "$code" ]] || fail "$what: HTTP $got, expected $code ($(cat "$TMP/err.json"))"
  node -e 'const e=JSON.parse(require("fs").readFileSync(process.argv[1])).error;
    if (!e || typeof e.message!=="string" || !e.message || e.code!==+process.argv[2]) process.exit(1)' \
    "$TMP/err.json" "$code" || fail "$what: not an OpenAI error body: $(cat "$TMP/err.json")"
}
metric() {  # metric NAME_WITH_LABELS: its value from /metrics
  curl -s "$URL/metrics" | awk -v n="$1" 'index($0, n" ") == 1 { print $2 }'
}
# Waits until nothing runs or waits and every rank's audited free pages equal the pool.
wait_all_pages_back() {
  local ranks=$1 total ok cached
  for _ in $(seq 300); do
    total=$(metric 'cpinfer:kv_pages_total{model_name="tiny"}')
    ok=1
    [[ "$(metric 'vllm:num_requests_running{model_name="tiny"}')" == 0 ]] || ok=0
    [[ "$(metric 'vllm:num_requests_waiting{model_name="tiny"}')" == 0 ]] || ok=0
    for r in $(seq 0 $((ranks - 1))); do
      # Every page is free or held only by the prefix cache, and the rank's own pool agrees.
      cached=$(metric "cpinfer:kv_pages_cached{model_name=\"tiny\",rank=\"$r\"}")
      [[ "$(metric "cpinfer:kv_pages_free_audited{model_name=\"tiny\",rank=\"$r\"}")" == "$((total - cached))" ]] || ok=0
      [[ "$(metric "cpinfer:kv_pages_used{model_name=\"tiny\",rank=\"$r\"}")" == 0 ]] || ok=0
    done
    ((ok)) && break
    sleep 0.1
  done
  ((ok)) || { curl -s "$URL/metrics" | grep -E "kv_|num_requests" >&2; fail "KV pages did not all come back"; }
  [[ -z "${EXPECT_PAGES:-}" || "$total" == "$EXPECT_PAGES" ]] ||
    fail "pool has $total pages per rank, expected $EXPECT_PAGES (--num-kv-blocks)"
  [[ "$(metric 'cpinfer:kv_audit_mismatches_total{model_name="tiny"}')" == 0 ]] ||
    fail "a rank's KV pool disagreed with the scheduler's account"
}

curl_checks() {
  local ranks=$1
  [[ "$(curl -s -o /dev/null -w "%{http_code}" "$URL/health")" == 200 ]] || fail "/health"
  # Authentication, routing and malformed bodies.
  local got
  got=$(curl -s -o "$TMP/err.json" -w "%{http_code}" "$URL/v1/models")
  [[ "$got" == 401 ]] || fail "/v1/models without a key: HTTP $got"
  expect_error 404 "unknown path" GET /v1/nothing
  expect_error 400 "invalid JSON" POST /v1/completions -d '{"prompt": "x", '
  expect_error 400 "body not an object" POST /v1/completions -d '[1, 2]'
  expect_error 400 "prompt missing" POST /v1/completions -d '{"max_tokens": 3}'
  expect_error 400 "max_tokens a string" POST /v1/completions -d '{"prompt": "x", "max_tokens": "5"}'
  expect_error 400 "stop not a string" POST /v1/completions -d '{"prompt": "x", "stop": 5}'
  expect_error 400 "stream_options without stream" POST /v1/completions -d '{"prompt": "x", "stream_options": {"include_usage": true}}'
  expect_error 400 "messages missing" POST /v1/chat/completions -d '{"model": "tiny"}'
  expect_error 400 "unknown role" POST /v1/chat/completions -d '{"messages": [{"role": "wizard", "content": "x"}]}'
  expect_error 400 "top_logprobs without logprobs" POST /v1/chat/completions -d '{"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}'
  head -c 200000 /dev/zero | tr '\0' 'a' | sed 's/^/{"prompt": "/; s/$/"}/' >"$TMP/big.json"
  expect_error 413 "body over the cap" POST /v1/completions --data-binary "@$TMP/big.json"
  # Malformed HTTP on a raw socket must not hurt the server.
  local hp=${URL#http://}
  # The API socket's accept queue: raised from cpp-httplib's 5 to 2048 (the kernel caps it at
  # net.core.somaxconn); `ss` shows a listening socket's backlog as its Send-Q.
  local backlog want_backlog
  backlog=$(ss -Hltn "sport = :${hp#*:}" | awk '{print $3}' | sort -n | head -1)
  want_backlog=$(($(cat /proc/sys/net/core/somaxconn) < 2048 ? $(cat /proc/sys/net/core/somaxconn) : 2048))
  [[ "$backlog" == "$want_backlog" ]] || fail "API socket backlog $backlog, expected $want_backlog"
  { printf 'GARBAGE \x01\x02 HTTP/9\r\n\r\n' >"/dev/tcp/${hp%:*}/${hp#*:}"; } 2>/dev/null || true
  { printf 'POST /v1/completions HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n{' >"/dev/tcp/${hp%:*}/${hp#*:}"; } 2>/dev/null || true
  # tokenize / detokenize round trip, against `cpinfer tokenize`.
  got=$(status "$TMP/tok.json" POST /tokenize -d '{"prompt": "Hello, world! 你好"}')
  [[ "$got" == 200 ]] || fail "/tokenize: HTTP $got"
  local ids want
  ids=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).tokens.join(","))' "$TMP/tok.json")
  want=$("$CPINFER" tokenize --model "$MODEL" --text "Hello, world! 你好" 2>/dev/null | node -e 'console.log(JSON.parse(require("fs").readFileSync(0)).ids.join(","))')
  [[ "$ids" == "$want" ]] || fail "/tokenize ids $ids != cpinfer tokenize $want"
  got=$(status "$TMP/detok.json" POST /detokenize -d "{\"tokens\": [$ids]}")
  grep -q '"prompt":"Hello, world! 你好"' "$TMP/detok.json" || fail "/detokenize: $(cat "$TMP/detok.json")"
  # The chat prompt the server builds (messages + tools through the model's real chat
  # template) equals @huggingface/jinja's rendering, tokenized by `cpinfer tokenize`.
  cat >"$TMP/conv.json" <<'JSON'
{"date_string": "26 Jul 2024", "conversations": [{"name": "tools", "messages": [
  {"role": "system", "content": "You are a helpful assistant."},
  {"role": "user", "content": "What is the weather in Paris? 🌦"}],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]}]}
JSON
  node "$SRC/tests/tools/render_chat_reference.js" "$TMP/conv.json" "$MODEL" |
    node -e 'const r=JSON.parse(require("fs").readFileSync(0)).find(x=>x.add_generation_prompt); process.stdout.write(r.output)' >"$TMP/conv.txt"
  want=$("$CPINFER" tokenize --model "$MODEL" --text-file "$TMP/conv.txt" 2>/dev/null | node -e 'console.log(JSON.parse(require("fs").readFileSync(0)).ids.join(","))')
  node -e 'const c=JSON.parse(require("fs").readFileSync(process.argv[1])).conversations[0];
    console.log(JSON.stringify({messages: c.messages, tools: c.tools}))' "$TMP/conv.json" >"$TMP/conv_req.json"
  got=$(status "$TMP/tokc.json" POST /tokenize --data-binary "@$TMP/conv_req.json")
  [[ "$got" == 200 ]] || fail "/tokenize messages: HTTP $got $(cat "$TMP/tokc.json")"
  ids=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).tokens.join(","))' "$TMP/tokc.json")
  [[ "$ids" == "$want" ]] || fail "chat prompt with tools differs from the reference rendering"
  # A streamed request with curl: SSE events, ending with [DONE].
  curl -s -N "${auth[@]}" "$URL/v1/completions" \
    -d '{"prompt": [11, 22, 33], "max_tokens": 5, "temperature": 0, "ignore_eos": true, "stream": true}' >"$TMP/sse.txt"
  [[ "$(grep -c '^data: {' "$TMP/sse.txt")" == 5 ]] || fail "SSE: expected 5 chunks: $(cat "$TMP/sse.txt")"
  [[ "$(grep '^data: ' "$TMP/sse.txt" | tail -1)" == "data: [DONE]" ]] || fail "SSE does not end with [DONE]"
  # Clients that disconnect: a stream and a whole response, both long (8000 tokens: about 5 s
  # of decoding on one rank of a 2-core Zen 3); their requests must be cancelled and their
  # pages freed.
  curl -s -N --max-time 1 "${auth[@]}" "$URL/v1/completions" \
    -d '{"prompt": [5, 6, 7], "max_tokens": 8000, "ignore_eos": true, "stream": true}' >/dev/null || true
  curl -s --max-time 1 "${auth[@]}" "$URL/v1/completions" \
    -d '{"prompt": [5, 6, 8], "max_tokens": 8000, "ignore_eos": true}' >/dev/null || true
  wait_all_pages_back "$ranks"
  [[ "$(metric 'vllm:request_success_total{model_name="tiny",finished_reason="abort"}')" -ge 2 ]] ||
    fail "the disconnected requests were not aborted"
  curl -s "$URL/metrics" >"$TMP/metrics.txt"
  for m in vllm:time_to_first_token_seconds_bucket vllm:inter_token_latency_seconds_bucket \
           vllm:e2e_request_latency_seconds_count vllm:num_requests_running \
           vllm:num_requests_waiting vllm:kv_cache_usage_perc process_resident_memory_bytes \
           cpinfer:heap_in_use_bytes cpinfer:heap_free_bytes; do
    grep -q "^$m" "$TMP/metrics.txt" || fail "/metrics lacks $m"
  done
}

# The same 100-token prompt twice: with prefix caching on, the second request finds its first
# 96 tokens (6 whole blocks of 16; the last token is always computed) in the cache, reports
# them in usage.prompt_tokens_details.cached_tokens and answers the same; off, it finds none.
prefix_cache_checks() {
  local caching=$1 ids i
  ids=$(node -e 'let a=[]; for (let i=0;i<100;i++) a.push(1000+7*i); console.log(a.join(","))')
  for i in 1 2; do
    got=$(status "$TMP/pc$i.json" POST /v1/completions \
      -d "{\"prompt\": [$ids], \"max_tokens\": 4, \"temperature\": 0, \"ignore_eos\": true}")
    [[ "$got" == 200 ]] || fail "prefix cache request $i: HTTP $got $(cat "$TMP/pc$i.json")"
  done
  local c1 c2 t1 t2
  read -r c1 t1 < <(node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1]));
    console.log(r.usage.prompt_tokens_details.cached_tokens, JSON.stringify(r.choices[0].text))' "$TMP/pc1.json")
  read -r c2 t2 < <(node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1]));
    console.log(r.usage.prompt_tokens_details.cached_tokens, JSON.stringify(r.choices[0].text))' "$TMP/pc2.json")
  [[ "$t1" == "$t2" ]] || fail "a cached prompt answered $t2, uncached $t1"
  [[ "$c1" == 0 ]] || fail "first request reports $c1 cached tokens"
  local hits queries
  hits=$(metric 'vllm:prefix_cache_hits_total{model_name="tiny"}')
  queries=$(metric 'vllm:prefix_cache_queries_total{model_name="tiny"}')
  if ((caching)); then
    [[ "$c2" == 96 ]] || fail "repeated prompt reports $c2 cached tokens, expected 96"
    ((hits >= 96 && queries >= 200)) || fail "prefix cache counters: hits $hits, queries $queries"
  else
    [[ "$c2" == 0 && "$hits" == 0 && "$queries" == 0 ]] ||
      fail "--no-enable-prefix-caching: cached $c2, hits $hits, queries $queries"
  fi
}

run_layout() {  # run_layout NAME RANKS layout-args...
  local name=$1 ranks=$2; shift 2
  start_server "$name" "$@"
  # No process of the job listens beyond loopback (the server's --host is 127.0.0.1 here): not
  # the API, not the rank watchdog, and no rank's MPI transport (a job on one host uses
  # shared memory only). mpirun's own sockets are OpenMPI's runtime, not checked here.
  local open pids=" $SERVER_PID " frontier=$SERVER_PID
  while [[ -n "$frontier" ]]; do  # the server's process tree: launcher, mpirun, ranks
    frontier=$(for p in $frontier; do ps -o pid= --ppid "$p" || true; done | xargs)
    pids+="$frontier "
  done
  open=$(ss -Hltnp | grep -F '"cpinfer"' | awk -v pids="$pids" '$4 !~ /^127\.0\.0\.1:/ {
    if (match($0, /pid=[0-9]+/) && index(pids, " " substr($0, RSTART + 4, RLENGTH - 4) " ")) print }')
  [[ -z "$open" ]] || fail "$name: a process of the job listens beyond loopback: $open"
  curl_checks "$ranks"
  prefix_cache_checks "${CACHING:-1}"
  node "$SRC/tests/server/openai_client_test.mjs" "$URL" "$KEY" tiny "$TMP/$name.answers.json" ||
    fail "openai client checks ($name)"
  wait_all_pages_back "$ranks"
  # Idle, the job uses next to no CPU: the workers wait for the next step asleep, not polling
  # (before, an idle tp 2 x pcp 2 job kept both cores busy: ~200 jiffies a second).
  local j0 j1 hz
  hz=$(getconf CLK_TCK)
  sleep 1
  j0=$(tree_jiffies "$SERVER_PID"); sleep 2; j1=$(tree_jiffies "$SERVER_PID")
  echo "$name: idle for 2 s: the job used $((j1 - j0)) jiffies of CPU ($hz a second)"
  (((j1 - j0) * 4 < 2 * hz)) || fail "$name: idle, the job used $((j1 - j0)) jiffies of CPU in 2 s"
  local held allowance
  held=$(metric 'cpinfer:steps_held_by_time_target_total{model_name="tiny"}')
  allowance=$(metric 'cpinfer:step_prompt_allowance_tokens{model_name="tiny"}')
  if ((${HELD_BY_TARGET:-0})); then
    ((held > 0 && allowance >= 16 && allowance <= 256)) ||
      fail "$name: --step-time-target-ms held $held steps back, allowance $allowance"
    # CPINFER_LOG=debug (set for this layout): one line per step, the held ones marked.
    grep -qE "step: [0-9.]+ ms, [0-9]+ decodes, [0-9]+ prompt tokens \(the furthest chunk ends at [0-9]+\), allowance [0-9]+ \(capped\)" "$LOG" ||
      fail "$name: CPINFER_LOG=debug printed no step line of a held step"
  else
    [[ "$held" == 0 && "$allowance" == 0 ]] || fail "$name: no target, yet held $held, allowance $allowance"
  fi
  [[ "$(curl -s -o /dev/null -w "%{http_code}" "$URL/health")" == 200 ]] || fail "unhealthy after the load ($name)"
  kill -TERM "$SERVER_PID"
  local rc=0
  wait "$SERVER_PID" || rc=$?
  echo "$name: server exited with $rc after SIGTERM"
  # A graceful stop, status 0, on one rank and under the self-launched mpirun alike (there
  # the launcher passes the signal to rank 0 alone, which ends the other ranks).
  [[ $rc == 0 ]] || fail "$name: exit status $rc after SIGTERM, expected 0"
  grep -q "server stopped" "$LOG" || fail "$name: no graceful shutdown in the log"
  if ((ranks > 1)); then
    grep -q "SIGTERM received: passed on to rank 0" "$LOG" || fail "$name: SIGTERM not passed to rank 0"
  fi
}

# One rank without prefix caching, tp 2 x pcp 2 with it: the greedy answers must agree.
TOOLS=(--enable-auto-tool-choice --tool-call-parser hermes)
CACHING=0 run_layout one-rank 1 --max-num-batched-tokens 256 --no-enable-prefix-caching "${TOOLS[@]}"
# The same 256-token budget as one rank: the 16 concurrent prompts (up to 200 tokens) are
# chunked across steps beside running decodes over the sharded cache.
# With a step-time target of 5 ms (below what a step with decodes takes here), so the
# prompts that arrive while others decode are held to the adaptive allowance: the answers
# must not change, and /metrics must show that the target held steps back (and the debug
# log each step).
CPINFER_LOG=debug EXPECT_PAGES=3000 HELD_BY_TARGET=1 run_layout tp2-pcp2 2 -tp 2 -pcp 2 --cp-kv-cache-interleave-size 4 --num-kv-blocks 3000 --max-num-batched-tokens 256 --step-time-target-ms 5 "${TOOLS[@]}"
cmp "$TMP/one-rank.answers.json" "$TMP/tp2-pcp2.answers.json" ||
  fail "greedy answers under tp 2 x pcp 2 differ from one rank: $(diff "$TMP/one-rank.answers.json" "$TMP/tp2-pcp2.answers.json" | head -5)"

# --generation-config: auto (the default, above) takes the model's generation_config.json
# for the sampling fields a request omits, vllm OpenAI's; the start-up log says which. The
# client test checks auto's effect; here vllm's: a request without the fields samples
# exactly as one with OpenAI's values, not as one with the file's.
grep -q "generation-config auto.*temperature 0.7, top_p 0.8, top_k 20, min_p 0, repetition_penalty 1.1" "$TMP/one-rank.log" ||
  fail "auto: no log line with the file's defaults"
start_server gen-vllm --generation-config vllm
# Keep-alive: an idle connection stays open 15 s (Keep-Alive: timeout=15), so a Node client
# whose event loop stalled for 6 s still sends its next request on its pooled connection
# successfully (with 5 s, httplib's default, it failed: UND_ERR_SOCKET).
node "$SRC/tests/server/keep_alive_reuse.mjs" "$URL" "$KEY" tiny 6000 >"$TMP/keep_alive.json" ||
  fail "a request on a connection idle for 6 s failed: $(cat "$TMP/keep_alive.json")"
grep -q '"keep_alive":"timeout=15, max=' "$TMP/keep_alive.json" ||
  fail "Keep-Alive header: $(cat "$TMP/keep_alive.json")"
grep -q "generation-config vllm.*temperature 1, top_p 1, top_k 0, min_p 0, repetition_penalty 1$" "$LOG" ||
  fail "vllm: no log line with OpenAI's defaults"
sampled() {  # sampled EXTRA_JSON_FIELDS: the text of a seeded completion
  status "$TMP/s.json" POST /v1/completions -d "{\"prompt\": [1000, 3019, 1638, 2757, 2676, 1059], \"max_tokens\": 24, \"ignore_eos\": true, \"seed\": 77$1}" >/dev/null
  node -e 'console.log(JSON.stringify(JSON.parse(require("fs").readFileSync(process.argv[1])).choices[0].text))' "$TMP/s.json"
}
omitted=$(sampled "")
[[ "$omitted" == "$(sampled ', "temperature": 1, "top_p": 1, "top_k": -1, "repetition_penalty": 1, "min_p": 0')" ]] ||
  fail "vllm: omitted fields are not OpenAI's defaults"
[[ "$omitted" != "$(sampled ', "temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.1')" ]] ||
  fail "vllm: omitted fields took the file's defaults"
# Without --enable-auto-tool-choice, tools default to tool_choice "auto", which is refused
# naming the flag, as vLLM does; tool_choice "none" renders them without parsing.
TOOL_REQ='{"messages": [{"role": "user", "content": "x"}], "max_tokens": 2, "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]'
expect_error 400 "tools without --enable-auto-tool-choice" POST /v1/chat/completions -d "$TOOL_REQ}"
grep -q -- "--enable-auto-tool-choice" "$TMP/err.json" || fail "the refusal does not name --enable-auto-tool-choice: $(cat "$TMP/err.json")"
[[ "$(status "$TMP/none.json" POST /v1/chat/completions -d "$TOOL_REQ, \"tool_choice\": \"none\"}")" == 200 ]] ||
  fail "tool_choice none: $(cat "$TMP/none.json")"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || true

# --chat-template FILE replaces the model's template (what /tokenize renders shows it); a
# missing or unparsable file stops the server at start-up with a message naming it.
printf '%s' '{% for m in messages %}<<{{ m.role }}|{{ m.content }}>>{% endfor %}{% if add_generation_prompt %}<<assistant|{% endif %}' >"$TMP/custom.jinja"
start_server custom-template --chat-template "$TMP/custom.jinja" --http-keep-alive-timeout 7
curl -s -D - -o /dev/null "$URL/health" | grep -qi '^Keep-Alive: timeout=7,' ||
  fail "--http-keep-alive-timeout 7: $(curl -s -D - -o /dev/null "$URL/health")"
got=$(status "$TMP/ct.json" POST /tokenize -d '{"messages": [{"role": "user", "content": "hello"}]}')
[[ "$got" == 200 ]] || fail "/tokenize with --chat-template: HTTP $got"
ids=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).tokens.join(","))' "$TMP/ct.json")
status "$TMP/ctd.json" POST /detokenize -d "{\"tokens\": [$ids]}" >/dev/null
grep -qF '"prompt":"<<user|hello>><<assistant|"' "$TMP/ctd.json" || fail "--chat-template not used: $(cat "$TMP/ctd.json")"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || true
printf '%s' '{% for m in messages %}{{ m.content }' >"$TMP/broken.jinja"
for bad in "$TMP/no-such.jinja" "$TMP/broken.jinja"; do
  rc=0
  timeout 60 "$CPINFER" serve --model "$MODEL" --port 0 --chat-template "$bad" >"$TMP/bad.log" 2>&1 || rc=$?
  ((rc != 0 && rc != 124)) || fail "--chat-template $bad: exit status $rc"
  grep -qF "$bad" "$TMP/bad.log" || fail "--chat-template $bad: the error does not name the file: $(tail -3 "$TMP/bad.log")"
done
rc=0
"$CPINFER" serve --model "$MODEL" --port 0 --enable-auto-tool-choice >"$TMP/bad.log" 2>&1 || rc=$?
((rc != 0)) && grep -q -- "--tool-call-parser" "$TMP/bad.log" || fail "--enable-auto-tool-choice without a parser: $(tail -3 "$TMP/bad.log")"
rc=0
"$CPINFER" serve --model "$MODEL" --port 0 --step-time-target-ms 50 --no-enable-chunked-prefill >"$TMP/bad.log" 2>&1 || rc=$?
((rc != 0)) && grep -q -- "--step-time-target-ms.*chunked prefill" "$TMP/bad.log" ||
  fail "--step-time-target-ms without chunked prefill: $(tail -3 "$TMP/bad.log")"
echo "serve_test: all checks passed"
