// llama.cpp's side of bench/scripts/peer_llamacpp.sh: prefill and decode speed of one GGUF
// file through node-llama-cpp's prebuilt CPU library (the same llama.cpp the oracle test
// uses), one JSON line per measurement on stdout.
//
//   node peer_llamacpp.mjs --model M.gguf --threads T --prefill 512,2048 --depths 0,8192
//        [--decode-tokens 32] [--iters 3] [--warmup 1] [--kv F32|F16|BF16]
//        [--flash-attention auto|on|off] [--batch 512]
//
// prefill N: N random token ids evaluated into an empty sequence (batches of --batch tokens,
// the logits of the last one computed), tokens/s = N / wall time; median of --iters runs.
// decode at depth D: max(D, 1) tokens prefilled (not timed), then --decode-tokens greedy
// steps through LlamaContextSequence.evaluate (one token per step, logits and sampling
// included), tokens/s = steps / wall time from the first generated token; median of --iters.
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
import {performance} from "node:perf_hooks";

function parse(argv) {
  const a = {"decode-tokens": "32", iters: "3", warmup: "1", kv: "F32", "flash-attention": "auto",
             batch: "512", prefill: "", depths: ""};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || i + 1 >= argv.length) throw new Error(`bad argument '${argv[i]}'`);
    a[argv[i].slice(2)] = argv[i + 1];
  }
  if (!a.model || !a.threads) throw new Error("--model and --threads are required");
  const list = s => s === "" ? [] : s.split(",").map(Number);
  const fa = {auto: "auto", on: true, off: false}[a["flash-attention"]];
  if (fa === undefined) throw new Error(`--flash-attention ${a["flash-attention"]}: auto, on or off`);
  return {model: a.model, threads: +a.threads, prefill: list(a.prefill), depths: list(a.depths),
          decodeTokens: +a["decode-tokens"], iters: +a.iters, warmup: +a.warmup, kv: a.kv, fa,
          batch: +a.batch};
}

const median = xs => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
let seed = 1;
const randomIds = (n, vocab) => Array.from({length: n}, () => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed % vocab;
});

const o = parse(process.argv.slice(2));
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error,
                              maxThreads: o.threads});
const model = await llama.loadModel({modelPath: o.model});
const vocab = model.fileInfo.tensorInfo.find(t => t.name === "token_embd.weight").dimensions[1];
const longest = Math.max(1, ...o.prefill, ...o.depths.map(d => Math.max(d, 1) + o.decodeTokens + 1));
const context = await model.createContext({
  contextSize: longest + 1, batchSize: o.batch, threads: o.threads, flashAttention: o.fa,
  experimentalKvCacheKeyType: o.kv, experimentalKvCacheValueType: o.kv,
});
const seq = context.getSequence();
const common = {engine: "llama.cpp", node_llama_cpp: "3.21.1",
                llama_cpp_release: llama.llamaCppRelease?.release, build: llama.buildType,
                threads: o.threads, kv_cache: o.kv, flash_attention: String(o.fa), batch: o.batch,
                model: o.model};

async function timed(fn) {
  const runs = [];
  for (let i = 0; i < o.warmup + o.iters; i++) {
    await seq.clearHistory();
    const r = await fn();
    if (i >= o.warmup) runs.push(r);
  }
  return runs;
}

for (const n of o.prefill) {
  const runs = await timed(async () => {
    const ids = randomIds(n, vocab);
    const t0 = performance.now();
    // The last token with logits, as a prompt's prefill before its first sampled token.
    await seq.controlledEvaluate([...ids.slice(0, -1), [ids.at(-1), {generateNext: {token: true}}]]);
    return n / ((performance.now() - t0) / 1e3);
  });
  console.log(JSON.stringify({...common, what: "prefill", tokens: n,
                              tokens_per_s: median(runs), runs}));
}

for (const depth of o.depths) {
  const runs = await timed(async () => {
    const ids = randomIds(Math.max(depth, 1), vocab);
    await seq.evaluateWithoutGeneratingNewTokens(ids.slice(0, -1));
    let t0 = 0, steps = -1;
    for await (const _ of seq.evaluate([ids.at(-1)], {temperature: 0})) {
      if (++steps === 0) t0 = performance.now();
      if (steps === o.decodeTokens) break;
    }
    return o.decodeTokens / ((performance.now() - t0) / 1e3);
  });
  console.log(JSON.stringify({...common, what: "decode", depth, decode_tokens: o.decodeTokens,
                              tokens_per_s: median(runs), runs}));
}
await context.dispose();
await model.dispose();
