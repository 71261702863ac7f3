// /metrics: the engine's metrics in the Prometheus text format (version 0.0.4), under
// vLLM's names where vLLM has one (vllm:time_to_first_token_seconds, ...) and cpinfer:*
// for what it does not (per-rank KV pages and their audit).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "engine/engine_metrics.h"

namespace cpinfer {

std::string render_prometheus(const EngineMetrics& m, const std::string& model_name);

// cpinfer:http_error_responses_total{model_name, status}: responses sent with an error
// status (400 refused request, 401 bad key, 413 body too large, 503 engine failed, ...),
// from a map status -> count. One series per status seen so far; none before the first.
std::string render_error_responses(const std::map<int, uint64_t>& by_status,
                                   const std::string& model_name);

// The serving process's memory (rank 0's: the one with the HTTP server):
// process_resident_memory_bytes (Prometheus's standard name), and where the C library can
// tell, cpinfer:heap_in_use_bytes and cpinfer:heap_free_bytes (core/memory.h HeapStats).
std::string render_process_memory();

}  // namespace cpinfer
