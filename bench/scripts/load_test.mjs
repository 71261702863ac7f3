// Load test of a running `cpinfer serve`: N concurrent streamed clients for a fixed
// time with mixed prompt lengths and max_tokens, random disconnects mid-stream and some
// requests that must be rejected; then every request is accounted for against the server's
// /metrics, the KV pages must all be back on every rank and the server's RSS must be flat.
// Optionally a fixed set of greedy requests is sent (all at once, at the start) and their
// outputs written to a file, so that two runs (with and without KV pressure) can be compared.
//
//   node bench/scripts/load_test.mjs --url http://127.0.0.1:PORT --model NAME --pid PID
//     [--clients 64] [--duration 300] [--min-prompt 8] [--max-prompt 1024]
//     [--max-tokens-max 128] [--disconnect 0.1] [--reject 0.03] [--max-model-len N]
//     [--shared-prefix 0 --prefixes 4] [--early-cancel 0 --early-cancel-ms 3000]
//     [--greedy-out FILE] [--greedy-n 24] [--expect-preemptions] [--rss-tolerance 0.10]
//     [--rss-tail-tolerance 0.01 (soak: growth over the last 20 min; off by default)]
//     [--label NAME] [--jsonl bench/results/load_test.jsonl]
//   node bench/scripts/load_test.mjs --compare A.json B.json   (greedy outputs equal?)
//
// --shared-prefix F: a fraction F of the requests start with one of --prefixes fixed prompts
// (lengths log-uniform in [max(minPrompt, maxPrompt / 16), maxPrompt / 2]) and go on with
// their own random tokens, so the prefix cache serves hits and shares pages between running
// requests; the run then requires hits in /metrics. --early-cancel F: a fraction F of the
// requests are dropped by their client a random 0..--early-cancel-ms after the response
// began, whatever they are doing then (queued, prefilling chunk by chunk, decoding).
// Exit status 0 when every check passed; the summary (one JSON line) is printed and appended
// to --jsonl. Uses fetch (node >= 18) and parses the SSE stream itself, so a disconnect is an
// AbortController.abort() in the middle of the stream.
import fs from 'node:fs';

function parseArgs(argv) {
  const a = {
    url: '', model: '', pid: 0, clients: 64, duration: 300, minPrompt: 8, maxPrompt: 1024,
    maxTokensMax: 128, disconnect: 0.1, reject: 0.03, maxModelLen: 0, greedyOut: '',
    greedyN: 24, greedyMaxTokens: 48, expectPreemptions: false, rssTolerance: 0.10, label: 'load',
    rssTailTolerance: -1, sharedPrefix: 0, prefixes: 4, earlyCancel: 0, earlyCancelMs: 3000,
    jsonl: '', seed: 1, vocab: 150000, settleS: 60, compare: null,
  };
  const num = new Set(['pid', 'clients', 'duration', 'minPrompt', 'maxPrompt', 'maxTokensMax',
    'disconnect', 'reject', 'maxModelLen', 'greedyN', 'greedyMaxTokens', 'rssTolerance', 'seed',
    'vocab', 'settleS', 'rssTailTolerance', 'sharedPrefix', 'prefixes', 'earlyCancel',
    'earlyCancelMs']);
  for (let i = 2; i < argv.length; ++i) {
    const k = argv[i].replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (k === 'compare') { a.compare = [argv[++i], argv[++i]]; continue; }
    if (k === 'expectPreemptions') { a.expectPreemptions = true; continue; }
    if (!(k in a)) throw new Error(`unknown option ${argv[i]}`);
    const v = argv[++i];
    a[k] = num.has(k) ? Number(v) : v;
  }
  return a;
}

// Deterministic PRNG (mulberry32), so a run's workload is reproducible from --seed.
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6D2B79F5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (xs, p) => {
  if (!xs.length) return null;
  const s = [...xs].sort((x, y) => x - y);
  return +s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))].toFixed(4);
};

