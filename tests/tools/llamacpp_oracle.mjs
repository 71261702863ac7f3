// llama.cpp (the prebuilt CPU library of the npm package node-llama-cpp) as an independent
// oracle for cpinfer's GGUF models.
//
//   node llamacpp_oracle.mjs --model M.gguf --ids 1,2,3 --cpinfer-logits F --tol T
//                            [--threads N] [--text TEXT]
//
// Teacher-forces the ids through llama.cpp (f32 KV cache, no flash attention) and compares
// the next-token distribution after every position with cpinfer's
// `generate --prompt-logits-out F` rows (float32 LE, [ids, vocab]). node-llama-cpp gives the
// softmax of the raw logits (greedy sampler: nothing else is applied), so the compared
// quantity is the log-softmax: the logits up to one constant per row. Fails when a position's
// argmax differs (unless our top two are within T of each other: a near tie) or when
// max |d log p| exceeds T. With --text, also prints llama.cpp's tokenization of TEXT (special
// tokens in the text parsed, no BOS added: cpinfer tokenize without --add-special-tokens).
// Prints one JSON line with the numbers.
//
// Exit codes: 0 ok, 1 mismatch or error, 3 llama.cpp cannot run on this machine (the binary
// does not load; the message says why): the caller may skip only then.
import fs from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || i + 1 >= argv.length) throw new Error(`bad argument '${argv[i]}'`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of ["model", "ids", "cpinfer-logits", "tol"])
    if (out[k] === undefined) throw new Error(`--${k} is required`);
  return out;
}

// The prebuilt binaries only: never download or build llama.cpp (no network here).
async function loadLlama(threads) {
  try {
    return await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error,
                           maxThreads: threads});
  } catch (e) {
    // A missing prebuilt package is an installation fault, not a machine that cannot run it.
    const pkg = `@node-llama-cpp/${process.platform}-${process.arch}`;
    if (process.platform === "linux") {
      try { import.meta.resolve(pkg); } catch {
        console.error(`llamacpp_oracle: ${pkg} is not installed (run scripts/setup.sh): ${e.message}`);
        process.exit(1);
      }
    }
    console.error(`SKIP: node-llama-cpp's prebuilt llama.cpp does not load on this machine: ${e.message}`);
    process.exit(3);
  }
}

async function check(a) {
  const ids = a.ids.split(",").map(Number);
  const tol = Number(a.tol);
  const threads = Number(a.threads ?? 2);
  const llama = await loadLlama(threads);
  const model = await llama.loadModel({modelPath: a.model});
  const buf = fs.readFileSync(a["cpinfer-logits"]);
  const ours = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  const V = ours.length / ids.length;  // llama.cpp's probabilities must cover as many tokens
  if (!Number.isInteger(V) || V === 0)
    throw new Error(`cpinfer logits: ${ours.length} floats are not ${ids.length} rows`);
  const context = await model.createContext({
    contextSize: Math.max(256, ids.length + 1), batchSize: Math.max(256, ids.length + 1),
    threads, flashAttention: false,
    experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
  });
  const seq = context.getSequence();
  const res = await seq.controlledEvaluate(ids.map(t => [t, {generateNext: {probabilities: true}}]));
  let maxDiff = 0, worst = null, agree = 0, ties = 0;
  const rows = [];
  for (let i = 0; i < ids.length; i++) {
    const probs = res[i]?.next?.probabilities;
    if (!probs || probs.size !== V) throw new Error(`llama.cpp position ${i}: ${probs?.size} probabilities, want ${V}`);
    const row = ours.subarray(i * V, (i + 1) * V);
    let m = -Infinity, best = 0, second = -Infinity;
    for (let v = 0; v < V; v++) if (row[v] > m) { second = m; m = row[v]; best = v; } else if (row[v] > second) second = row[v];
    let s = 0;
    for (let v = 0; v < V; v++) s += Math.exp(row[v] - m);
    const lse = m + Math.log(s);
    let rowMax = 0, compared = 0;
    for (const [tok, p] of probs) {
      if (!(p > 0)) continue;  // below f32's smallest value: nothing to compare
      const d = Math.abs(Math.log(p) - (row[tok] - lse));
      compared++;
      if (d > rowMax) rowMax = d;
      if (d > maxDiff) { maxDiff = d; worst = {position: i, token: tok}; }
    }
    if (compared < V / 2) throw new Error(`llama.cpp position ${i}: only ${compared} nonzero probabilities`);
    const theirs = probs.keys().next().value;  // the map is sorted by probability
    if (theirs === best) agree++;
    else if (m - row[theirs] <= tol) ties++;
    rows.push({position: i, llama: theirs, cpinfer: best, max_dlogp: +rowMax.toExponential(3)});
  }
  const ok = agree + ties === ids.length && maxDiff <= tol;
  const out = {ok, positions: ids.length, greedy_agree: agree, near_ties: ties,
               max_abs_dlogp: maxDiff, worst, tol};
  if (a.text !== undefined) out.text_ids = Array.from(model.tokenize(a.text, true));
  console.log(JSON.stringify(out));
  if (!ok) {
    for (const r of rows) console.error(JSON.stringify(r));
    process.exitCode = 1;
  }
  await context.dispose();
  await model.dispose();
}

try {
  await check(parseArgs(process.argv.slice(2)));
} catch (e) {
  console.error(`llamacpp_oracle: ${e.message}`);
  process.exit(1);
}
