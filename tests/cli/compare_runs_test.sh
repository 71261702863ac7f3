#!/usr/bin/env bash
# The comparison tool of the CP equivalence tests (tests/tools/compare_runs.js) against
# hand-made runs: equal runs pass; a logit off by more than the tolerance, a NaN anywhere
# (first, middle or last element), different tokens, different sizes fail; a near tie passes
# only in near-tie mode and only within 2 x tol. The cpinfer argument is unused.
# COMPARE_RUNS=PATH checks another version of the tool (an older one let a NaN through).
set -euo pipefail
SRC=${CPINFER_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
# make_run NAME ROWS VOCAB "TOKENS" [JS expression of i, the element, overriding cos(i)]
make_run() {
  node -e 'const fs=require("fs"); const [name, R, V, toks, expr]=process.argv.slice(1);
    const f=expr ? new Function("i", "return " + expr) : null; const a=new Float32Array(R*V);
    for (let i=0;i<a.length;i++) { const o=f ? f(i) : undefined; a[i]=o===undefined ? Math.cos(i) : o; }
    fs.writeFileSync(name+".bin", Buffer.from(a.buffer));
    fs.writeFileSync(name+".json", JSON.stringify({token_ids: toks.split(",").map(Number)})+"\n");' "$@"
}
V=300000  # > one piece of the tool's reads (2^20 floats), so pieces and their seams are used
T=1,2,3,4,5,6,7,8
make_run base 8 $V $T
make_run same 8 $V $T
make_run off 8 $V $T "i==1048577 ? Math.cos(i)+0.01 : undefined"
make_run nan_first 8 $V $T "i==0 ? NaN : undefined"
make_run nan_mid 8 $V $T "i==1048576 ? NaN : undefined"
make_run nan_last 8 $V $T "i==8*$V-1 ? NaN : undefined"
make_run tokens 8 $V 1,2,3,9,5,6,7,8
make_run short 8 $V $T
truncate -s -4 short.bin
# Near tie at step 3: base2's logits of tokens 4 and 9 are 1e-4 apart; tie2 takes 9 there.
make_run base2 8 $V $T "i==3*$V+4 ? 0.5 : i==3*$V+9 ? 0.4999 : undefined"
make_run tie2 8 $V 1,2,3,9,5,6,7,8 "i==3*$V+4 ? 0.5 : i==3*$V+9 ? 0.4999 : i>4*$V ? 7 : undefined"
# Not a near tie: base3's logits of tokens 4 and 9 are 1e-2 apart (> 2 x 1e-3).
make_run base3 8 $V $T "i==3*$V+4 ? 0.5 : i==3*$V+9 ? 0.49 : undefined"
make_run far3 8 $V 1,2,3,9,5,6,7,8 "i==3*$V+4 ? 0.5 : i==3*$V+9 ? 0.49 : undefined"
failures=0
expect() {  # expect ok|FAIL A B TOL [near-tie] [TEXT]: exit status and (optional) message
  local want=$1 a=$2 b=$3 tol=$4 mode=${5:-} text=${6:-} out rc=0
  out=$(node "${COMPARE_RUNS:-$SRC/tests/tools/compare_runs.js}" "$a.json" "$a.bin" "$b.json" "$b.bin" "$tol" \
    "$a vs $b" $mode) || rc=$?
  if [[ $want == ok && $rc -ne 0 ]] || [[ $want == FAIL && $rc -ne 1 ]] ||
     [[ -n $text && $out != *"$text"* ]]; then
    echo "FAIL: expected $want${text:+ with '$text'}, got (exit $rc): $out"; failures=$((failures + 1))
  else
    echo "as expected: $out"
  fi
}
expect ok base same 1e-3
expect FAIL base off 1e-3 "" "logits max abs diff"
expect ok base off 2e-2
expect FAIL base nan_first 1e-3 "" "NaN"
expect FAIL base nan_mid 1e-3 "" "NaN"
expect FAIL base nan_last 1e-3 "" "NaN"
expect FAIL base tokens 1e-3 "" "tokens differ at step 3"
expect FAIL base short 1e-3 "" "logits sizes differ"
expect FAIL base2 tie2 1e-3 "" "tokens differ at step 3"
expect ok base2 tie2 1e-3 near-tie "near tie"
expect FAIL base3 far3 1e-3 near-tie "tokens differ at step 3"
[[ $failures -eq 0 ]] || { echo "FAIL: $failures checks"; exit 1; }
echo "compare_runs_test: the comparison tool passes and fails where it must"