async function metrics(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    m.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return m;
}
// Sum of every series of `name` whose labels include all of `want` (e.g. finished_reason="x").
// A series' value after warm-up (first sample at >= warmT) and last, its growth from tailFrom
// to the end, and its least-squares slope after warm-up, per minute.
function trend(samples, key, warmT, tailFrom) {
  const last = samples[samples.length - 1];
  const warm = samples.find((x) => x.t >= warmT) || last;
  const tailFirst = samples.find((x) => x.t >= tailFrom) || last;
  const fit = samples.filter((x) => x.t >= warm.t);
  const mt = fit.reduce((q, x) => q + x.t, 0) / fit.length, mv = fit.reduce((q, x) => q + x[key], 0) / fit.length;
  const sxx = fit.reduce((q, x) => q + (x.t - mt) ** 2, 0);
  const slope = sxx > 0 ? (60 * fit.reduce((q, x) => q + (x.t - mt) * (x[key] - mv), 0)) / sxx : 0;
  return { first: +samples[0][key].toFixed(1), after_warmup: +warm[key].toFixed(1), last: +last[key].toFixed(1),
    tail: { from_t: tailFirst.t, first: +tailFirst[key].toFixed(1), growth: +((last[key] - tailFirst[key]) / tailFirst[key]).toFixed(5) },
    slope_mb_per_min_after_warmup: +slope.toFixed(4) };
}

function metricSum(m, name, want = []) {
  let s = 0;
  for (const [k, v] of m) {
    const brace = k.indexOf('{');
    const n = brace < 0 ? k : k.slice(0, brace);
    if (n !== name) continue;
    if (want.every((w) => k.includes(w))) s += v;
  }
  return s;
}
function perRank(m, name) {
  const out = {};
  for (const [k, v] of m) {
    if (!k.startsWith(name + '{')) continue;
    const r = /rank="(\d+)"/.exec(k);
    if (r) out[r[1]] = v;
  }
  return out;
}
function pageState(m) {
  const total = metricSum(m, 'cpinfer:kv_pages_total');
  const used = perRank(m, 'cpinfer:kv_pages_used');
  const audited = perRank(m, 'cpinfer:kv_pages_free_audited');
  const cached = perRank(m, 'cpinfer:kv_pages_cached');  // held only by the prefix cache
  const ranks = Object.keys(used);
  return {
    total, used, cached, audited_free: audited,
    running: metricSum(m, 'vllm:num_requests_running'),
    waiting: metricSum(m, 'vllm:num_requests_waiting'),
    audit_mismatches: metricSum(m, 'cpinfer:kv_audit_mismatches_total'),
    // Every page free or cached, and each rank's own pool (audited) agrees.
    all_free: ranks.length > 0 &&
      ranks.every((r) => used[r] === 0 && audited[r] === total - (cached[r] ?? 0)),
  };
}
const REASONS = ['stop', 'length', 'abort', 'error'];
function successCounts(m) {
  const o = {};
  for (const r of REASONS)
    o[r] = metricSum(m, 'vllm:request_success_total', [`finished_reason="${r}"`]);
  return o;
}

function readRss(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /VmRSS:\s+(\d+) kB/.exec(s);
    return m ? Number(m[1]) / 1024 : null;
  } catch { return null; }
}

