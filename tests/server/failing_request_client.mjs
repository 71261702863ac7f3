// One long request through the official `openai` npm client, for a test that makes the
// server fail while it runs (tests/cli/rank_fault_test.sh kills a rank). Prints one JSON
// line: {"outcome": "raised", "error": "<class>: <message>", "status": ...} when the client
// raised, {"outcome": "returned", "body": ...} when it handed back a result instead (the
// dishonest case: an error body taken for a completion).
// Usage: node failing_request_client.mjs BASE_URL MODEL stream|whole
import OpenAI from 'openai';

const [baseURL, model, mode] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120_000 });
const req = { model, prompt: 'a long answer please', max_tokens: 4000, ignore_eos: true, temperature: 0 };
try {
  let body;
  if (mode === 'stream') {
    const s = await client.completions.create({ ...req, stream: true });
    body = '';
    for await (const c of s) body += c.choices[0]?.text ?? '';
  } else {
    body = await client.completions.create(req);
  }
  console.log(JSON.stringify({ outcome: 'returned', body }));
} catch (e) {
  const cause = e.cause ? ` (cause: ${e.cause.message ?? e.cause})` : '';
  console.log(JSON.stringify({ outcome: 'raised', error: `${e.constructor.name}: ${e.message}${cause}`, status: e.status ?? null }));
}
