// Draws docs/e2e_speed.svg from bench/results/e2e_speed.jsonl (e2e_speed.sh): left, prefill
// tokens/s against prompt length; right, decode tokens/s against context length; 1 and 2
// threads (medians where a point was run more than once), with the llama.cpp figures of
// an earlier session as hollow markers. Plain SVG, no dependencies.
// Usage: node bench/scripts/plot_e2e.js [in.jsonl] [out.svg]
const fs = require("fs");
const inPath = process.argv[2] || "bench/results/e2e_speed.jsonl";
const outPath = process.argv[3] || "docs/e2e_speed.svg";
const rows = fs.readFileSync(inPath, "utf8").trim().split("\n").map(JSON.parse);
const median = (a) => { const s = [...a].sort((x, y) => x - y), n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
// series[kind][threads] = Map(x -> [values])
const series = { prefill: {}, decode: {} };
const add = (kind, t, x, v) => {
  series[kind][t] = series[kind][t] || new Map();
  const m = series[kind][t];
  if (!m.has(x)) m.set(x, []);
  m.get(x).push(v);
};
for (const r of rows) {
  const x = r.result;
  if (r.tag !== "decode") add("prefill", r.threads, x.input_len, x.prefill_tokens_per_s);
  if (r.tag !== "prefill") add("decode", r.threads, r.tag === "decode" ? 16 : x.input_len, x.decode_tokens_per_s);
}
const llama = {
  prefill: { 2: [[512, 280], [2048, 225], [8192, 131]], 1: [[512, 144], [2048, 117], [8192, 54]] },
  decode: { 2: [[16, 17.8], [8192, 11.8]], 1: [[16, 9.3]] },
};
const W = 920, H = 380, pad = 60, gap = 70, pw = (W - 2 * pad - gap) / 2, ph = H - 2 * pad - 10;
const svg = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">`, `<rect width="${W}" height="${H}" fill="white"/>`];
const text = (x, y, s, o = "") => svg.push(`<text x="${x}" y="${y}" font-size="11" font-family="sans-serif" ${o}>${s}</text>`);
const color = { 1: "#c60", 2: "#06c" };
function panel(x0, kind, title, xs) {
  const y0 = pad + ph;
  const pts = Object.values(series[kind]).flatMap((m) => [...m.values()].map(median));
  const maxY = Math.max(...pts, ...Object.values(llama[kind]).flat().map((p) => p[1])) * 1.1;
  const lx = (x) => x0 + (Math.log2(x) - Math.log2(xs[0])) / (Math.log2(xs[xs.length - 1]) - Math.log2(xs[0])) * pw;
  const ly = (y) => y0 - (y / maxY) * ph;
  text(x0, pad - 25, title, 'font-weight="bold"');
  svg.push(`<line x1="${x0}" y1="${y0}" x2="${x0 + pw}" y2="${y0}" stroke="black"/>`);
  svg.push(`<line x1="${x0}" y1="${y0}" x2="${x0}" y2="${pad}" stroke="black"/>`);
  for (const x of xs) text(lx(x) - 10, y0 + 15, x >= 1024 ? `${x / 1024}k` : `${x}`);
  for (let f = 0; f <= 1; f += 0.25) text(x0 - 40, ly(f * maxY) + 4, (f * maxY).toFixed(0));
  for (const t of Object.keys(series[kind])) {
    const m = [...series[kind][t].entries()].sort((a, b) => a[0] - b[0]);
    const path = m.map(([x, v], i) => `${i ? "L" : "M"}${lx(x)},${ly(median(v))}`).join(" ");
    svg.push(`<path d="${path}" fill="none" stroke="${color[t]}" stroke-width="2"/>`);
    for (const [x, v] of m) svg.push(`<circle cx="${lx(x)}" cy="${ly(median(v))}" r="3" fill="${color[t]}"/>`);
  }
  for (const t of Object.keys(llama[kind]))
    for (const [x, v] of llama[kind][t]) svg.push(`<circle cx="${lx(x)}" cy="${ly(v)}" r="5" fill="none" stroke="${color[t]}"/>`);
}
panel(pad, "prefill", "Prefill tokens/s vs prompt length", [512, 1024, 2048, 4096, 8192, 32768]);
panel(pad + pw + gap, "decode", "Decode tokens/s vs context length", [16, 256, 4096, 32768]);
text(pad, H - 12, "cpinfer: filled dots (blue 2 threads, orange 1 thread); llama.cpp: hollow circles. qwen2.5-0.5b, bf16, f32 KV.");
svg.push("</svg>");
fs.writeFileSync(outPath, svg.join("\n"));
console.log(`wrote ${outPath}`);
