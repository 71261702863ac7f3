#!/usr/bin/env bash
# Chunked prefill under context parallelism (docs/context-parallel.md §8): prompts prefilled
# in chunks of N tokens (`generate --prefill-chunk N`) over a KV cache sharded across ranks
# answer as one rank does without chunking: identical greedy tokens for 64 steps and logits
# within 1e-3 (f32 cache). Layouts (tp, pcp, dcp, interleave) and sizes:
#   layouts 1,2,1,8  2,2,1,1  4,2,2,8  4,1,2,16  1,3,1,4  2,4,1,16
#   chunks  1 7 64 256 1000;  prompts 1, 2P+1, 777, 3000 tokens.
# The suite runs 18 of those runs, each a prompt that is really cut into chunks: for every
# layout a prompt of 2P+1 tokens in 1-token chunks, 777 tokens in chunks of 7 or 64, and 3000
# tokens in chunks of 256 or 1000 (alternating over the layouts). Prompts of one token, and
# every layout without chunking, are cp_equivalence_test's. CP_CHUNK_FULL=1 runs the whole
# product above (120 runs). A layout's prompts run in one launch (--prompt-ids-file, each
# with its own chunk size: --prefill-chunks), as do the single-rank baselines of a KV dtype
# (tests/cli/lib/cp_runs.sh).
# A bf16 KV cache is checked too, against one rank with a bf16 cache: greedy tokens identical
# and logits within the bf16 bound B = max |logits(one rank, bf16 cache) - logits(one rank,
# f32 cache)| for the same prompt, over the steps before their greedy tokens part (measured
# here: the error the bf16 cache itself makes).
# A layout may not move the logits further from one rank's bf16 run than bf16 storage moves
# them from f32.
# bf16 dot products (--bf16-math dot: activations rounded to bf16 before the linear layers
# and Q, P before the decode attention over a bf16 cache) are checked the same way, against
# one rank with dot products: logits within D = max |logits(one rank, dot) - logits(one
# rank, exact)| (the rounding's own error), tokens identical or parting only on a near tie
# (the two tokens' logits within 2 D where they part; compare_runs.js near-tie). Every other run uses
# --bf16-math exact (tests/cli/lib/cp_runs.sh), where 1e-3 holds: with rounded activations
# a last-bit difference upstream can flip a rounding (2^-8 of that value) and tp 2 alone
# then differs by ~2e-2. A CPU without AVX512_BF16 runs exact for dot: the check is skipped.
# int8 weights (--quantization int8, Q8_0 blocks): with --int8-math exact (f32 activations)
# against one rank's int8 run within 1e-3, as f32; with --int8-math dot (activations
# quantized to int8 too: VNNI kernels where the CPU has AVX512_VNNI, the f32 kernels on the
# quantized values elsewhere) within D8 = max |logits(one rank, int8 dot) - logits(one rank,
# int8 exact)| and near ties, as bf16 dot products. Chunks of 64 and 256 rows and the
# one-row decode steps take both Q8_0 routes (the GEMV and the GEMM; no skinny tiles for Q8_0).
set -euo pipefail
CPINFER=${1:?usage: cp_chunked_equivalence_test.sh path/to/cpinfer}
source "$(dirname "$0")/lib/cp_runs.sh"
LAYOUTS=(1,2,1,8 2,2,1,1 4,2,2,8 4,1,2,16 1,3,1,4 2,4,1,16)
CHUNKS=(1 7 64 256 1000)

