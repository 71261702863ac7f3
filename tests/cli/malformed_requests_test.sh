#!/usr/bin/env bash
# Malformed requests against a running `cpinfer serve`: huge or wrong-typed
# fields, deeply nested JSON, invalid UTF-8, oversized stop lists and bodies, wrong
# methods and content types, path traversal in the model name and the URL, a wrong API
# key. Every case checks the HTTP status and that the OpenAI-style error message names the
# problem; afterwards the server still answers a normal request exactly as before and
# /health is 200. Also: the default host is 127.0.0.1 (not reachable on other addresses).
# The file side of the suite is tests/unit/malformed_files_test.cpp.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib/wait_for_server.sh"
CPINFER=${1:?usage: malformed_requests_test.sh path/to/cpinfer}
TMP=$(mktemp -d)
SERVER_PID=
cleanup() {
  [[ -n "$SERVER_PID" ]] && kill "$SERVER_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -f "$TMP/server.log" ]] && tail -20 "$TMP/server.log" >&2; exit 1; }

MODEL="$TMP/tiny"
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --seed 5 --out "$MODEL" 2>/dev/null
KEY=test-key-0123456789
# No --host and no --max-request-body-bytes: the defaults are under test.
"$CPINFER" serve --model "$MODEL" --port 0 --api-key "$KEY" --served-model-name tiny \
  --max-model-len 2048 --kv-cache-space 0.05 >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
wait_for_server "$SERVER_PID" "$TMP/server.log" tiny
PORT=${URL##*:}

# ---- security defaults: loopback only ----------------------------------------------------
[[ "$URL" == "http://127.0.0.1:$PORT" ]] || fail "default listening address is $URL, expected 127.0.0.1"
for ip in $(hostname -I 2>/dev/null || true); do
  [[ "$ip" == *:* ]] && continue  # IPv4 addresses only
  got=$(curl -s -o /dev/null -w "%{http_code}" --max-time 2 "http://$ip:$PORT/health" || true)
  [[ "$got" == 000 ]] || fail "the server answers on $ip:$PORT (HTTP $got); it must bind 127.0.0.1 only by default"
done

auth=(-H "Authorization: Bearer $KEY" -H "Content-Type: application/json")
CASES=0
CODES=()  # the status of every case, to compare with the server's /metrics at the end
# check CODE "message substring" curl-args...: the status, an OpenAI error body (code equal
# to the status, a message) and the message naming the problem.
check() {
  local code=$1 want=$2; shift 2
  local got
  got=$(curl -s -o "$TMP/resp.json" -w "%{http_code}" --max-time 60 "$@" || echo "curl-failed")
  [[ "$got" == "$code" ]] || fail "case $((CASES + 1)) '$want': HTTP $got, expected $code: $(head -c 400 "$TMP/resp.json")"
  node -e 'const fs=require("fs"); const e=JSON.parse(fs.readFileSync(process.argv[1])).error;
    if (!e || e.code !== +process.argv[2] || typeof e.message !== "string") process.exit(1);
    if (!e.message.includes(process.argv[3])) { console.error("message: " + e.message); process.exit(2); }' \
    "$TMP/resp.json" "$code" "$want" || fail "case $((CASES + 1)): expected an error naming '$want', got $(head -c 400 "$TMP/resp.json")"
  kill -0 "$SERVER_PID" 2>/dev/null || fail "the server died on case $((CASES + 1)) '$want'"
  CASES=$((CASES + 1))
  CODES+=("$code")
}
post() { local path=$1; shift; check "$1" "$2" -X POST "${auth[@]}" "$URL$path" "${@:3}"; }
comp() { post /v1/completions "$@"; }
chat() { post /v1/chat/completions "$@"; }
# file NAME JS-EXPRESSION: writes the JSON (or raw string) the expression gives to $TMP/NAME.
file() { node -e 'const v = eval(process.argv[2]); require("fs").writeFileSync(process.argv[1], typeof v === "string" ? v : JSON.stringify(v))' "$TMP/$1" "$2"; }

# The reference answer, before any malformed request.
REF='{"prompt": "The capital of France is", "max_tokens": 12, "temperature": 0, "ignore_eos": true}'
curl -s "${auth[@]}" "$URL/v1/completions" -d "$REF" >"$TMP/ref_before.json"
node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1])); if (r.usage.completion_tokens !== 12) process.exit(1)' \
  "$TMP/ref_before.json" || fail "reference request: $(cat "$TMP/ref_before.json")"

