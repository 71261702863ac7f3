// What the running streams' decodes cost inside a chunked-prefill step. Reads the debug logs
// of two `serve` runs of bench/scripts/cp_long_prompt_itl.sh (CPINFER_LOG=debug, SERVE_LOG_DIR):
// MIXED, a `chunked` run (each prompt step also decodes the streams), and PURE, a
// `prompt_alone` run whose budget is MIXED's minus the streams (so its chunks are the same
// tokens), and optionally ALONE, an `alone` run (the streams' own decode steps).
// Steps are matched by where their chunk ends (same prompt tokens, same context before them);
// per 2048 tokens of context it prints the median of (mixed step - pure step), then the totals,
// the decode-only step's median from ALONE, and their ratio m (the share of a decode step that
// a prompt step does not absorb). One JSON line on stdout.
// Usage: node bench/scripts/mixed_step_cost.js MIXED_LOG PURE_LOG [ALONE_LOG]
const fs = require("fs");
const [mixedLog, pureLog, aloneLog] = process.argv.slice(2);
if (!mixedLog || !pureLog) {
  console.error("usage: node mixed_step_cost.js MIXED_LOG PURE_LOG [ALONE_LOG]");
  process.exit(2);
}
// One entry per logged step: "step: 52.44 ms, 8 decodes, 56 prompt tokens (the furthest chunk
// ends at 5320); began at ..." (engine.cpp's debug line).
function steps(file) {
  const re = /step: ([\d.]+) ms, (\d+) decodes, (\d+) prompt tokens \(the furthest chunk ends at (\d+)\)/;
  const out = [];
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    const m = re.exec(line);
    if (m) out.push({ ms: +m[1], decodes: +m[2], prompt: +m[3], end: +m[4] });
  }
  if (!out.length) throw new Error(`${file}: no step lines (was the server run with CPINFER_LOG=debug?)`);
  return out;
}
const median = (a) => {
  const s = [...a].sort((x, y) => x - y), h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
};
const mixed = steps(mixedLog).filter((s) => s.prompt > 0);
const pure = new Map(steps(pureLog).filter((s) => s.prompt > 0 && s.decodes === 0).map((s) => [s.end, s]));
const decodes = Math.max(...mixed.map((s) => s.decodes));
const buckets = new Map();
let mixedMs = 0, pureMs = 0, matched = 0;
for (const s of mixed) {
  const p = pure.get(s.end);
  // Only steps that carry every stream and the same prompt tokens as the pure run's.
  if (!p || p.prompt !== s.prompt || s.decodes !== decodes) continue;
  const b = Math.floor((s.end - s.prompt) / 2048) * 2048;
  if (!buckets.has(b)) buckets.set(b, []);
  buckets.get(b).push(s.ms - p.ms);
  mixedMs += s.ms; pureMs += p.ms; matched++;
}
if (!matched) throw new Error("no step of the two runs matches: were their chunks the same?");
const all = [...buckets.values()].flat();
const result = {
  decodes_per_step: decodes,
  matched_steps: matched,
  mixed_steps_s: +(mixedMs / 1e3).toFixed(3),
  pure_steps_s: +(pureMs / 1e3).toFixed(3),
  marginal_ms_median: +median(all).toFixed(2),
  marginal_ms_by_context: Object.fromEntries([...buckets].map(([b, d]) => [b, +median(d).toFixed(2)])),
};
if (aloneLog) {
  const own = steps(aloneLog).filter((s) => s.prompt === 0 && s.decodes === decodes).map((s) => s.ms);
  if (own.length) {
    result.decode_step_alone_ms_median = +median(own).toFixed(2);
    result.decode_steps_alone = own.length;
    result.m = +(result.marginal_ms_median / result.decode_step_alone_ms_median).toFixed(3);
  }
}
console.log(JSON.stringify(result));
