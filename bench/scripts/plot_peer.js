// Draws docs/peer_llamacpp.svg from bench/results/peer_llamacpp.jsonl (peer_llamacpp.sh):
// tokens/s of cpinfer and llama.cpp side by side for each measurement (prefill 512 / 2048 /
// 8192, decode at depth 0 / 8192), one group of bars per thread count in the file; the
// ratio cpinfer / llama.cpp above each pair. Plain SVG, no dependencies.
// Usage: node bench/scripts/plot_peer.js [in.jsonl] [out.svg]
const fs = require("fs");
const inPath = process.argv[2] || "bench/results/peer_llamacpp.jsonl";
const outPath = process.argv[3] || "docs/peer_llamacpp.svg";
const rows = fs.readFileSync(inPath, "utf8").trim().split("\n").map(JSON.parse);
const label = (r) => (r.what === "prefill" ? `prefill ${r.tokens}` : `decode @${r.depth}`);
// cases in file order: "threads|label" -> {cpinfer, "llama.cpp"}
const cases = new Map();
for (const r of rows) {
  const key = `${r.threads}|${label(r)}`;
  if (!cases.has(key)) cases.set(key, {});
  cases.get(key)[r.engine] = r.tokens_per_s;
}
const keys = [...cases.keys()].filter((k) => cases.get(k).cpinfer && cases.get(k)["llama.cpp"]);
const W = 140 + 110 * keys.length, H = 380, pad = 60, ph = H - 2 * pad - 20, bw = 34;
const svg = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">`,
             `<rect width="${W}" height="${H}" fill="white"/>`];
const text = (x, y, s, o = "") =>
  svg.push(`<text x="${x}" y="${y}" font-size="11" font-family="sans-serif" ${o}>${s}</text>`);
// Log scale: decode (tens of tokens/s) and prefill (hundreds) on one axis.
const vals = keys.flatMap((k) => Object.values(cases.get(k)));
const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...vals))));
const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...vals))));
const y0 = pad + ph;
const ly = (v) => y0 - (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)) * ph;
text(pad, pad - 30, "cpinfer vs llama.cpp, tokens/s (log scale), same GGUF, f32 KV cache",
     'font-weight="bold"');
svg.push(`<line x1="${pad}" y1="${y0}" x2="${W - 20}" y2="${y0}" stroke="black"/>`);
svg.push(`<line x1="${pad}" y1="${y0}" x2="${pad}" y2="${pad}" stroke="black"/>`);
for (let v = lo; v <= hi; v *= 10) {
  text(pad - 40, ly(v) + 4, `${v}`);
  svg.push(`<line x1="${pad}" y1="${ly(v)}" x2="${W - 20}" y2="${ly(v)}" stroke="#ddd"/>`);
}
keys.forEach((k, i) => {
  const c = cases.get(k), x = pad + 20 + i * 110, [threads, name] = k.split("|");
  const bars = [["cpinfer", "#06c"], ["llama.cpp", "#c60"]];
  bars.forEach(([e, color], j) => {
    const v = c[e];
    svg.push(`<rect x="${x + j * bw}" y="${ly(v)}" width="${bw - 4}" height="${y0 - ly(v)}" fill="${color}"/>`);
    text(x + j * bw, ly(v) - 4, v.toFixed(v < 100 ? 1 : 0));
  });
  text(x, y0 + 15, name);
  text(x, y0 + 28, `${threads} thread${threads === "1" ? "" : "s"}, x${(c.cpinfer / c["llama.cpp"]).toFixed(2)}`);
});
text(pad, H - 8, "blue: cpinfer; orange: llama.cpp (node-llama-cpp prebuilt). qwen2.5-0.5b preset, bf16 weights.");
svg.push("</svg>");
fs.writeFileSync(outPath, svg.join("\n"));
console.log(`wrote ${outPath}`);