# ---- n, max_tokens -------------------------------------------------------------------------
comp 400 "'n' must be in [1, 128], got 1000000" -d '{"prompt": "x", "n": 1000000}'
comp 400 "'n' must be in [1, 128], got 0" -d '{"prompt": "x", "n": 0}'
comp 400 "3 prompts x n = 100 asks for 300 choices" -d '{"prompt": ["a", "b", "c"], "n": 100}'
comp 400 "'best_of' 3 is not supported" -d '{"prompt": "x", "n": 2, "best_of": 3}'
comp 400 "'max_tokens' is out of range" -d '{"prompt": "x", "max_tokens": 1e300}'
comp 400 "maximum context length is 2048 tokens" -d '{"prompt": "x", "max_tokens": 9223372036854775807}'
comp 400 "'max_tokens' is too large" -d '{"prompt": "x", "max_tokens": 18446744073709551615}'
comp 400 "maximum context length is 2048 tokens" -d '{"prompt": "x", "max_tokens": 5000}'
comp 400 "'max_tokens' must be at least 1, got -5" -d '{"prompt": "x", "max_tokens": -5}'
comp 400 "'max_tokens' must be at least 1, got 0" -d '{"prompt": "x", "max_tokens": 0}'
comp 400 "'max_tokens' must be an integer, got 2.5" -d '{"prompt": "x", "max_tokens": 2.5}'
comp 400 "'max_tokens' must be an integer, got \"5\"" -d '{"prompt": "x", "max_tokens": "5"}'
chat 400 "'max_completion_tokens' must be at least 1" -d '{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -1}'

# ---- JSON shape: nesting, numbers out of range ------------------------------------------------
file deep_arrays '`{"prompt": ${"[".repeat(100000)}${"]".repeat(100000)}}`'
comp 400 "nested deeper than 128 levels" --data-binary "@$TMP/deep_arrays"
file deep_objects '`{"messages": [{"role": "user", "content": "x"}], "tools": ${"{\"a\":".repeat(50000)}1${"}".repeat(50000)}}`'
chat 400 "nested deeper than 128 levels" --data-binary "@$TMP/deep_objects"
post /tokenize 400 "nested deeper than 128 levels" --data-binary "@$TMP/deep_arrays"
# Tool-call arguments are a JSON string: the body's cap cannot see into it (this crashed
# the server until the arguments got their own cap).
file deep_args '`{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": ${JSON.stringify("[".repeat(100000) + "]".repeat(100000))}}}]}]}`'
chat 400 "messages[1].tool_calls[0].function.arguments is nested deeper than 128 levels" --data-binary "@$TMP/deep_args"
post /tokenize 400 "function.arguments is nested deeper than 128 levels" --data-binary "@$TMP/deep_args"
comp 400 "the request body is not valid JSON" -d '{"prompt": "x", "temperature": 1e400}'
comp 400 "the request body is not valid JSON" -d '{"prompt": "x", '
comp 400 "the request body must be a JSON object" -d '"just a string"'

# ---- invalid UTF-8 ------------------------------------------------------------------------------
printf '{"prompt": "ab\xff\xfecd"}' >"$TMP/u8_prompt"
comp 400 "ill-formed UTF-8" --data-binary "@$TMP/u8_prompt"
printf '{"messages": [{"role": "user", "content": "caf\xc3"}]}' >"$TMP/u8_chat"
chat 400 "ill-formed UTF-8" --data-binary "@$TMP/u8_chat"
printf '{"prompt": "x", "stop": ["ok", "\xed\xa0\x80"]}' >"$TMP/u8_stop"
comp 400 "ill-formed UTF-8" --data-binary "@$TMP/u8_stop"
printf '{"prompt": "x", "model": "tiny\xc0\xaf"}' >"$TMP/u8_model"
comp 400 "ill-formed UTF-8" --data-binary "@$TMP/u8_model"
comp 400 "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF" -d '{"prompt": "\ud800 alone"}'

# ---- stop lists ----------------------------------------------------------------------------------
file stop5000 '({prompt: "x", max_tokens: 4, stop: Array.from({length: 5000}, (_, i) => "stop" + i)})'
comp 400 "'stop' has 5000 strings; at most 256 are allowed" --data-binary "@$TMP/stop5000"
file stop_long '({prompt: "x", max_tokens: 4, stop: ["a".repeat(257)]})'
comp 400 "a 'stop' string has 257 bytes; at most 256 are allowed" --data-binary "@$TMP/stop_long"
comp 400 "'stop' must be a string or an array of strings" -d '{"prompt": "x", "stop": ["a", 5]}'
# At the cap (256 strings of 256 bytes that never match, so each one is searched for and
# checked as a possible held-back prefix after every token) a request is answered quickly.
file stop256 '({prompt: "The capital of France is", max_tokens: 32, temperature: 0, ignore_eos: true,
  stop: Array.from({length: 256}, (_, i) => "\u0001".repeat(250) + String(i).padStart(6, "0"))})'
