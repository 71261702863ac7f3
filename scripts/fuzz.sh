#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz for a given time each.
#
#   bash scripts/fuzz.sh [TARGET|all] [SECONDS]        (default: all, 60 s each)
#   FUZZ_JOBS=2 bash scripts/fuzz.sh all 300          (two targets at a time)
#
# Run one fuzz.sh at a time (FUZZ_JOBS for parallel targets): two would run ninja in
# build-fuzz at once.
#
# Builds build-fuzz (clang, -DCPINFER_FUZZ=ON; installs clang and libclang-rt-14-dev with
# apt if missing) and runs each target with -max_total_time, on a working corpus outside git
# (build-fuzz/corpus/<target>, which grows run after run) read together with the checked-in
# seeds (tests/fuzz/corpus/<target>) and regressions (tests/fuzz/regressions/<target>).
# Crashes, timeouts and OOMs go to build-fuzz/crashes/<target>/ (crash-*, timeout-*, oom-*,
# leak-*); logs to build-fuzz/logs/<target>.log. Prints one summary line per target and
# exits non-zero if any target found something. Reproduce a finding with
#   build-fuzz/fuzz/fuzz_<target> build-fuzz/crashes/<target>/crash-...
# then fix it and copy the input to tests/fuzz/regressions/<target>/ (README.md there: one
# line per input), where ctest's fuzz_replay.<target> replays it in every normal build.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(safetensors_header model_config tokenizer_json tokenizer_encode_decode chat_template
         openai_request gguf tool_call_parser)
what=${1:-all}
secs=${2:-60}
BUILD=${CPINFER_FUZZ_BUILD:-build-fuzz}
JOBS=${FUZZ_JOBS:-1}

if [[ "$what" == all ]]; then
  run=("${TARGETS[@]}")
elif [[ " ${TARGETS[*]} " == *" $what "* ]]; then
  run=("$what")
else
  echo "fuzz.sh: unknown target '$what' (targets: ${TARGETS[*]}, or all)" >&2
  exit 2
fi
[[ "$secs" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number, got '$secs'" >&2; exit 2; }

# ---- toolchain: clang + libFuzzer (Debian: clang, libclang-rt-14-dev) ----------------
missing=()
for p in clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[fuzz] installing apt packages: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- build ------------------------------------------------------------------------------
if [[ ! -f "$BUILD/build.ninja" ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCPINFER_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
ninja -C "$BUILD" $(printf 'fuzz_%s ' "${run[@]}") >/dev/null

# ---- run --------------------------------------------------------------------------------
mkdir -p "$BUILD/logs"
fuzz_one() {
  local t=$1
  local corpus="$BUILD/corpus/$t" crashes="$BUILD/crashes/$t" log="$BUILD/logs/$t.log"
  mkdir -p "$corpus" "$crashes"
  local dirs=("$corpus" "tests/fuzz/corpus/$t")
  [[ -d "tests/fuzz/regressions/$t" ]] && dirs+=("tests/fuzz/regressions/$t")
  # -timeout: one input running 10 s is a hang; -malloc_limit_mb: one allocation over 1 GiB
  # is a finding; -rss_limit_mb: the whole process over 2.5 GiB.
  "$BUILD/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2560 \
    -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$crashes/" \
    "${dirs[@]}" >"$log" 2>&1 || true
}
pids=()
for t in "${run[@]}"; do
  echo "[fuzz] $t: ${secs}s (log $BUILD/logs/$t.log)"
  fuzz_one "$t" &
  pids+=($!)
  if ((${#pids[@]} >= JOBS)); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]+"${pids[@]}"}"; do wait "$p"; done

# ---- summary ----------------------------------------------------------------------------
found=0
printf '\n%-26s %10s %8s %8s %8s %7s  %s\n' target execs "time_s" cov ft corpus findings
for t in "${run[@]}"; do
  log="$BUILD/logs/$t.log"
  execs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | awk '{print $2}' | tail -1 || true)
  time_s=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | awk '{print $5}' | tail -1 || true)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | awk '{print $2}' || true)
  ft=$(grep -oE 'ft: [0-9]+' <<<"$last" | awk '{print $2}' || true)
  corp=$(grep -oE 'corp: [0-9]+' <<<"$last" | awk '{print $2}' || true)
  if [[ -z "$execs" ]]; then execs=$(grep -oE '^#[0-9]+' <<<"$last" | tr -d '#'); fi
  findings=$(grep -oE "Test unit written to [^ ]+" "$log" | awk '{print $5}' | tr '\n' ' ' || true)
  [[ -n "$findings" ]] && found=1
  printf '%-26s %10s %8s %8s %8s %7s  %s\n' "$t" "${execs:-?}" "${time_s:-?}" "${cov:-?}" \
    "${ft:-?}" "${corp:-?}" "${findings:-none}"
done
exit $found
