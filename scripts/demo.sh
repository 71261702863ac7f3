#!/usr/bin/env bash
# Builds cpinfer, makes the default model (synthetic Qwen2.5-0.5B in Hugging Face
# format, bf16, full depth) once, and generates text from a prompt on it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
MODEL=${MODEL:-models/qwen2.5-0.5b}
if [[ ! -f "$MODEL/model.safetensors" ]]; then
  ./build/cpinfer make-model --preset qwen2.5-0.5b --out "$MODEL"
fi
PROMPT=${PROMPT:-"The history of long-context language models begins with"}
echo "== cpinfer generate --model $MODEL (greedy, 32 tokens; the weights are random, so the text is too)"
./build/cpinfer generate --model "$MODEL" --prompt "$PROMPT" --max-tokens 32 --ignore-eos --json