t0=$(date +%s.%N)
got=$(curl -s -o "$TMP/stop256.json" -w "%{http_code}" "${auth[@]}" "$URL/v1/completions" --data-binary "@$TMP/stop256")
t1=$(date +%s.%N)
[[ "$got" == 200 ]] || fail "256 stop strings: HTTP $got $(head -c 300 "$TMP/stop256.json")"
node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1])); if (r.usage.completion_tokens !== 32) process.exit(1)' \
  "$TMP/stop256.json" || fail "256 stop strings: $(head -c 300 "$TMP/stop256.json")"
STOP256_S=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
echo "256 stop strings of 256 bytes, 32 tokens: ${STOP256_S} s"
awk -v t="$STOP256_S" 'BEGIN { exit !(t < 20) }' || fail "256 stop strings took ${STOP256_S} s"

# ---- logprobs, sampling, seed -------------------------------------------------------------------
comp 400 "'logprobs' must be in [0, 20], got -1" -d '{"prompt": "x", "logprobs": -1}'
comp 400 "'logprobs' must be in [0, 20], got 21" -d '{"prompt": "x", "logprobs": 21}'
comp 400 "'logprobs' must be an integer, got \"x\"" -d '{"prompt": "x", "logprobs": "x"}'
chat 400 "'top_logprobs' must be in [0, 20], got 21" -d '{"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21}'
chat 400 "'logprobs' must be a boolean" -d '{"messages": [{"role": "user", "content": "x"}], "logprobs": 3}'
comp 400 "'temperature' must be a number, got \"NaN\"" -d '{"prompt": "x", "temperature": "NaN"}'
comp 400 "'temperature' must be a number, got \"-Infinity\"" -d '{"prompt": "x", "temperature": "-Infinity"}'
comp 400 "temperature must be >= 0, got -1" -d '{"prompt": "x", "temperature": -1}'
comp 400 "top_p must be in (0, 1]" -d '{"prompt": "x", "top_p": 0}'
comp 400 "'seed' is out of range" -d '{"prompt": "x", "seed": 1e30}'
comp 400 "'seed' is too large" -d '{"prompt": "x", "seed": 18446744073709551615}'
comp 400 "'seed' must be an integer" -d '{"prompt": "x", "seed": "42"}'

# ---- prompts and messages ----------------------------------------------------------------------
file ids100k '({prompt: Array.from({length: 100000}, (_, i) => i % 1000)})'
comp 400 "maximum context length is 2048 tokens. However, your prompt has 100000 tokens" --data-binary "@$TMP/ids100k"
file prompts1000 '({prompt: Array.from({length: 1000}, () => "hi"), max_tokens: 1})'
comp 400 "'prompt' holds 1000 prompts; at most 256 are allowed" --data-binary "@$TMP/prompts1000"
comp 400 "the prompt is empty" -d '{"prompt": ""}'
comp 400 "'prompt' must be a non-empty string" -d '{"prompt": []}'
comp 400 "'prompt' is required" -d '{"max_tokens": 3}'
comp 400 "token id -1 in 'prompt' is outside the vocabulary" -d '{"prompt": [1, -1]}'
comp 400 "token id 99999999 in 'prompt' is outside the vocabulary" -d '{"prompt": [99999999]}'
comp 400 "token id 99999999 in 'stop_token_ids' is outside the vocabulary" -d '{"prompt": "x", "stop_token_ids": [99999999]}'
chat 400 "'messages' must be a non-empty array" -d '{"messages": []}'
chat 400 "messages[0].role 'wizard' is not one of" -d '{"messages": [{"role": "wizard", "content": "x"}]}'
chat 400 "messages[0].content must be a string, null or an array" -d '{"messages": [{"role": "user", "content": 5}]}'

# ---- HTTP level: size, content type, method, routes ----------------------------------------------
head -c $((17 << 20)) /dev/zero | tr '\0' 'a' | sed 's/^/{"prompt": "/; s/$/"}/' >"$TMP/body17m"
comp 413 "larger than the limit of 16777216 bytes (--max-request-body-bytes)" --data-binary "@$TMP/body17m"
check 415 "Content-Type 'text/plain' is not supported" -X POST -H "Authorization: Bearer $KEY" \
  -H "Content-Type: text/plain" "$URL/v1/completions" -d '{"prompt": "x"}'
