#!/usr/bin/env bash
# Running streams while a long prompt arrives, under context parallelism (not part of the
# test suite). `cpinfer serve` under pcp 2 (LAYOUT, default "-pcp 2"); 8 streams decode
# (`bench serve`, 8 prompts of 64 tokens, OUTLEN tokens each, all at once); DELAY seconds
# later one LONG-token prompt arrives (a second `bench serve`). Scenarios (SCENARIOS), per repeat:
#   alone      the 8 streams without the long prompt (the ITL baseline);
#   unchunked  --no-enable-chunked-prefill: the long prompt in one step (the behaviour
#              before chunked prefill over a sharded cache existed);
#   chunked    chunked prefill (the default) with --max-num-batched-tokens BUDGET;
#   timed      chunked prefill with --step-time-target-ms TARGET_MS (budget BUDGET);
#   prompt_alone  the long prompt alone, chunked as in `chunked` (no streams): with
#              CPINFER_LOG=debug and SERVE_LOG_DIR, bench/scripts/mixed_step_cost.js compares
#              its steps with a `chunked` run's to give the decodes' cost inside a step.
# Reports the streams' p50/p99 ITL and the long prompt's TTFT; other processes' CPU time
# during each run (from /proc/stat, all CPUs minus this job) is stored with the result.
# One JSON line per run to $OUT (default bench/results/cp_long_prompt_itl.jsonl).
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib/wait_for_server.sh"
source "$(dirname "$0")/../../scripts/lib/cpu_time.sh"
cd "$(dirname "$0")/../.."
CPINFER=${CPINFER:-build/cpinfer}
OUT=${OUT:-bench/results/cp_long_prompt_itl.jsonl}
MODEL=${MODEL:-models/tiny-8l}
LAYOUT=${LAYOUT-"-pcp 2"}  # set and empty: one rank
LONG=${LONG:-16384}
OUTLEN=${OUTLEN:-400}
DELAY=${DELAY:-3}
BUDGET=${BUDGET:-512}
REPEATS=${REPEATS:-3}
TARGET_MS=${TARGET_MS:-60}
SCENARIOS=${SCENARIOS:-"alone unchunked chunked timed"}
# SERVE_EXTRA: more `serve` arguments, word-split (e.g. "--generation-config vllm": requests
# then get OpenAI's defaults for what they omit, so the streams' temperature 0 is plain greedy,
# without the model's repetition_penalty).
SERVE_EXTRA=${SERVE_EXTRA:-}
# SERVE_LOG_DIR: keep each server's log there (serve-SCENARIO-REPEAT.log); with CPINFER_LOG=debug
# it has one line per engine step (time, decodes, prompt tokens, step-time allowance).
SERVE_LOG_DIR=${SERVE_LOG_DIR:-}
mkdir -p "$(dirname "$OUT")" models
[[ -f "$MODEL/config.json" ]] ||
  "$CPINFER" make-model --preset tiny --num-layers 8 --dtype bf16 --seed 3 --out "$MODEL" 2>/dev/null
for rep in $(seq "$REPEATS"); do
  for scen in $SCENARIOS; do
    extra=(--max-num-batched-tokens "$BUDGET")
    [[ $scen == unchunked ]] && extra=(--no-enable-chunked-prefill)
    [[ $scen == timed ]] && extra+=(--step-time-target-ms "$TARGET_MS")
    log=$(mktemp)
    # shellcheck disable=SC2086
    "$CPINFER" serve "$MODEL" --port 0 --served-model-name m --max-model-len $((LONG + 64)) \
      --kv-cache-space 0.5 $LAYOUT "${extra[@]}" $SERVE_EXTRA >"$log" 2>&1 &
    server=$!
    wait_for_server "$server" "$log" "$scen" 120
    "$CPINFER" bench serve --url "$URL" --num-prompts 2 --input-len 16 --output-len 4 --json >/dev/null
    b0=$(busy_jiffies); s0=$(tree_jiffies "$server")
    streams=$(mktemp); long=$(mktemp)
    sp=
    if [[ $scen != prompt_alone ]]; then
      "$CPINFER" bench serve --url "$URL" --num-prompts 8 --input-len 64 --output-len "$OUTLEN" \
        --seed "$rep" --json >"$streams" &
      sp=$!
    else
      echo null >"$streams"
    fi
    if [[ $scen != alone ]]; then
      [[ -n $sp ]] && sleep "$DELAY"
      "$CPINFER" bench serve --url "$URL" --num-prompts 1 --input-len "$LONG" --output-len 4 \
        --seed $((rep + 100)) --timeout 3600 --json >"$long"
    else
      echo null >"$long"
    fi
    [[ -n $sp ]] && wait "$sp"
    b1=$(busy_jiffies); s1=$(tree_jiffies "$server")
    echo "{\"scenario\":\"$scen\",\"serve_extra\":\"$SERVE_EXTRA\",\"layout\":\"$LAYOUT\",\"budget\":$BUDGET,\"target_ms\":$([[ $scen == timed ]] && echo "$TARGET_MS" || echo null),\"long\":$LONG,\"repeat\":$rep,\"cpu\":\"$(lscpu | sed -n 's/^Model name: *//p')\",\"busy_jiffies\":$((b1 - b0)),\"server_jiffies\":$((s1 - s0)),\"streams\":$(cat "$streams"),\"long_prompt\":$(cat "$long")}" | tee -a "$OUT"
    kill -TERM "$server"; wait "$server" 2>/dev/null || true
    if [[ -n $SERVE_LOG_DIR ]]; then mkdir -p "$SERVE_LOG_DIR"; cp "$log" "$SERVE_LOG_DIR/serve-$scen-$rep.log"; fi
    rm -f "$log" "$streams" "$long"
  done
done
