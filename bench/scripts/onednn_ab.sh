#!/usr/bin/env bash
# Our linear() against oneDNN's matmul (Debian's libdnnl-dev, installed here if missing) on
# Qwen2.5-0.5B's prefill shapes, M = 64, 512 and 2048, 1 and 2 threads, in one run of
# build/bench/linear_bench (not part of the test suite). Ours: f32 and bf16 weights, f32
# activations, the path linear() picks (fp32 FMA; for bf16 weights on CPUs where
# --bf16-math auto picks dot products, the bf16-dot GEMM, activations rounded to bf16). oneDNN: f32 x f32, and bf16 x bf16 -> f32
# (activations rounded to bf16), weights reordered once into its own packed layout; its
# label names the kernel it chose (e.g. brg:avx512_core_bf16). Best of REPS repetitions of
# each (medians alongside), to $OUT (Google Benchmark JSON, default
# bench/results/onednn_ab.json). ISA: which of our paths to run (default: avx512 where the CPU
# has AVX-512F, avx2 otherwise).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/results/onednn_ab.json}
REPS=${REPS:-3}
ISA=${ISA:-$(grep -qw avx512f /proc/cpuinfo && echo avx512 || echo avx2)}
if ! dpkg-query -W -f='${Status}' libdnnl-dev 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get install -y -qq --no-install-recommends libdnnl-dev >/dev/null
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target linear_bench >/dev/null
mkdir -p "$(dirname "$OUT")"
lscpu | grep -E "Model name|Flags" | sed 's/Flags:/Flags (abridged):/' | cut -c1-200
build/bench/linear_bench \
  --benchmark_filter="^(onednn/(f32|bf16)|$ISA/(f32|bf16))/(qkv|o|gate_up|down)/K:[0-9]+/N:[0-9]+/M:(64|512|2048)/threads:[12]/min_time" \
  --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
  --benchmark_out="$OUT" --benchmark_out_format=json | { grep -E "_max|_median|ERROR" || true; }