check 415 "Content-Type 'application/x-www-form-urlencoded' is not supported" -X POST \
  -H "Authorization: Bearer $KEY" "$URL/v1/completions" -d '{"prompt": "x"}'
check 405 "method GET is not allowed on /v1/completions; use POST" -H "Authorization: Bearer $KEY" "$URL/v1/completions"
check 405 "method GET is not allowed on /v1/chat/completions; use POST" "$URL/v1/chat/completions"
check 405 "method POST is not allowed on /v1/models; use GET" -X POST "${auth[@]}" "$URL/v1/models" -d '{}'
check 401 "Incorrect API key provided" -X POST -H "Authorization: Bearer ${KEY%?}X" -H "Content-Type: application/json" "$URL/v1/completions" -d '{"prompt": "x"}'
check 401 "Incorrect API key provided" -X POST -H "Authorization: Bearer ${KEY}x" -H "Content-Type: application/json" "$URL/v1/completions" -d '{"prompt": "x"}'
check 401 "Incorrect API key provided" -X POST -H "Content-Type: application/json" "$URL/v1/completions" -d '{"prompt": "x"}'
post /tokenize 400 "'add_generation_prompt' must be a boolean" -d '{"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": "yes"}'

# ---- paths from requests never reach the filesystem -------------------------------------------
comp 404 'The model `../../etc/passwd` does not exist.' -d '{"prompt": "x", "model": "../../etc/passwd"}'
chat 404 'The model `/etc/passwd` does not exist.' -d '{"messages": [{"role": "user", "content": "x"}], "model": "/etc/passwd"}'
post /tokenize 404 "does not exist" -d '{"prompt": "x", "model": "../../../../etc/shadow"}'
check 404 "no route GET /v1/models/../../etc/passwd" --path-as-is "${auth[@]}" "$URL/v1/models/../../etc/passwd"
check 404 "no route GET /../../etc/passwd" --path-as-is "${auth[@]}" "$URL/../../etc/passwd"
check 404 "no route GET /v1/models/../../etc/passwd" --path-as-is "${auth[@]}" "$URL/v1/models/..%2f..%2fetc%2fpasswd"
! grep -q "root:" "$TMP/resp.json" || fail "a response carries /etc/passwd"

# ---- sampling fields out of range: 400 naming the field (and the id for logit_bias) ---------
comp 400 "'repetition_penalty' must be > 0" -d '{"prompt": "x", "repetition_penalty": 0}'
comp 400 "'repetition_penalty' must be a number" -d '{"prompt": "x", "repetition_penalty": "1.1"}'
comp 400 "'min_p' must be in [0, 1], got 1.5" -d '{"prompt": "x", "min_p": 1.5}'
chat 400 "'min_p' must be in [0, 1], got -0.1" -d '{"messages": [{"role": "user", "content": "x"}], "min_p": -0.1}'
comp 400 "'presence_penalty' must be in [-2, 2], got 2.5" -d '{"prompt": "x", "presence_penalty": 2.5}'
chat 400 "'frequency_penalty' must be in [-2, 2], got -3" -d '{"messages": [{"role": "user", "content": "x"}], "frequency_penalty": -3}'
comp 400 "token id 151936 in 'logit_bias' is outside the vocabulary [0, 151936)" -d '{"prompt": "x", "logit_bias": {"151936": 1}}'
comp 400 "'logit_bias' key '-1' is not a token id" -d '{"prompt": "x", "logit_bias": {"-1": 1}}'
comp 400 "'logit_bias' key 'the' is not a token id" -d '{"prompt": "x", "logit_bias": {"the": 1}}'
chat 400 "'logit_bias' of token id 5 must be in [-100, 100], got 101" -d '{"messages": [{"role": "user", "content": "x"}], "logit_bias": {"5": 101}}'
comp 400 "'logit_bias' must be a number" -d '{"prompt": "x", "logit_bias": {"5": "up"}}'
comp 400 "'logit_bias' must be an object" -d '{"prompt": "x", "logit_bias": [5]}'

