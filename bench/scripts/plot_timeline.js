// Draws the per-layer timeline of the PCP K/V gather (bench latency --timeline) for one or
// more runs, one panel each: per layer, the gather (on the comm worker) and the attention
// over the rank's own rows (on the compute threads) as bars from the layer's gather start;
// red: the time rank 0 waited for the gather after its own attention (exposed).
// Plain SVG, no dependencies.
// Usage: node bench/scripts/plot_timeline.js out.svg title1=timeline1.json [title2=t2.json ...]
const fs = require("fs");
const [outPath, ...specs] = process.argv.slice(2);
if (!outPath || specs.length === 0) {
  console.error("usage: plot_timeline.js out.svg title=timeline.json ...");
  process.exit(2);
}
const runs = specs.map((s) => {
  const i = s.lastIndexOf("=");
  return { title: s.slice(0, i), t: JSON.parse(fs.readFileSync(s.slice(i + 1), "utf8")) };
});
const W = 900, pad = 60, rowH = 14, panelGap = 50;
const heights = runs.map((r) => r.t.layers.length * rowH + 40);
const H = pad + heights.reduce((a, b) => a + b + panelGap, 0);
const svg = [];
const text = (x, y, s, o = "") => svg.push(`<text x="${x}" y="${y}" font-size="11" font-family="sans-serif" ${o}>${s}</text>`);
svg.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">`);
svg.push(`<rect width="${W}" height="${H}" fill="white"/>`);
let y = pad - 20;
for (const { title, t } of runs) {
  // Scale: the longest layer span (gather start -> wait end) of this run.
  const span = Math.max(...t.layers.map((l) => Math.max(l.gather_end_ms, l.wait_end_ms) - l.gather_start_ms));
  const sx = (ms) => pad + (ms / span) * (W - 2 * pad);
  text(pad, y, `${title}: ${t.input_len} tokens, pcp ${t.layout.pcp}, TTFT ${(t.ttft_ms / 1000).toFixed(2)} s` +
    `, overlap ${t.overlap_comm ? "on" : "off"} (ms from each layer's gather start)`, 'font-weight="bold"');
  y += 14;
  t.layers.forEach((l, i) => {
    const yy = y + i * rowH, s = l.gather_start_ms;
    text(4, yy + 10, `layer ${l.layer}`);
    svg.push(`<rect x="${sx(0)}" y="${yy}" width="${sx(l.gather_end_ms - s) - sx(0)}" height="5" fill="#27a"/>`);
    const a0 = t.overlap_comm ? 0 : l.gather_end_ms - s;  // without overlap it starts after
    svg.push(`<rect x="${sx(a0)}" y="${yy + 6}" width="${Math.max(0, sx(l.local_attention_end_ms - s) - sx(a0))}" height="5" fill="#2a7"/>`);
    if (l.wait_end_ms - l.local_attention_end_ms > 1e-3)
      svg.push(`<rect x="${sx(l.local_attention_end_ms - s)}" y="${yy + 6}" width="${sx(l.wait_end_ms - l.local_attention_end_ms) - sx(0)}" height="5" fill="#d33"/>`);
  });
  y += t.layers.length * rowH + 6;
  text(pad, y + 8, `0 ms`);
  text(W - pad - 40, y + 8, `${span.toFixed(1)} ms`);
  y += panelGap;
}
text(pad, H - 10, "blue: K/V all-gather (comm worker); green: attention over own rows; red: waited for the gather (exposed)");
svg.push("</svg>");
fs.writeFileSync(outPath, svg.join("\n"));
console.log(`wrote ${outPath}`);
