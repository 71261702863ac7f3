// Drives a running `cpinfer serve` with the official `openai` npm client (v6): chat and
// completions, streamed and not, logprobs, stop strings, 16 concurrent streams, the
// sampling parameters (penalties, min_p, logit_bias, the generation_config.json defaults),
// and every bad-request case. Writes the greedy answers to OUT_JSON so that a test can
// compare layouts. The server runs with --generation-config auto (its default) and
// --enable-auto-tool-choice --tool-call-parser hermes.
// Usage: node openai_client_test.mjs BASE_URL API_KEY MODEL OUT_JSON
import OpenAI from 'openai';
import fs from 'node:fs';

const [baseURL, apiKey, model, outPath] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 300_000 });
let failures = 0;
const check = (cond, what) => {
  if (!cond) { failures++; console.error(`FAIL: ${what}`); }
};
const answers = {};
const expectError = async (status, what, fn) => {
  try {
    await fn();
    check(false, `${what}: expected HTTP ${status}, got success`);
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === status, `${what}: expected HTTP ${status}, got ${e.status} ${e.message}`);
    if (e.status === status) check(typeof e.error?.message === 'string' && e.error.message.length > 0, `${what}: error message`);
  }
};

// A fixed prompt as token ids (exact lengths) and one as text.
// (Regular ids of the test model's 4099-id vocabulary, under its special tokens.)
const ids = (n, salt) => Array.from({ length: n }, (_, i) => 100 + ((i * 7919 + salt * 104729) % 3900));
const greedy = { temperature: 0, max_tokens: 24, ignore_eos: true };
// The server's /tokenize of a text (no special tokens): its token ids.
const tokenize = async (prompt) => (await (await fetch(`${baseURL}/tokenize`, {
  method: 'POST', headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
  body: JSON.stringify({ model, prompt, add_special_tokens: false }) })).json()).tokens;

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
  // repetition_penalty 1: the logprobs are the model's raw ones, and the server's default
  // (generation_config.json's 1.1 under auto) would change which token greedy picks.
  const r = await client.completions.create({ model, prompt: ids(10, 2), ...greedy, repetition_penalty: 1, max_tokens: 5, logprobs: 3 });
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
// ---- sampling parameters: accepted, and they change the output where they must ----
{
  // Greedy with every default that could change logits set explicitly (no penalty).
  const plain = { temperature: 0, max_tokens: 24, ignore_eos: true, repetition_penalty: 1 };
  const text = async (extra, prompt = ids(12, 9)) =>
    (await client.completions.create({ model, prompt, ...plain, ...extra })).choices[0].text;
  const base = await text({});
  // Plain greedy requests are served by steps that gather only each row's argmax across the
  // ranks: their answers join the ones compared between layouts, alone and four at once.
  answers.plain_greedy = base;
  answers.plain_greedy_concurrent = await Promise.all([3, 40, 77, 150].map((n, i) => text({}, ids(n, 300 + i))));
  // logit_bias +100 on one id forces it under greedy: the id of " the", 24 times.
  const theId = await tokenize(' the');
  check(theId?.length === 1, `" the" is one token: ${JSON.stringify(theId)}`);
  const forced = await text({ logit_bias: { [String(theId[0])]: 100 } });
  check(forced === ' the'.repeat(24), `logit_bias +100 forces the token: ${JSON.stringify(forced.slice(0, 60))}`);
  // -100 on every id greedy chose removes them all: the answer changes.
  const baseIds = await tokenize(base);
  const banned = await text({ logit_bias: Object.fromEntries(baseIds.map((t) => [String(t), -100])) });
  check(banned !== base, 'logit_bias -100 on the greedy tokens changes the answer');
  // The greedy continuation of this prompt repeats itself; each penalty changes it.
  for (const [k, v] of [['repetition_penalty', 100], ['presence_penalty', 2], ['frequency_penalty', 2]])
    check(await text({ [k]: v }) !== base, `${k} ${v} changes the greedy answer`);
  // repetition_penalty 100 under greedy never picks a token already in the answer (nor the
  // prompt's): the answer's tokens are all distinct.
  const rp = await text({ repetition_penalty: 100 });
  const rpIds = await tokenize(rp);
  check(new Set(rpIds).size >= 20, `repetition_penalty 100: ${rpIds.length} tokens, ${new Set(rpIds).size} distinct`);
  // min_p 1 keeps only the most likely token: sampling at temperature 1.5 is greedy.
  check(await text({ temperature: 1.5, seed: 4, min_p: 1 }) === base, 'min_p 1 samples the greedy answer');
  // Chat takes them too.
  const c = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], ...plain, max_tokens: 4,
    presence_penalty: 0.5, frequency_penalty: 0.5, min_p: 0.1, logit_bias: { [String(theId[0])]: 100 } });
  check(c.choices[0].message.content === ' the'.repeat(4), `chat logit_bias: ${JSON.stringify(c.choices[0].message.content)}`);
}
// ---- generation_config.json defaults (the model's: temperature 0.7, top_p 0.8, top_k 20,
// repetition_penalty 1.1): under --generation-config auto a request that omits them samples
// exactly as one that sets the file's values, not as one with OpenAI's (temperature 1,
// nothing else); an explicit value overrides the default. serve_test checks vllm. ----
{
  const sampled = async (extra) => (await client.completions.create({ model, prompt: ids(12, 9), max_tokens: 24, ignore_eos: true, seed: 77, ...extra })).choices[0].text;
  const fileValues = { temperature: 0.7, top_p: 0.8, top_k: 20, repetition_penalty: 1.1, min_p: 0 };
  const openaiValues = { temperature: 1, top_p: 1, top_k: -1, repetition_penalty: 1, min_p: 0 };
  const omitted = await sampled({});
  check(omitted === await sampled(fileValues), 'omitted fields take generation_config.json\'s values');
  check(omitted !== await sampled(openaiValues), 'omitted fields do not take OpenAI\'s defaults');
  // An explicit temperature 0 overrides the default 0.7: greedy, so the seed does not matter.
  const g77 = await sampled({ temperature: 0 });
  check(g77 === await sampled({ temperature: 0, seed: 1 }) && g77 !== omitted, 'explicit temperature 0 overrides the default');
}
// ---- n > 1: choices 0..n-1 per prompt; with a seed, choice j samples with seed + j;
// usage counts every completion and each prompt once ----
{
  const base = { model, prompt: ids(12, 9), max_tokens: 12, ignore_eos: true, temperature: 1 };
  const texts = (r) => r.choices.map((c) => c.text);
  const r = await client.completions.create({ ...base, n: 3, seed: 5 });
  check(r.choices.length === 3 && r.choices.every((c, i) => c.index === i && c.finish_reason === 'length'), 'n = 3: choices 0..2');
  check(new Set(texts(r)).size === 3, `n = 3 with a seed: the choices differ: ${JSON.stringify(texts(r))}`);
  check(r.usage.prompt_tokens === 12 && r.usage.completion_tokens === 36, `n = 3 usage: ${JSON.stringify(r.usage)}`);
  const again = await client.completions.create({ ...base, n: 3, seed: 5 });
  check(JSON.stringify(texts(again)) === JSON.stringify(texts(r)), 'n = 3 with a seed is reproducible');
  const alone = await client.completions.create({ ...base, seed: 6 });
  check(alone.choices[0].text === r.choices[1].text, 'choice 1 of seed 5 samples as n = 1 with seed 6');
  const g = await client.completions.create({ ...base, n: 2, temperature: 0 });
  check(g.choices[0].text === g.choices[1].text, 'greedy n = 2: identical choices');
  const two = await client.completions.create({ model, prompt: [ids(8, 1), ids(8, 2)], max_tokens: 4, ignore_eos: true, temperature: 0, n: 2 });
  check(two.choices.length === 4 && two.usage.prompt_tokens === 16 && two.usage.completion_tokens === 16, 'two prompts x n = 2: 4 choices, usage');
  check(two.choices[0].text === two.choices[1].text && two.choices[2].text === two.choices[3].text &&
        two.choices[0].text !== two.choices[2].text, 'two prompts x n = 2: choice i is prompt i / n');
  // Chat, streamed and whole: the same choices.
  const chatReq = { model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 6, ignore_eos: true, temperature: 1, seed: 3, n: 2 };
  const whole = await client.chat.completions.create(chatReq);
  check(whole.choices.length === 2 && whole.usage.completion_tokens === 12, 'chat n = 2');
  const s = await client.chat.completions.create({ ...chatReq, stream: true, stream_options: { include_usage: true } });
  const streamed = ['', ''], roles = [null, null];
  let usage = null;
  for await (const c of s) {
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) { streamed[ch.index] += ch.delta.content ?? ''; roles[ch.index] ??= ch.delta.role; }
  }
  check(streamed[0] === whole.choices[0].message.content && streamed[1] === whole.choices[1].message.content, 'chat n = 2 streamed equals whole');
  check(roles[0] === 'assistant' && roles[1] === 'assistant', 'chat n = 2: each choice streams its role');
  check(usage?.completion_tokens === 12 && usage?.prompt_tokens === whole.usage.prompt_tokens, 'chat n = 2 stream usage');
}
// ---- tools (--tool-call-parser hermes): accepted, rendered, and the response carries
// message.tool_calls. The synthetic model writes no real call; "<tool_call>" forced by
// logit_bias is no valid call, so it stays content (the parser itself: unit tests). ----
{
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather now',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const messages = [{ role: 'user', content: 'Weather in Paris?' }];
  const r = await client.chat.completions.create({ model, messages, tools, ...greedy, max_tokens: 4 });
  check(Array.isArray(r.choices[0].message.tool_calls) && typeof r.choices[0].message.content === 'string', 'tools: message.tool_calls and content');
  const conv = [...messages,
    { role: 'assistant', content: null, tool_calls: [{ id: 'chatcmpl-tool-1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
    { role: 'tool', tool_call_id: 'chatcmpl-tool-1', content: '18 C, sunny' }];
  const r2 = await client.chat.completions.create({ model, messages: conv, tools, tool_choice: 'auto', ...greedy, max_tokens: 4 });
  check(r2.usage.prompt_tokens > r.usage.prompt_tokens, 'a conversation with a tool call and its result is accepted');
  const open = await tokenize('<tool_call>');
  check(open?.length === 1, `"<tool_call>" is one token: ${JSON.stringify(open)}`);
  const forced = { model, messages, tools, ...greedy, max_tokens: 3, logit_bias: { [String(open[0])]: 100 } };
  const f = await client.chat.completions.create(forced);
  check(f.choices[0].message.content === '<tool_call>'.repeat(3) && f.choices[0].message.tool_calls.length === 0 &&
        f.choices[0].finish_reason === 'length', `malformed tool call stays content: ${JSON.stringify(f.choices[0])}`);
  const fs_ = await client.chat.completions.create({ ...forced, stream: true });
  let text = '', calls = 0, finish = null;
  for await (const c of fs_) {
    text += c.choices[0].delta.content ?? '';
    calls += c.choices[0].delta.tool_calls?.length ?? 0;
    finish = c.choices[0].finish_reason ?? finish;
  }
  check(text === '<tool_call>'.repeat(3) && calls === 0 && finish === 'length', `streamed malformed tool call stays content: ${JSON.stringify(text)}`);
  const none = await client.chat.completions.create({ model, messages, tools, tool_choice: 'none', ...greedy, max_tokens: 2 });
  check(none.choices[0].message.tool_calls === undefined, 'tool_choice none: no tool-call parsing');
  await expectError(400, 'tool_choice required', () => client.chat.completions.create({ model, messages, tools, tool_choice: 'required' }));
  await expectError(400, 'tool_choice a named function', () => client.chat.completions.create({ model, messages, tools,
    tool_choice: { type: 'function', function: { name: 'get_weather' } } }));
}
// ---- bad requests: OpenAI errors with the right status ----
await expectError(404, 'unknown model', () => client.completions.create({ model: 'no-such-model', prompt: 'x', max_tokens: 1 }));
await expectError(400, 'max_tokens 0', () => client.completions.create({ model, prompt: 'x', max_tokens: 0 }));
await expectError(400, 'max_tokens over the context', () => client.completions.create({ model, prompt: 'x', max_tokens: 10_000_000 }));
await expectError(400, 'prompt longer than max model len', () => client.completions.create({ model, prompt: ids(9000, 3), max_tokens: 1 }));
await expectError(400, 'negative temperature', () => client.completions.create({ model, prompt: 'x', temperature: -0.5 }));
await expectError(400, 'top_p 0', () => client.completions.create({ model, prompt: 'x', top_p: 0 }));
await expectError(400, 'messages not an array', () => client.chat.completions.create({ model, messages: 'hello' }));
await expectError(400, 'message content a number', () => client.chat.completions.create({ model, messages: [{ role: 'user', content: 42 }] }));
await expectError(400, 'message without role', () => client.chat.completions.create({ model, messages: [{ content: 'hi' }] }));
await expectError(400, 'empty prompt', () => client.completions.create({ model, prompt: '', max_tokens: 1 }));
await expectError(400, 'token id past the vocabulary', () => client.completions.create({ model, prompt: [1, 2, 99999999], max_tokens: 1 }));
await expectError(400, 'n 0', () => client.completions.create({ model, prompt: 'x', n: 0 }));
await expectError(400, 'n over the cap', () => client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], n: 1000 }));
await expectError(400, 'repetition_penalty 0', () => client.completions.create({ model, prompt: 'x', repetition_penalty: 0 }));
await expectError(400, 'presence_penalty 2.5', () => client.completions.create({ model, prompt: 'x', presence_penalty: 2.5 }));
await expectError(400, 'frequency_penalty -2.5', () => client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], frequency_penalty: -2.5 }));
await expectError(400, 'min_p 1.5', () => client.completions.create({ model, prompt: 'x', min_p: 1.5 }));
// What the server does not honour is refused by name through the client too, never ignored.
const refusedParam = async (what, param, fn) => {
  try {
    await fn();
    check(false, `${what}: expected HTTP 400, got success`);
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === 400 && e.param === param,
          `${what}: expected HTTP 400 naming ${param}, got ${e.status} param ${e.param}: ${e.message}`);
  }
};
const userMsg = [{ role: 'user', content: 'x' }];
await refusedParam('response_format json_object', 'response_format', () =>
  client.chat.completions.create({ model, messages: userMsg, response_format: { type: 'json_object' } }));
