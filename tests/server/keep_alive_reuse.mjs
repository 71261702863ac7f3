// A client that reuses its pooled keep-alive connection after its event loop stalled (as a
// busy Node process does): one completion, a synchronous stall of STALL_MS, a second
// completion on the same pooled connection. Node's fetch keeps an idle connection for the
// server's Keep-Alive hint minus 1 s, but a stalled loop cannot close it in time: the second
// request survives only if the server kept the connection open for longer than the stall.
// Usage: node keep_alive_reuse.mjs URL KEY MODEL STALL_MS. Prints one JSON line; exits 1 if
// the second request failed.
const [url, key, model, stallMs] = process.argv.slice(2);
const post = () => fetch(`${url}/v1/completions`, {
  method: 'POST',
  headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
  body: JSON.stringify({ model, prompt: 'Hello', max_tokens: 2 }),
});
const first = await post();
await first.text();
const hint = first.headers.get('keep-alive');
const t0 = Date.now();
while (Date.now() - t0 < +stallMs) {}  // the stalled event loop
try {
  const second = await post();
  await second.text();
  console.log(JSON.stringify({ stall_ms: +stallMs, keep_alive: hint, status: second.status }));
  process.exit(second.status === 200 ? 0 : 1);
} catch (e) {
  console.log(JSON.stringify({ stall_ms: +stallMs, keep_alive: hint,
                               error: String(e.cause?.code ?? e.cause?.message ?? e.message) }));
  process.exit(1);
}
