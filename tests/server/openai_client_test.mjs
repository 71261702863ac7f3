// Drives a running `cpinfer serve` with the official `openai` npm client (v6): chat and
// completions, streamed and not, logprobs, stop strings, 16 concurrent streams, and every
// bad-request case. Writes the greedy answers to OUT_JSON so that a test can compare
// layouts. Usage: node openai_client_test.mjs BASE_URL API_KEY MODEL OUT_JSON
import OpenAI from 'openai';
import fs from 'node:fs';

const [baseURL, apiKey, model, outPath] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 300_000 });
let failures = 0;
const check = (cond, what) => {
  if (!cond) { failures++; console.error(`FAIL: ${what}`); }
};
const answers = {};

// A fixed prompt as token ids (exact lengths) and one as text.
const ids = (n, salt) => Array.from({ length: n }, (_, i) => 1000 + ((i * 7919 + salt * 104729) % 30000));
const greedy = { temperature: 0, max_tokens: 24, ignore_eos: true };

// ---- completions, not streamed ----
{
  const r = await client.completions.create({ model, prompt: ids(40, 1), ...greedy });
  check(r.object === 'text_completion', 'completion object');
  check(r.choices.length === 1 && r.choices[0].finish_reason === 'length', 'completion finish_reason length');
  check(r.usage.prompt_tokens === 40 && r.usage.completion_tokens === 24 && r.usage.total_tokens === 64, 'completion usage');
  check(Number.isInteger(r.usage.prompt_tokens_details?.cached_tokens), 'usage.prompt_tokens_details.cached_tokens');
  answers.completion = r.choices[0].text;
}
// ---- completions, streamed with usage: same text as not streamed ----
{
  const s = await client.completions.create({ model, prompt: ids(40, 1), ...greedy, stream: true, stream_options: { include_usage: true } });
  let text = '', usage = null, finish = null, chunks = 0;
  for await (const c of s) {
    if (c.usage) usage = c.usage;
    if (c.choices.length) { text += c.choices[0].text; chunks++; if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason; }
  }
  check(text === answers.completion, 'streamed completion text equals the non-streamed one');
  check(usage && usage.completion_tokens === 24 && usage.prompt_tokens === 40, 'stream usage chunk');
  // The same prompt again: with prefix caching on, its 2 whole blocks of 16 (the 40th token
  // is always computed); off, none.
  const cached = usage?.prompt_tokens_details?.cached_tokens;
  check(cached === 0 || cached === 32, `stream usage cached_tokens ${cached}`);
  check(finish === 'length', 'stream finish_reason');
  check(chunks >= 2, 'completion streamed in several chunks');
}
// ---- text prompt, two prompts in one call ----
{
  const r = await client.completions.create({ model, prompt: ['Hello, my name is', 'The capital of France is'], ...greedy, max_tokens: 8 });
  check(r.choices.length === 2 && r.choices[0].index === 0 && r.choices[1].index === 1, 'two choices');
  check(r.usage.completion_tokens === 16, 'two choices usage');
  answers.two_prompts = r.choices.map((c) => c.text);
}
// ---- logprobs ----
{
  const r = await client.completions.create({ model, prompt: ids(10, 2), ...greedy, max_tokens: 5, logprobs: 3 });
  const lp = r.choices[0].logprobs;
  check(lp && lp.tokens.length === 5 && lp.token_logprobs.length === 5 && lp.top_logprobs.length === 5, 'completion logprobs shape');
  check(lp.token_logprobs.every((x) => x <= 0), 'logprobs <= 0');
  // greedy: the chosen token is the most likely one
  check(lp.top_logprobs.every((t, i) => Math.abs(Math.max(...Object.values(t)) - lp.token_logprobs[i]) < 1e-5), 'greedy token is the top logprob');
  const c = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], ...greedy, max_tokens: 4, logprobs: true, top_logprobs: 2 });
  const content = c.choices[0].logprobs.content;
  check(content.length === 4 && content.every((t) => t.top_logprobs.length === 2 && Array.isArray(t.bytes)), 'chat logprobs shape');
}
// ---- chat, not streamed and streamed ----
{
  const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name three colours. 你好 🙂' }];
  const r = await client.chat.completions.create({ model, messages, ...greedy });
  check(r.object === 'chat.completion', 'chat object');
  check(r.choices[0].message.role === 'assistant' && typeof r.choices[0].message.content === 'string', 'chat message');
  check(r.usage.completion_tokens === 24, 'chat usage');
  answers.chat = r.choices[0].message.content;
  const s = await client.chat.completions.create({ model, messages, ...greedy, stream: true, stream_options: { include_usage: true } });
  let text = '', role = null, usage = null;
  for await (const c of s) {
    if (c.usage) usage = c.usage;
    if (c.choices.length) { text += c.choices[0].delta.content ?? ''; role = role ?? c.choices[0].delta.role; }
  }
  check(role === 'assistant', 'stream role');
  check(text === answers.chat, 'streamed chat equals non-streamed');
  check(usage && usage.prompt_tokens === r.usage.prompt_tokens, 'chat stream usage');
}
// ---- stop string: the text ends right before it ----
{
  const full = answers.completion;
  if (full.length >= 6) {
    const stop = full.slice(3, 5);
    const r = await client.completions.create({ model, prompt: ids(40, 1), ...greedy, stop: [stop] });
    check(r.choices[0].finish_reason === 'stop', 'stop finish_reason');
    check(r.choices[0].text === full.slice(0, full.indexOf(stop)), `stop string cuts the text (${JSON.stringify(stop)})`);
  }
}
// ---- 16 concurrent streamed requests ----
{
  const lens = Array.from({ length: 16 }, (_, i) => 5 + i * 13);
  const runs = lens.map(async (n, i) => {
    const s = await client.completions.create({ model, prompt: ids(n, 100 + i), ...greedy, max_tokens: 16, stream: true, stream_options: { include_usage: true } });
    let text = '', usage = null;
    for await (const c of s) { if (c.usage) usage = c.usage; if (c.choices.length) text += c.choices[0].text; }
    return { text, usage };
  });
  const got = await Promise.all(runs);
  check(got.every((g) => g.usage && g.usage.completion_tokens === 16), '16 concurrent streams each got 16 tokens');
  // each equals the same request alone
  const alone = await client.completions.create({ model, prompt: ids(lens[7], 107), ...greedy, max_tokens: 16 });
  check(alone.choices[0].text === got[7].text, 'a concurrent stream equals the same request alone');
  answers.concurrent = got.map((g) => g.text);
}
// ---- bad requests: OpenAI errors with the right status ----
const expectError = async (status, what, fn) => {
  try {
    await fn();
    check(false, `${what}: expected HTTP ${status}, got success`);
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === status, `${what}: expected HTTP ${status}, got ${e.status} ${e.message}`);
    if (e.status === status) check(typeof e.error?.message === 'string' && e.error.message.length > 0, `${what}: error message`);
  }
};
await expectError(404, 'unknown model', () => client.completions.create({ model: 'no-such-model', prompt: 'x', max_tokens: 1 }));
await expectError(400, 'max_tokens 0', () => client.completions.create({ model, prompt: 'x', max_tokens: 0 }));
await expectError(400, 'max_tokens over the context', () => client.completions.create({ model, prompt: 'x', max_tokens: 10_000_000 }));
await expectError(400, 'prompt longer than max model len', () => client.completions.create({ model, prompt: ids(5000, 3), max_tokens: 1 }));
await expectError(400, 'negative temperature', () => client.completions.create({ model, prompt: 'x', temperature: -0.5 }));
await expectError(400, 'top_p 0', () => client.completions.create({ model, prompt: 'x', top_p: 0 }));
await expectError(400, 'messages not an array', () => client.chat.completions.create({ model, messages: 'hello' }));
await expectError(400, 'message content a number', () => client.chat.completions.create({ model, messages: [{ role: 'user', content: 42 }] }));
await expectError(400, 'message without role', () => client.chat.completions.create({ model, messages: [{ content: 'hi' }] }));
await expectError(400, 'empty prompt', () => client.completions.create({ model, prompt: '', max_tokens: 1 }));
await expectError(400, 'token id past the vocabulary', () => client.completions.create({ model, prompt: [1, 2, 99999999], max_tokens: 1 }));
await expectError(400, 'n > 1', () => client.completions.create({ model, prompt: 'x', n: 2 }));
await expectError(401, 'wrong API key', () => new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'wrong', maxRetries: 0 }).models.list());
// ---- models ----
{
  const m = await client.models.list();
  check(m.data.length === 1 && m.data[0].id === model, 'models list');
}

fs.writeFileSync(outPath, JSON.stringify(answers, null, 1));
if (failures) { console.error(`${failures} check(s) failed`); process.exit(1); }
console.log('openai client: all checks passed');