// One streamed /v1/completions call. Returns {outcome, reason, ttft, e2e, tokens, text}.
// outcome: finished | cancelled | rejected | error.
// cancelAfterMs > 0: the client drops the request that long after the response began.
async function streamCompletion(a, body, disconnectAfter, cancelAfterMs = 0) {
  const ctl = new AbortController();
  const t0 = performance.now();
  let res;
  try {
    res = await fetch(`${a.url}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body), signal: ctl.signal,
    });
  } catch (e) {
    // When (seconds into the run is in the caller's list) and how long after sending it
    // failed: a reset within a millisecond or two is a pooled connection the server had
    // already closed; a later one happened while the server held the request.
    return { outcome: 'error', reason: `fetch: ${e.cause?.code || e.message}`,
             after_ms: +(performance.now() - t0).toFixed(1), prompt_tokens: body.prompt.length };
  }
  if (res.status !== 200) {
    let msg = '';
    try { msg = (await res.json()).error?.message || ''; } catch { /* not JSON */ }
    return { outcome: 'rejected', reason: `HTTP ${res.status}: ${msg.slice(0, 60)}`, status: res.status };
  }
  const dec = new TextDecoder();
  let buf = '', ttft = null, chunks = 0, text = '', finish = null, done = false, tokens = 0, cancelled = false;
  // The response began (status 200 and headers: the server holds the request), so a drop
  // from here on is one the server must see and count as an abort.
  const timer = cancelAfterMs > 0 ? setTimeout(() => { cancelled = true; ctl.abort(); }, cancelAfterMs) : null;
  try {
    for await (const part of res.body) {
      buf += dec.decode(part, { stream: true });
      let k;
      while ((k = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, k);
        buf = buf.slice(k + 2);
        if (!ev.startsWith('data: ')) continue;  // ": keep-alive"
        const data = ev.slice(6);
        if (data === '[DONE]') { done = true; continue; }
        const j = JSON.parse(data);
        if (j.error) { clearTimeout(timer); return { outcome: 'error', reason: `stream error: ${j.error.message}` }; }
        const c = j.choices?.[0];
        if (c) {
          if (ttft === null) ttft = (performance.now() - t0) / 1000;
          text += c.text || '';
          ++chunks;
          if (c.finish_reason) finish = c.finish_reason;
        }
        if (j.usage) tokens = j.usage.completion_tokens;
        if (disconnectAfter > 0 && chunks >= disconnectAfter && !finish) {
          cancelled = true;
          ctl.abort();  // leaving the loop cancels the body stream, which may throw AbortError
          break;
        }
      }
      if (cancelled) break;
    }
  } catch (e) {
    if (!cancelled) { clearTimeout(timer); return { outcome: 'error', reason: `read: ${e.cause?.code || e.name}` }; }
  }
  clearTimeout(timer);
  if (cancelled && done && finish) cancelled = false;  // the timer fired after [DONE]: finished
  if (cancelled) return { outcome: 'cancelled', reason: cancelAfterMs > 0 && disconnectAfter === 0 ? 'client dropped it early' : 'client disconnected', ttft, tokens: chunks };
  if (!done || !finish) return { outcome: 'error', reason: 'stream ended without [DONE]' };
  return { outcome: 'finished', reason: finish, ttft, e2e: (performance.now() - t0) / 1000, tokens, text };
}

function randomPrompt(r, n, vocab) {
  const ids = new Array(n);
  for (let i = 0; i < n; ++i) ids[i] = 100 + Math.floor(r() * (vocab - 100));
  return ids;
}

// The --prefixes shared prompt starts of --shared-prefix, the same for a given run's options.
function sharedPrefixes(a) {
  const r = rng(777);
  const lo = Math.max(a.minPrompt, Math.floor(a.maxPrompt / 16)), hi = Math.max(lo, Math.floor(a.maxPrompt / 2));
  return Array.from({ length: a.prefixes }, () =>
    randomPrompt(r, Math.round(Math.exp(Math.log(lo) + r() * (Math.log(hi) - Math.log(lo)))), a.vocab));
}

// The fixed greedy set: same prompts and lengths for a given seed.
function greedyBodies(a) {
  const r = rng(4242);
  const out = [];
  for (let i = 0; i < a.greedyN; ++i) {
    const n = 64 + Math.floor(r() * 256);
    out.push({ model: a.model, prompt: randomPrompt(r, n, a.vocab), max_tokens: a.greedyMaxTokens,
      temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true } });
  }
  return out;
}

async function main() {
  const a = parseArgs(process.argv);
  if (a.compare) {
    const [x, y] = a.compare.map((f) => JSON.parse(fs.readFileSync(f, 'utf8')));
    let diff = 0;
    for (let i = 0; i < Math.max(x.length, y.length); ++i)
      if (JSON.stringify(x[i]) !== JSON.stringify(y[i])) ++diff;
    const line = { label: a.label, date: new Date().toISOString(), compare: a.compare, n: x.length, differing: diff, equal: diff === 0 && x.length === y.length };
    console.log(JSON.stringify(line));
    process.exit(line.equal ? 0 : 1);
  }
  const failures = [];
  const check = (ok, what) => { if (!ok) failures.push(what); };

  // Before: idle server, every page free.
  let before = await metrics(a.url);
  for (let i = 0; i < 100 && !pageState(before).all_free; ++i) { await sleep(100); before = await metrics(a.url); }
  const pagesBefore = pageState(before);
  check(pagesBefore.all_free, 'pages not all free before the run');
  const succBefore = successCounts(before);
  const refusedBefore = metricSum(before, 'cpinfer:http_error_responses_total', ['status="400"']);
  const preemptBefore = metricSum(before, 'vllm:num_preemptions_total');
  const cacheBefore = { queries: metricSum(before, 'vllm:prefix_cache_queries_total'),
    hits: metricSum(before, 'vllm:prefix_cache_hits_total') };
  const prefixes = a.sharedPrefix > 0 ? sharedPrefixes(a) : [];

  const rss = [];
  const t0 = performance.now();
  const sampler = setInterval(() => {
    const v = readRss(a.pid);
    if (v !== null) rss.push({ t: +((performance.now() - t0) / 1000).toFixed(1), mb: +v.toFixed(1) });
  }, 2000);
  rss.push({ t: 0, mb: readRss(a.pid) });
  // The server's C heap beside RSS (cpinfer:heap_in_use_bytes / heap_free_bytes of /metrics,
  // where the server reports them): live data growing vs malloc keeping freed memory.
  const heap = [];
  const sampleHeap = async () => {
    const t = +((performance.now() - t0) / 1000).toFixed(1);
    try {
      const m = await metrics(a.url);
      if (m.has('cpinfer:heap_in_use_bytes'))
        heap.push({ t, in_use: m.get('cpinfer:heap_in_use_bytes') / 1e6, free: m.get('cpinfer:heap_free_bytes') / 1e6 });
    } catch { /* a busy server: skip this sample */ }
  };
  const heapSampler = setInterval(sampleHeap, 2000);
  await sampleHeap();

  const results = [];
  const deadline = t0 + a.duration * 1000;
  const maxLen = a.maxModelLen;
  // The greedy set goes first, all at once (under KV pressure this forces preemptions).
  let greedy = null;
  if (a.greedyOut) {
    greedy = Promise.all(greedyBodies(a).map((b) => streamCompletion(a, b, 0)));
  }
  async function client(id) {
    const r = rng(a.seed * 1000 + id);
    while (performance.now() < deadline) {
      const x = r();
      let body, kind = 'normal', disconnectAfter = 0, cancelAfterMs = 0;
      if (x < a.reject) {
        kind = 'reject';
        // Over-long prompt (or prompt + max_tokens) or a bad parameter: must be a 400.
        const y = r();
        if (y < 0.5 && maxLen > 0) body = { model: a.model, prompt: randomPrompt(r, maxLen + 1, a.vocab), max_tokens: 4, stream: true };
        else if (y < 0.75) body = { model: a.model, prompt: randomPrompt(r, 16, a.vocab), max_tokens: 10 ** 9, stream: true };
        else body = { model: a.model, prompt: randomPrompt(r, 16, a.vocab), max_tokens: 4, temperature: -1, stream: true };
      } else {
        // Prompt lengths log-uniform in [minPrompt, maxPrompt], max_tokens uniform in [1, max].
        const n = Math.round(Math.exp(Math.log(a.minPrompt) + r() * (Math.log(a.maxPrompt) - Math.log(a.minPrompt))));
        const mt = 1 + Math.floor(r() * a.maxTokensMax);
        let prompt = randomPrompt(r, n, a.vocab);
        if (prefixes.length && r() < a.sharedPrefix) {
          // A shared start and the request's own tokens, within --max-prompt in all.
          kind = 'shared-prefix';
          const pre = prefixes[Math.floor(r() * prefixes.length)];
          prompt = pre.concat(prompt.slice(0, Math.max(1, a.maxPrompt - pre.length)));
        }
        body = { model: a.model, prompt, max_tokens: mt, stream: true,
          stream_options: { include_usage: true }, temperature: r() < 0.5 ? 0 : 0.8, ignore_eos: r() < 0.5 };
        if (mt >= 4 && r() < a.disconnect) disconnectAfter = 1 + Math.floor(r() * Math.floor(mt / 2));
        else if (r() < a.earlyCancel) cancelAfterMs = 1 + Math.floor(r() * a.earlyCancelMs);
      }
      const sent = +((performance.now() - t0) / 1000).toFixed(1);
      const res = await streamCompletion(a, body, disconnectAfter, cancelAfterMs);
      res.kind = kind;
      res.sent_s = sent;
      results.push(res);
    }
  }
  await Promise.all(Array.from({ length: a.clients }, (_, i) => client(i)));
  const greedyRes = greedy ? await greedy : null;
  const elapsed = (performance.now() - t0) / 1000;

  // After: wait until the server is idle and the audit shows every page back.
  let after = await metrics(a.url), settle = 0;
  const tSettle = performance.now();
  while (!pageState(after).all_free && performance.now() - tSettle < a.settleS * 1000) {
    await sleep(200);
    after = await metrics(a.url);
  }
  settle = (performance.now() - tSettle) / 1000;
  await sleep(2500);  // one more RSS sample once idle
  clearInterval(sampler);
  rss.push({ t: +((performance.now() - t0) / 1000).toFixed(1), mb: readRss(a.pid) });
  clearInterval(heapSampler);
  await sampleHeap();
  const pagesAfter = pageState(after);
  const succAfter = successCounts(after);
  const serverRefused = metricSum(after, 'cpinfer:http_error_responses_total', ['status="400"']) - refusedBefore;
  const preemptions = metricSum(after, 'vllm:num_preemptions_total') - preemptBefore;
  const prefixCache = { queries: metricSum(after, 'vllm:prefix_cache_queries_total') - cacheBefore.queries,
    hits: metricSum(after, 'vllm:prefix_cache_hits_total') - cacheBefore.hits };

  // Accounting.
  const count = (o) => results.filter((x) => x.outcome === o).length;
  const byReason = {};
  for (const x of results) {
    const k = `${x.outcome}: ${x.reason}`;
    byReason[k] = (byReason[k] || 0) + 1;
  }
  const finished = count('finished'), cancelled = count('cancelled'), rejected = count('rejected'), errors = count('error');
  const allResults = greedyRes ? results.concat(greedyRes) : results;
  const gFinished = greedyRes ? greedyRes.filter((x) => x.outcome === 'finished').length : 0;
  const srv = {};
  for (const r of REASONS) srv[r] = succAfter[r] - succBefore[r];
  const clientStop = results.filter((x) => x.outcome === 'finished' && x.reason === 'stop').length;
  const clientLength = results.filter((x) => x.outcome === 'finished' && x.reason === 'length').length + gFinished;
  // A client that disconnects just as its last tokens were produced may be counted as
  // finished by the server (it wrote the whole answer before noticing): "raced".
  const raced = srv.stop + srv.length - clientStop - clientLength;
  check(errors === 0 && (!greedyRes || gFinished === greedyRes.length), `${errors} requests ended in an error`);
  check(srv.error === 0, `server counted ${srv.error} errors`);
  check(srv.stop + srv.length + srv.abort === finished + gFinished + cancelled,
        `server counted ${srv.stop + srv.length + srv.abort} finished+aborted, clients ${finished + gFinished + cancelled}`);
  check(raced >= 0 && raced <= cancelled && srv.abort === cancelled - raced,
        `accounting: server stop ${srv.stop} length ${srv.length} abort ${srv.abort}, clients stop ${clientStop} length ${clientLength} cancelled ${cancelled}`);
  check(results.filter((x) => x.outcome === 'rejected').every((x) => x.status === 400 && x.kind === 'reject'),
        'a request was rejected with a status other than 400, or one that should have run');
  check(results.filter((x) => x.kind === 'reject').every((x) => x.outcome === 'rejected'), 'a bad request was not rejected');
  check(serverRefused === rejected, `server counted ${serverRefused} responses with status 400, clients ${rejected} rejected`);
  check(pagesAfter.all_free, `pages not all back after ${settle.toFixed(1)} s: ${JSON.stringify(pagesAfter)}`);
  check(pagesAfter.audit_mismatches === 0, 'KV audit mismatches');
  if (a.expectPreemptions) check(preemptions > 0, 'no preemption under KV pressure');
  if (a.sharedPrefix > 0) check(prefixCache.hits > 0, 'shared prompt starts but no prefix-cache hits');
  const early = results.filter((x) => x.reason === 'client dropped it early');
  if (a.earlyCancel > 0) check(early.length > 0, 'no request was dropped early');

  // RSS: first, after warm-up (first sample at >= 20% of the run), last, max.
  const warm = rss.find((s) => s.t >= 0.2 * a.duration) || rss[rss.length - 1];
  const last = rss[rss.length - 1];
  const rssMax = Math.max(...rss.map((s) => s.mb));
  const growth = (last.mb - warm.mb) / warm.mb;
  check(growth <= a.rssTolerance, `RSS grew ${(100 * growth).toFixed(1)}% after warm-up (tolerance ${100 * a.rssTolerance}%)`);
  // Soak runs: growth over the last 20 minutes (or the last two thirds of a shorter run),
  // and the least-squares slope of RSS after warm-up, in MB per minute.
  const tailFrom = Math.max(warm.t, last.t - Math.min(1200, (2 / 3) * a.duration));
  const tailFirst = rss.find((x) => x.t >= tailFrom) || last;
  const tailGrowth = (last.mb - tailFirst.mb) / tailFirst.mb;
  const fit = rss.filter((x) => x.t >= warm.t);
  const mt = fit.reduce((q, x) => q + x.t, 0) / fit.length, mm = fit.reduce((q, x) => q + x.mb, 0) / fit.length;
  const sxx = fit.reduce((q, x) => q + (x.t - mt) ** 2, 0);
  const slope = sxx > 0 ? (60 * fit.reduce((q, x) => q + (x.t - mt) * (x.mb - mm), 0)) / sxx : 0;
  if (a.rssTailTolerance >= 0)
    check(tailGrowth < a.rssTailTolerance,
          `RSS grew ${(100 * tailGrowth).toFixed(2)}% over the last ${((last.t - tailFirst.t) / 60).toFixed(1)} min (tolerance ${100 * a.rssTailTolerance}%)`);

  if (greedyRes && a.greedyOut)
    fs.writeFileSync(a.greedyOut, JSON.stringify(greedyRes.map((x) => x.outcome === 'finished' ? x.text : `<${x.outcome}: ${x.reason}>`)));

  const ok = results.filter((x) => x.outcome === 'finished');
  const summary = {
    label: a.label, date: new Date().toISOString(), clients: a.clients, duration_s: a.duration,
    elapsed_s: +elapsed.toFixed(1), prompt_tokens: [a.minPrompt, a.maxPrompt], max_tokens_max: a.maxTokensMax,
    requests: results.length + (greedyRes ? greedyRes.length : 0), finished: finished + gFinished,
    cancelled, rejected, errors, by_reason: byReason,
    error_details: results.filter((x) => x.outcome === 'error').slice(0, 20)
      .map(({ reason, kind, sent_s, after_ms, prompt_tokens }) => ({ reason, kind, sent_s, after_ms, prompt_tokens })),
    server_counts: srv, server_refused_400: serverRefused, raced_disconnects: raced, preemptions,
    shared_prefix: { fraction: a.sharedPrefix, prefixes: prefixes.map((x) => x.length),
      requests: results.filter((x) => x.kind === 'shared-prefix').length },
    prefix_cache_tokens: prefixCache,
    early_cancels: { fraction: a.earlyCancel, within_ms: a.earlyCancelMs, n: early.length,
      before_first_token: early.filter((x) => !x.tokens).length },
    ttft_s: { p50: pct(ok.map((x) => x.ttft), 50), p99: pct(ok.map((x) => x.ttft), 99) },
    e2e_s: { p50: pct(ok.map((x) => x.e2e), 50), p99: pct(ok.map((x) => x.e2e), 99) },
    output_tokens: ok.reduce((s, x) => s + (x.tokens || 0), 0),
    pages_before: pagesBefore, pages_after: pagesAfter, settle_s: +settle.toFixed(1),
    rss_mb: { first: rss[0].mb, after_warmup: warm.mb, after_warmup_t: warm.t, last: last.mb, max: rssMax,
      growth_after_warmup: +growth.toFixed(4), tolerance: a.rssTolerance, samples: rss.length,
      tail: { from_t: tailFirst.t, first: tailFirst.mb, growth: +tailGrowth.toFixed(5) },
      slope_mb_per_min_after_warmup: +slope.toFixed(4) },
    heap_mb: heap.length ? { samples: heap.length, in_use: trend(heap, 'in_use', warm.t, tailFrom),
      free: trend(heap, 'free', warm.t, tailFrom) } : null,
    greedy: greedyRes ? { n: greedyRes.length, finished: gFinished, out: a.greedyOut } : null,
    failures, pass: failures.length === 0,
  };
  const line = JSON.stringify(summary);
  console.log(line);
  if (a.jsonl) fs.appendFileSync(a.jsonl, line + '\n');
  process.exit(summary.pass ? 0 : 1);
}

main().catch((e) => { console.error(e); process.exit(2); });