await refusedParam('response_format json_schema', 'response_format', () =>
  client.chat.completions.create({ model, messages: userMsg, response_format: {
    type: 'json_schema', json_schema: { name: 'w', schema: { type: 'object', properties: { a: { type: 'string' } } } } } }));
await refusedParam('an unknown field', 'frobnicate', () =>
  client.completions.create({ model, prompt: 'x', max_tokens: 1, frobnicate: true }));
await refusedParam('an unknown stream option', 'stream_options', () =>
  client.chat.completions.create({ model, messages: userMsg, stream: true,
    stream_options: { include_usage: true, continuous_usage_stats: true } }));
await expectError(400, 'logit_bias id past the vocabulary', () => client.completions.create({ model, prompt: 'x', logit_bias: { 99999999: 1 } }));
await expectError(400, 'logit_bias 200', () => client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], logit_bias: { 5: 200 } }));
await expectError(401, 'wrong API key', () => new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'wrong', maxRetries: 0 }).models.list());
// ---- models ----
{
  const m = await client.models.list();
  check(m.data.length === 1 && m.data[0].id === model, 'models list');
}

fs.writeFileSync(outPath, JSON.stringify(answers, null, 1));
if (failures) { console.error(`${failures} check(s) failed`); process.exit(1); }
console.log('openai client: all checks passed');
