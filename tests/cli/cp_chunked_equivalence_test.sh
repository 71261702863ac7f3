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
# product above (120 runs).
# A bf16 KV cache is checked too, against one rank with a bf16 cache: greedy tokens identical
# and logits within the bf16 bound B = max |logits(one rank, bf16 cache) - logits(one rank,
# f32 cache)| for the same prompt, over the steps before their greedy tokens part (measured
# here: the error the bf16 cache itself makes).
# A layout may not move the logits further from one rank's bf16 run than bf16 storage moves
# them from f32. (bf16 runs differ by more than 1e-3 even without CP: the decode attention's
# bf16 dot products round Q and P per KV shard, and tp 2 alone differs by ~2e-2.)
set -euo pipefail
CPINFER=${1:?usage: cp_chunked_equivalence_test.sh path/to/cpinfer}
source "$(dirname "$0")/lib/cp_runs.sh"
LAYOUTS=(1,2,1,8 2,2,1,1 4,2,2,8 4,1,2,16 1,3,1,4 2,4,1,16)
CHUNKS=(1 7 64 256 1000)

bf16_bound() {  # bf16_bound N: max |logits(bf16) - logits(f32)| of one rank over the rows
  # computed from identical inputs (up to and including the first step whose greedy token
  # differs: a later row follows a different text and is no measure of the cache's error)
  node -e 'const fs=require("fs"); const r=f=>{const b=fs.readFileSync(f); return new Float32Array(b.buffer,b.byteOffset,b.length/4)};
    const last=f=>JSON.parse(fs.readFileSync(f,"utf8").trim().split("\n").pop());
    const [p]=process.argv.slice(1); const a=r(p+"-bf16.bin"), b=r(p+"-f32.bin");
    const ta=last(p+"-bf16.json").token_ids, tb=last(p+"-f32.json").token_ids;
    let k=0; while (k<ta.length-1 && ta[k]===tb[k]) k++;
    const V=a.length/ta.length; let m=0;
    for (let i=0;i<(k+1)*V;i++){const d=Math.abs(a[i]-b[i]); if(!(d<=m)) m=d;} console.log(m)' "$TMP/base-$1"
}
failures=0 runs=0
check() {  # check LEN KV_DTYPE tp pcp dcp il chunk
  local n=$1 kv=$2 tp=$3 pcp=$4 dcp=$5 il=$6 chunk=$7 tol=1e-3
  local base="$TMP/base-$n-$kv"
  # One rank without chunking: the whole prompt in one step.
  [[ -f "$base.json" ]] || cp_run "$base" "$n" --kv-cache-dtype "$kv" --prefill-chunk 100000
  if [[ $kv == bf16 ]]; then
    [[ -f "$TMP/base-$n-f32.json" ]] || cp_run "$TMP/base-$n-f32" "$n" --kv-cache-dtype f32 --prefill-chunk 100000
    tol=$(bf16_bound "$n")
    echo "bf16 bound for prompt $n: one rank's bf16 and f32 logits differ by up to $tol"
  fi
  local out="$TMP/run-$tp-$pcp-$dcp-$il-$chunk-$n-$kv"
  cp_run "$out" "$n" --kv-cache-dtype "$kv" -tp "$tp" -pcp "$pcp" -dcp "$dcp" \
    --cp-kv-cache-interleave-size "$il" --prefill-chunk "$chunk"
  node "$SRC/tests/tools/compare_runs.js" "$base.json" "$base.bin" "$out.json" "$out.bin" "$tol" \
    "tp $tp pcp $pcp dcp $dcp interleave $il, chunk $chunk, prompt $n, kv $kv" ||
    failures=$((failures + 1))
  runs=$((runs + 1))
}
for li in "${!LAYOUTS[@]}"; do
  IFS=, read -r tp pcp dcp il <<<"${LAYOUTS[$li]}"
  if [[ "${CP_CHUNK_FULL:-0}" == 1 ]]; then
    for chunk in "${CHUNKS[@]}"; do
      for n in 1 $((2 * pcp + 1)) 777 3000; do check "$n" f32 "$tp" "$pcp" "$dcp" "$il" "$chunk"; done
    done
  else
    check $((2 * pcp + 1)) f32 "$tp" "$pcp" "$dcp" "$il" 1
    check 777 f32 "$tp" "$pcp" "$dcp" "$il" $((li % 2 ? 64 : 7))
    check 3000 f32 "$tp" "$pcp" "$dcp" "$il" $((li % 2 ? 1000 : 256))
  fi
done
# bf16 KV cache: two layouts, chunks that cut the prompt several times, two prompts.
check 777 bf16 2 2 1 1 64
check 3000 bf16 4 2 2 8 256
[[ $failures -eq 0 ]] || { echo "FAIL: $failures of $runs runs differ from one rank"; exit 1; }
echo "cp_chunked_equivalence_test: $runs runs match the single-rank run"
