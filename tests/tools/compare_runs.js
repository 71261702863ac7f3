// Compares two `cpinfer generate --json --logits-out` runs: identical token ids and logits
// within a max-abs tolerance. Usage: node compare_runs.js A.json A.bin B.json B.bin TOL LABEL
// [near-tie]. With near-tie (runs whose logits may differ by up to TOL, e.g. with bf16
// rounding) the greedy tokens may part at step i only where A's logits there have B's token
// within 2 TOL of A's own (a near tie that a TOL-sized error can flip); logits are then
// compared over rows 0..i (later rows follow different texts).
// Prints one line; exits 1 on a mismatch.
const fs = require("fs");
const [aj, ab, bj, bb, tolStr, label, mode] = process.argv.slice(2);
const lastLine = (f) => fs.readFileSync(f, "utf8").trim().split("\n").pop();
const A = JSON.parse(lastLine(aj)), B = JSON.parse(lastLine(bj));
const tol = Number(tolStr);
const fa = fs.readFileSync(ab), fb = fs.readFileSync(bb);
const la = new Float32Array(fa.buffer, fa.byteOffset, fa.length / 4);
const lb = new Float32Array(fb.buffer, fb.byteOffset, fb.length / 4);
let ok = true;
const why = [];
let rows = A.token_ids.length;  // rows of logits compared
if (JSON.stringify(A.token_ids) !== JSON.stringify(B.token_ids)) {
  let i = 0;
  while (A.token_ids[i] === B.token_ids[i]) i++;
  const V = la.length / A.token_ids.length;
  const gap = i < A.token_ids.length && i < B.token_ids.length
                  ? la[i * V + A.token_ids[i]] - la[i * V + B.token_ids[i]] : Infinity;
  if (mode === "near-tie" && gap <= 2 * tol) {
    rows = i + 1;
    why.push(`tokens part at step ${i} on a near tie (gap ${gap.toExponential(2)} <= 2 x tol)`);
  } else {
    ok = false;
    why.push(`tokens differ at step ${i}: ${A.token_ids[i]} vs ${B.token_ids[i]}`);
  }
}
if (la.length !== lb.length) {
  ok = false;
  why.push(`logits sizes differ: ${la.length} vs ${lb.length}`);
}
let maxd = 0, sum2 = 0;
const n = Math.min(la.length, lb.length, (la.length / A.token_ids.length) * rows);
for (let i = 0; i < n; i++) {
  const d = Math.abs(la[i] - lb[i]);
  if (!(d <= maxd)) maxd = d;  // NaN propagates into maxd
  sum2 += la[i] * la[i];
}
if (!(maxd <= tol)) {
  ok = false;
  why.push(`logits max abs diff ${maxd} > ${tol}`);
}
const distinct = new Set(A.token_ids).size;
console.log(`${ok ? "ok  " : "FAIL"} ${label}: ${A.token_ids.length} tokens (${distinct} distinct), ` +
            `max |dlogit| ${maxd.toExponential(2)} (logit rms ${Math.sqrt(sum2 / n).toFixed(2)})` +
            (why.length ? " -- " + why.join("; ") : ""));
process.exit(ok ? 0 : 1);
