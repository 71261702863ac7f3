// /metrics: the engine's metrics in the Prometheus text format (version 0.0.4), under
// vLLM's names where vLLM has one (vllm:time_to_first_token_seconds, ...) and cpinfer:*
// for what it does not (per-rank KV pages and their audit).
#pragma once
#include <string>

#include "engine/engine_metrics.h"

namespace cpinfer {

std::string render_prometheus(const EngineMetrics& m, const std::string& model_name);

}  // namespace cpinfer