# ---- fields the server does not honour: refused, never ignored ------------------------------
comp 400 "'frobnicate' is not supported by this server" -d '{"prompt": "x", "frobnicate": 1}'
comp 400 "'response_format' is not supported by this server" -d '{"prompt": "x", "response_format": {"type": "text"}}'
comp 400 "'user' must be a string" -d '{"prompt": "x", "user": 5}'
chat 400 "'echo' is not supported by this server" -d '{"messages": [{"role": "user", "content": "x"}], "echo": true}'
chat 400 "response_format {\"type\":\"json_object\"} is not supported" -d '{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}}'
chat 400 "\"type\":\"json_schema\"} is not supported: output is not constrained" -d '{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}}}'
comp 400 "'stream_options.continuous_usage_stats' is not supported by this server" -d '{"prompt": "x", "stream": true, "stream_options": {"include_usage": true, "continuous_usage_stats": true}}'
chat 400 "When using \`tool_choice\`, \`tools\` must be set." -d '{"messages": [{"role": "user", "content": "x"}], "tool_choice": "auto"}'
TOOLS='"tools": [{"type": "function", "function": {"name": "f"}}]'
chat 400 "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set" -d "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], $TOOLS}"
chat 400 "tool_choice \"required\" is not supported" -d "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], $TOOLS, \"tool_choice\": \"required\"}"
chat 400 'tool_choice {"function":{"name":"f"},"type":"function"} (a named function) is not supported' -d '{"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "function", "function": {"name": "f"}}}'
chat 400 "tools[0] must be" -d '{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}], "tool_choice": "none"}'
chat 400 "'functions' is not supported by this server" -d '{"messages": [{"role": "user", "content": "x"}], "functions": []}'
# The neutral values of those fields, and the sampling fields at their "off" values, are accepted.
for body in '{"prompt": "x", "max_tokens": 2, "repetition_penalty": 1, "min_p": 0, "user": "u"}' \
            '{"prompt": "x", "max_tokens": 2, "presence_penalty": 0, "frequency_penalty": 0, "logit_bias": {}}'; do
  got=$(curl -s -o "$TMP/ok.json" -w "%{http_code}" "${auth[@]}" "$URL/v1/completions" -d "$body")
  [[ "$got" == 200 ]] || fail "neutral fields refused: HTTP $got $(cat "$TMP/ok.json")"
done
got=$(curl -s -o "$TMP/ok.json" -w "%{http_code}" "${auth[@]}" "$URL/v1/chat/completions" \
  -d '{"messages": [{"role": "user", "content": "x"}], "max_tokens": 2, "response_format": {"type": "text"}, "tool_choice": "none", "parallel_tool_calls": false}')
[[ "$got" == 200 ]] || fail "neutral chat fields refused: HTTP $got $(cat "$TMP/ok.json")"

# ---- still serving, and serving the same answer ---------------------------------------------------
curl -s "${auth[@]}" "$URL/v1/completions" -d "$REF" >"$TMP/ref_after.json"
node -e 'const fs=require("fs"); const a=JSON.parse(fs.readFileSync(process.argv[1])), b=JSON.parse(fs.readFileSync(process.argv[2]));
  if (a.choices[0].text !== b.choices[0].text || b.usage.completion_tokens !== 12) process.exit(1)' \
  "$TMP/ref_before.json" "$TMP/ref_after.json" ||
  fail "the answer after the malformed requests differs: $(cat "$TMP/ref_before.json") vs $(cat "$TMP/ref_after.json")"
[[ "$(curl -s -o /dev/null -w "%{http_code}" "$URL/health")" == 200 ]] || fail "/health is not 200 after the malformed requests"
kill -0 "$SERVER_PID" 2>/dev/null || fail "the server is gone"
# The server's own count of error responses (/metrics) matches the cases, status by status.
curl -s "$URL/metrics" >"$TMP/metrics.txt"
for code in $(printf '%s\n' "${CODES[@]}" | sort -u); do
  want=$(printf '%s\n' "${CODES[@]}" | grep -cx "$code")
  got=$(awk -v s="status=\"$code\"" '/^cpinfer:http_error_responses_total\{/ && index($0, s) { print $2 }' "$TMP/metrics.txt")
  [[ "$got" == "$want" ]] || fail "/metrics counts ${got:-no} responses with status $code, the cases sent $want"
done
total=$(awk '/^cpinfer:http_error_responses_total\{/ { s += $2 } END { print s + 0 }' "$TMP/metrics.txt")
[[ "$total" == "$CASES" ]] || fail "/metrics counts $total error responses, the cases sent $CASES"
echo "malformed_requests_test: $CASES malformed requests answered with clear errors; the server still serves"
