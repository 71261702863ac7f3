// What the engine measures for /metrics (rendered by server/prometheus.cpp under vLLM's
// names). Written by the engine loop, read by HTTP threads: Engine guards it with a mutex
// and hands out copies.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cpinfer {

// A cumulative histogram with fixed upper bounds (Prometheus semantics: bucket i counts
// observations <= bounds[i]; +Inf is count).
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // [bounds.size()]: observations in (bounds[i-1], bounds[i]]
  double sum = 0;
  uint64_t count = 0;
  explicit Histogram(std::vector<double> b = {}) : bounds(std::move(b)), counts(bounds.size()) {}
  void observe(double v);
};

struct EngineMetrics {
  // vLLM's bucket bounds (vllm/v1/metrics/loggers.py).
  Histogram ttft{{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                  5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}};
  Histogram itl{{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
                 7.5, 10.0, 20.0, 40.0, 80.0}};
  Histogram e2e{{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}};
  uint64_t prompt_tokens = 0, generation_tokens = 0, preemptions = 0, steps = 0;
  // --step-time-target-ms: steps whose prompt chunks the target held back, and the prompt
  // tokens a step beside decodes may carry now (0 when no target is set).
  uint64_t steps_held_by_time_target = 0;
  int64_t step_prompt_allowance = 0;
  // Prefix cache, in tokens, over requests' first admissions: looked up and found.
  uint64_t prefix_cache_queries = 0, prefix_cache_hits = 0;
  std::map<std::string, uint64_t> finished;  // finish reason -> requests
  int64_t running = 0, waiting = 0;
  // Per context-parallel rank R (index): pages the scheduler counts as used, the pool size,
  // and the free pages each rank last reported itself (an audit run when the engine goes
  // idle; -1 before the first). Under TP, the TP ranks of one R report the same pool: the
  // audit keeps the minimum.
  // kv_cached_pages: pages only the prefix cache holds (free for the taking, LRU first).
  std::vector<int64_t> kv_used_pages, kv_cached_pages, kv_audited_free_pages;
  int64_t kv_pages_per_rank = 0;
  uint64_t kv_audit_mismatches = 0;  // audits where a rank's pool disagreed with the account
};

}  // namespace cpinfer