rounding_bound() {  # rounding_bound MODE N [REF]: max |logits(MODE) - logits(REF)| of one
  # rank, REF f32 unless given (MODE bf16: a bf16 cache; dot: bf16 dot products; int8dot
  # against int8: int8 activations) over the rows computed from identical
  # inputs (up to and including the first step whose greedy token differs: a later row
  # follows a different text and is no measure of the rounding's error)
  node -e 'const fs=require("fs"); const r=f=>{const b=fs.readFileSync(f); return new Float32Array(b.buffer,b.byteOffset,b.length/4)};
    const last=f=>JSON.parse(fs.readFileSync(f,"utf8").trim().split("\n").pop());
    const [bf,f32]=process.argv.slice(1); const a=r(bf+".bin"), b=r(f32+".bin");
    const ta=last(bf+".json").token_ids, tb=last(f32+".json").token_ids;
    let k=0; while (k<ta.length-1 && ta[k]===tb[k]) k++;
    const V=a.length/ta.length; let m=0;
    for (let i=0;i<(k+1)*V;i++){const d=Math.abs(a[i]-b[i]); if(!(d<=m) && m===m) m=d;} console.log(m)' \
    "$TMP/base-$1-$2" "$TMP/base-${3:-f32}-$2"
}
mode_args() {  # the generate flags of a mode: f32 / bf16 KV cache, or bf16 dot products
  case $1 in
    f32) echo --kv-cache-dtype f32 ;;
    bf16) echo --kv-cache-dtype bf16 ;;
    dot) echo --kv-cache-dtype f32 --bf16-math dot ;;
    int8) echo --kv-cache-dtype f32 --quantization int8 --int8-math exact ;;
    int8dot) echo --kv-cache-dtype f32 --quantization int8 --int8-math dot ;;
  esac
}
failures=0 runs=0
# check KV_DTYPE tp pcp dcp il "LEN:CHUNK ...": one launch of the layout over those prompts,
# each prefilled in chunks of CHUNK tokens; each compared with one rank's unchunked run
# (base-KV_DTYPE-LEN, made below).
check() {
  local mode=$1 tp=$2 pcp=$3 dcp=$4 il=$5 lens="" chunks="" pair n chunk tol
  for pair in $6; do lens+=" ${pair%%:*}"; chunks+=",${pair##*:}"; done
  local out="$TMP/run-$tp-$pcp-$dcp-$il-$mode-${chunks:1}"
  cp_runs "$out" "$lens" $(mode_args "$mode") -tp "$tp" -pcp "$pcp" -dcp "$dcp" \
    --cp-kv-cache-interleave-size "$il" --prefill-chunks "${chunks:1}"
  for pair in $6; do
    n=${pair%%:*} chunk=${pair##*:} tol=1e-3
    if [[ $mode == int8dot ]]; then
      tol=$(rounding_bound int8dot "$n" int8)
      echo "int8dot bound for prompt $n: one rank's int8 dot and int8 exact logits differ by up to $tol"
    elif [[ $mode != f32 && $mode != int8 ]]; then
      tol=$(rounding_bound "$mode" "$n")
      echo "$mode bound for prompt $n: one rank's $mode and f32 logits differ by up to $tol"
    fi
    node "$SRC/tests/tools/compare_runs.js" "$TMP/base-$mode-$n.json" "$TMP/base-$mode-$n.bin" \
      "$out-$n.json" "$out-$n.bin" "$tol" \
      "tp $tp pcp $pcp dcp $dcp interleave $il, chunk $chunk, prompt $n, $mode" \
      $([[ $mode == dot || $mode == int8dot ]] && echo near-tie) ||
      failures=$((failures + 1))
    runs=$((runs + 1))
  done
}
# One rank without chunking (the whole prompt in one step), one launch per KV dtype.
base_lens="777 3000"
[[ "${CP_CHUNK_FULL:-0}" == 1 ]] && base_lens+=" 1"
for layout in "${LAYOUTS[@]}"; do
  IFS=, read -r _ pcp _ _ <<<"$layout"; base_lens+=" $((2 * pcp + 1))"
done
cp_runs "$TMP/base-f32" "$(tr ' ' '\n' <<<"$base_lens" | sort -n | uniq | xargs)" \
  --kv-cache-dtype f32 --prefill-chunk 100000
cp_runs "$TMP/base-bf16" "777 3000" --kv-cache-dtype bf16 --prefill-chunk 100000
cp_runs "$TMP/base-int8" "777 3000" $(mode_args int8) --prefill-chunk 100000
cp_runs "$TMP/base-int8dot" 777 $(mode_args int8dot) --prefill-chunk 100000  # check int8dot's prompt
dot=0
if grep -qw avx512_bf16 /proc/cpuinfo; then
  dot=1
  cp_runs "$TMP/base-dot" "777 3000" $(mode_args dot) --prefill-chunk 100000
else
  echo "skipped the --bf16-math dot checks: this CPU lacks AVX512_BF16 (dot runs as exact)"
fi

for li in "${!LAYOUTS[@]}"; do
  IFS=, read -r tp pcp dcp il <<<"${LAYOUTS[$li]}"
  if [[ "${CP_CHUNK_FULL:-0}" == 1 ]]; then
    for chunk in "${CHUNKS[@]}"; do
      check f32 "$tp" "$pcp" "$dcp" "$il" "1:$chunk $((2 * pcp + 1)):$chunk 777:$chunk 3000:$chunk"
    done
  else
    check f32 "$tp" "$pcp" "$dcp" "$il" \
      "$((2 * pcp + 1)):1 777:$((li % 2 ? 64 : 7)) 3000:$((li % 2 ? 1000 : 256))"
  fi
done
# bf16 KV cache: two layouts, chunks that cut the prompt several times, two prompts.
check bf16 2 2 1 1 "777:64"
check bf16 4 2 2 8 "3000:256"
# bf16 dot products: the same two layouts and prompts.
if [[ $dot == 1 ]]; then
  check dot 2 2 1 1 "777:64"
  check dot 4 2 2 8 "3000:256"
fi
# int8 weights: exact math on one layout, int8 dot products on the other.
check int8 4 2 2 8 "3000:256"
check int8dot 2 2 1 1 "777:64"
[[ $failures -eq 0 ]] || { echo "FAIL: $failures of $runs runs differ from one rank"; exit 1; }
echo "cp_chunked_equivalence_test: $runs runs match the single-rank run"
