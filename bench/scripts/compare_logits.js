// Compares two float32 [rows, vocab] logits files row by row (outside the test suite: the
// int8 accuracy benchmark). Usage: node compare_logits.js REF.bin TEST.bin VOCAB FIRST_ROW
// Rows FIRST_ROW.. of both are compared; prints one JSON object:
//   rows, max_abs (max |ref - test| over every logit), argmax_agreement (share of rows whose
//   argmax is the same), kl_mean / kl_median / kl_max (KL(P_ref || P_test) of the softmax
//   distributions, nats, computed in float64).
const fs = require("fs");
const [refPath, testPath, vocabStr, firstStr] = process.argv.slice(2);
const V = Number(vocabStr), first = Number(firstStr);
const load = (p) => { const b = fs.readFileSync(p); return new Float32Array(b.buffer, b.byteOffset, b.length / 4); };
const A = load(refPath), B = load(testPath);
if (A.length !== B.length || A.length % V !== 0) throw new Error(`sizes ${A.length} and ${B.length} are not equal [rows, ${V}]`);
const rows = A.length / V;
let maxAbs = 0, agree = 0;
const kls = [];
for (let r = first; r < rows; r++) {
  const a = A.subarray(r * V, (r + 1) * V), b = B.subarray(r * V, (r + 1) * V);
  let ma = -Infinity, mb = -Infinity, ia = 0, ib = 0;
  for (let v = 0; v < V; v++) {
    maxAbs = Math.max(maxAbs, Math.abs(a[v] - b[v]));
    if (a[v] > ma) { ma = a[v]; ia = v; }
    if (b[v] > mb) { mb = b[v]; ib = v; }
  }
  if (ia === ib) agree++;
  // log-sum-exp of each row, then KL = sum p_a (log p_a - log p_b).
  let sa = 0, sb = 0;
  for (let v = 0; v < V; v++) { sa += Math.exp(a[v] - ma); sb += Math.exp(b[v] - mb); }
  const la = ma + Math.log(sa), lb = mb + Math.log(sb);
  let kl = 0;
  for (let v = 0; v < V; v++) {
    const lpa = a[v] - la, lpb = b[v] - lb;
    kl += Math.exp(lpa) * (lpa - lpb);
  }
  kls.push(kl);
}
kls.sort((x, y) => x - y);
const n = kls.length;
console.log(JSON.stringify({
  rows: n, max_abs: maxAbs, argmax_agreement: agree / n,
  kl_mean: kls.reduce((s, x) => s + x, 0) / n, kl_median: kls[Math.floor(n / 2)], kl_max: kls[n - 1],
}));
