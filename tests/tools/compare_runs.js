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
// The logits files (64 rows of a 151936-word vocabulary: ~39 MB each) are read in pieces
// into two reused buffers: reading them whole cost ~0.4 s a call, mostly page faults of
// fresh buffers, and the CP tests call this dozens of times.
const fa = fs.openSync(ab, "r"), fb = fs.openSync(bb, "r");
const na = fs.fstatSync(fa).size / 4, nb = fs.fstatSync(fb).size / 4;
const floatAt = (fd, i) => {  // one float of a file, by index
  const b = Buffer.alloc(4);
  fs.readSync(fd, b, 0, 4, i * 4);
  return b.readFloatLE(0);
};
let ok = true;
const why = [];
let rows = A.token_ids.length;  // rows of logits compared
if (JSON.stringify(A.token_ids) !== JSON.stringify(B.token_ids)) {
  let i = 0;
  while (A.token_ids[i] === B.token_ids[i]) i++;
  const V = na / A.token_ids.length;
  const gap = i < A.token_ids.length && i < B.token_ids.length
                  ? floatAt(fa, i * V + A.token_ids[i]) - floatAt(fa, i * V + B.token_ids[i])
                  : Infinity;
  if (mode === "near-tie" && gap <= 2 * tol) {
    rows = i + 1;
    why.push(`tokens part at step ${i} on a near tie (gap ${gap.toExponential(2)} <= 2 x tol)`);
  } else {
    ok = false;
    why.push(`tokens differ at step ${i}: ${A.token_ids[i]} vs ${B.token_ids[i]}`);
  }
}
if (na !== nb) {
  ok = false;
  why.push(`logits sizes differ: ${na} vs ${nb}`);
}
let maxd = 0, sum2 = 0;
const n = Math.min(na, nb, (na / A.token_ids.length) * rows);
const piece = 1 << 20;  // floats per read
const ba = Buffer.alloc(4 * piece), bbuf = Buffer.alloc(4 * piece);
const la = new Float32Array(ba.buffer, ba.byteOffset, piece);
const lb = new Float32Array(bbuf.buffer, bbuf.byteOffset, piece);
for (let at = 0; at < n; at += piece) {
  const m = Math.min(piece, n - at);
  if (fs.readSync(fa, ba, 0, 4 * m, 4 * at) !== 4 * m || fs.readSync(fb, bbuf, 0, 4 * m, 4 * at) !== 4 * m)
    throw new Error(`short read of ${ab} or ${bb} at float ${at}`);
  for (let i = 0; i < m; i++) {
    const d = Math.abs(la[i] - lb[i]);
    if (!(d <= maxd) && maxd === maxd) maxd = d;  // a NaN stays in maxd once there
    sum2 += la[i] * la[i];
  }
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
