// Draws docs/pcp_decode_batch.svg from pcp_decode_batch_ab.sh's lines: for each batch size,
// the median over rounds of each build's output rate (tokens/s of all streams together).
// The chart itself: ab_bars.js. Labels: the first label in the file is "old", the other "new".
// Usage: node bench/scripts/plot_pcp_decode_batch.js [in.jsonl] [out.svg]
const fs = require("fs");
const { abBars } = require("./ab_bars.js");
const inPath = process.argv[2] || "bench/results/pcp_decode_batch_ab_zen3.jsonl";
const outPath = process.argv[3] || "docs/pcp_decode_batch.svg";
const rows = fs.readFileSync(inPath, "utf8").trim().split("\n").map(JSON.parse);
const median = (a) => { const s = [...a].sort((x, y) => x - y), m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const labels = [...new Set(rows.map((r) => r.label))];
if (labels.length !== 2) throw new Error(`want two builds, found ${labels.join(", ")}`);
const batches = [...new Set(rows.map((r) => r.batch))].sort((a, b) => a - b);
const rate = (label, batch) => median(rows.filter((r) => r.label === label && r.batch === batch)
  .map((r) => r.result.output_throughput));
const cases = batches.map((b) => ({ old: rate(labels[0], b), new: rate(labels[1], b),
                                    labels: [`${b} stream${b > 1 ? "s" : ""}`] }));
const top = Math.max(...cases.flatMap((c) => [c.old, c.new]));
const svg = abBars({
  titles: [`Decode under ${rows[0].layout}: output tokens/s (median of ${rows.length / (2 * batches.length)})`,
           `${rows[0].model}, ${rows[0].cpu}`],
  cases, axis: { max: Math.ceil(top / 50) * 50 },
  legend: [["#c60", `${labels[0]}: every PCP rank runs every decode`],
           ["#06c", `${labels[1]}: each decode on one home PCP rank`]],
});
fs.writeFileSync(outPath, svg);
console.log(`wrote ${outPath}`);
