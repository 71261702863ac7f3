#!/usr/bin/env node
// Reference chat template renderings from @huggingface/jinja (the Jinja port that
// transformers.js uses) for the chat template golden test.
//
//   node render_chat_reference.js CONVERSATIONS.json MODEL_DIR...
//
// For each MODEL_DIR (holding a tokenizer_config.json), each conversation of
// CONVERSATIONS.json ({"date_string", "conversations": [{"name", "messages", "tools"?,
// "extra"?}]}) and add_generation_prompt false then true, prints one JSON array of
// {"model_dir", "conversation", "add_generation_prompt", "output"} or {..., "error"}.
//
// The context mirrors cpinfer's ChatTemplate::render: the messages normalised as vLLM does
// (content null/missing -> "", text parts joined with "\n", tool_calls: null dropped, string
// function.arguments parsed), add_generation_prompt, tools (or null), documents: null,
// bos_token / eos_token when the config has them, date_string, then the conversation's extra.
'use strict';
const fs = require('fs');
const path = require('path');
const { Template } = require('@huggingface/jinja');

function specialToken(cfg, key) {
  const t = cfg[key];
  if (t === undefined || t === null) return null;
  if (typeof t === 'string') return t;
  return t.content;
}

function chatTemplate(cfg) {
  const t = cfg.chat_template;
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) {
    const d = t.find((e) => e.name === 'default');
    if (d) return d.template;
  }
  throw new Error('no chat template');
}

function normalize(messages) {
  return messages.map((m) => {
    const out = {};
    for (const [k, v] of Object.entries(m)) {
      if (k === 'content') {
        if (v === null) out.content = '';
        else if (Array.isArray(v)) out.content = v.map((p) => (typeof p === 'string' ? p : p.text)).join('\n');
        else out.content = v;
      } else if (k === 'tool_calls') {
        if (v === null) continue;
        out.tool_calls = v.map((c) => {
          const call = JSON.parse(JSON.stringify(c));
          if (call.function && typeof call.function.arguments === 'string') {
            call.function.arguments = JSON.parse(call.function.arguments);
          }
          return call;
        });
      } else {
        out[k] = v;
      }
    }
    if (!('content' in out)) out.content = '';
    return out;
  });
}

function main() {
  const [convPath, ...dirs] = process.argv.slice(2);
  if (!convPath || dirs.length === 0) {
    console.error('usage: node render_chat_reference.js CONVERSATIONS.json MODEL_DIR...');
    process.exit(2);
  }
  const fixture = JSON.parse(fs.readFileSync(convPath, 'utf8'));
  const results = [];
  for (const dir of dirs) {
    const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
    const template = new Template(chatTemplate(cfg));
    for (const conv of fixture.conversations) {
      for (const agp of [false, true]) {
        const ctx = {
          messages: normalize(conv.messages),
          add_generation_prompt: agp,
          tools: conv.tools === undefined ? null : conv.tools,
          documents: null,
        };
        const bos = specialToken(cfg, 'bos_token');
        const eos = specialToken(cfg, 'eos_token');
        if (bos !== null) ctx.bos_token = bos;
        if (eos !== null) ctx.eos_token = eos;
        ctx.date_string = fixture.date_string;
        Object.assign(ctx, conv.extra || {});
        const r = { model_dir: dir, conversation: conv.name, add_generation_prompt: agp };
        try {
          r.output = template.render(ctx);
        } catch (e) {
          r.error = String(e.message);
        }
        results.push(r);
      }
    }
  }
  process.stdout.write(JSON.stringify(results));
}

main();
