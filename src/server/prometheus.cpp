#include "server/prometheus.h"

#include <fmt/format.h>

#include "core/memory.h"

namespace cpinfer {

namespace {

// Label values escape backslash, double quote and newline.
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string num(double v) { return fmt::format("{}", v); }

void header(std::string& o, const char* name, const char* type, const char* help) {
  o += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void histogram(std::string& o, const char* name, const char* help, const Histogram& h,
               const std::string& labels) {
  header(o, name, "histogram", help);
  uint64_t cum = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cum += h.counts[i];
    o += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, num(h.bounds[i]), cum);
  }
  o += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, h.count);
  o += fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels, num(h.sum), name, labels,
                   h.count);
}

}  // namespace

std::string render_prometheus(const EngineMetrics& m, const std::string& model_name) {
  const std::string L = fmt::format("model_name=\"{}\"", escape(model_name));
  std::string o;
  header(o, "vllm:num_requests_running", "gauge", "Requests in model execution batches.");
  o += fmt::format("vllm:num_requests_running{{{}}} {}\n", L, m.running);
  header(o, "vllm:num_requests_waiting", "gauge", "Requests waiting to be processed.");
  o += fmt::format("vllm:num_requests_waiting{{{}}} {}\n", L, m.waiting);
  header(o, "vllm:kv_cache_usage_perc", "gauge",
         "KV-cache usage per context-parallel rank (1 means 100 percent).");
  for (size_t r = 0; r < m.kv_used_pages.size(); ++r)
    o += fmt::format("vllm:kv_cache_usage_perc{{{},rank=\"{}\"}} {}\n", L, r,
                     num(m.kv_pages_per_rank ? double(m.kv_used_pages[r]) / double(m.kv_pages_per_rank) : 0.0));
  header(o, "cpinfer:kv_pages_total", "gauge", "KV-cache pages in each rank's pool.");
  o += fmt::format("cpinfer:kv_pages_total{{{}}} {}\n", L, m.kv_pages_per_rank);
  header(o, "cpinfer:kv_pages_used", "gauge",
         "KV-cache pages in use per context-parallel rank (the scheduler's account).");
  for (size_t r = 0; r < m.kv_used_pages.size(); ++r)
    o += fmt::format("cpinfer:kv_pages_used{{{},rank=\"{}\"}} {}\n", L, r, m.kv_used_pages[r]);
  header(o, "cpinfer:kv_pages_free_audited", "gauge",
         "Free KV-cache pages each rank reported at the last audit (-1: none yet); audits run "
         "when the engine goes idle.");
  for (size_t r = 0; r < m.kv_audited_free_pages.size(); ++r)
    o += fmt::format("cpinfer:kv_pages_free_audited{{{},rank=\"{}\"}} {}\n", L, r,
                     m.kv_audited_free_pages[r]);
  header(o, "cpinfer:kv_audit_mismatches_total", "counter",
         "Audits where a rank's free pages disagreed with the scheduler's account.");
  o += fmt::format("cpinfer:kv_audit_mismatches_total{{{}}} {}\n", L, m.kv_audit_mismatches);
  header(o, "vllm:num_preemptions_total", "counter", "Cumulative number of preemptions.");
  o += fmt::format("vllm:num_preemptions_total{{{}}} {}\n", L, m.preemptions);
  header(o, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  o += fmt::format("vllm:prompt_tokens_total{{{}}} {}\n", L, m.prompt_tokens);
  header(o, "vllm:prefix_cache_queries_total", "counter",
         "Prefix cache queries, in terms of prompt tokens looked up.");
  o += fmt::format("vllm:prefix_cache_queries_total{{{}}} {}\n", L, m.prefix_cache_queries);
  header(o, "vllm:prefix_cache_hits_total", "counter",
         "Prefix cache hits, in terms of prompt tokens found in the cache.");
  o += fmt::format("vllm:prefix_cache_hits_total{{{}}} {}\n", L, m.prefix_cache_hits);
  header(o, "cpinfer:kv_pages_cached", "gauge",
         "KV-cache pages held only by the prefix cache per context-parallel rank (reclaimed "
         "least recently used first when sequences need pages).");
  for (size_t r = 0; r < m.kv_cached_pages.size(); ++r)
    o += fmt::format("cpinfer:kv_pages_cached{{{},rank=\"{}\"}} {}\n", L, r, m.kv_cached_pages[r]);
  header(o, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.");
  o += fmt::format("vllm:generation_tokens_total{{{}}} {}\n", L, m.generation_tokens);
  header(o, "cpinfer:engine_steps_total", "counter", "Engine steps run.");
  o += fmt::format("cpinfer:engine_steps_total{{{}}} {}\n", L, m.steps);
  header(o, "cpinfer:steps_held_by_time_target_total", "counter",
         "Steps whose prompt chunks --step-time-target-ms held back.");
  o += fmt::format("cpinfer:steps_held_by_time_target_total{{{}}} {}\n", L,
                   m.steps_held_by_time_target);
  header(o, "cpinfer:step_prompt_allowance_tokens", "gauge",
         "Prompt tokens a step beside running decodes may carry under --step-time-target-ms "
         "(0: no target).");
  o += fmt::format("cpinfer:step_prompt_allowance_tokens{{{}}} {}\n", L, m.step_prompt_allowance);
  header(o, "vllm:request_success_total", "counter", "Count of finished requests by reason.");
  for (const auto& [reason, n] : m.finished)
    o += fmt::format("vllm:request_success_total{{{},finished_reason=\"{}\"}} {}\n", L,
                     escape(reason), n);
  histogram(o, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
            m.ttft, L);
  histogram(o, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
            m.itl, L);
  histogram(o, "vllm:e2e_request_latency_seconds",
            "Histogram of end to end request latency in seconds.", m.e2e, L);
  return o;
}

std::string render_error_responses(const std::map<int, uint64_t>& by_status,
                                   const std::string& model_name) {
  const std::string L = fmt::format("model_name=\"{}\"", escape(model_name));
  std::string o;
  header(o, "cpinfer:http_error_responses_total", "counter",
         "HTTP responses sent with an error status (4xx/5xx), by status.");
  for (const auto& [status, n] : by_status)
    o += fmt::format("cpinfer:http_error_responses_total{{{},status=\"{}\"}} {}\n", L, status, n);
  return o;
}

std::string render_process_memory() {
  std::string o;
  header(o, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  o += fmt::format("process_resident_memory_bytes {}\n", current_rss_bytes());
  HeapStats h;
  if (heap_stats(&h)) {
    header(o, "cpinfer:heap_in_use_bytes", "gauge",
           "Bytes of the C heap in chunks the server holds (all malloc arenas, mmap-ed chunks "
           "included).");
    o += fmt::format("cpinfer:heap_in_use_bytes {}\n", h.in_use_bytes);
    header(o, "cpinfer:heap_free_bytes", "gauge",
           "Free bytes malloc keeps in its arenas (freed, not yet returned to the system).");
    o += fmt::format("cpinfer:heap_free_bytes {}\n", h.free_bytes);
  }
  return o;
}

}  // namespace cpinfer
