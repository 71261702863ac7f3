// The summary of a `bench serve` run: the metrics of `vllm bench serve` (same names, same
// definitions) as JSON, and as its human-readable table.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cli/bench_serve.h"
#include "core/stats.h"

namespace cpinfer {

namespace {

// mean/median/p90/p99/max of `values_s`, in milliseconds, as `<stat>_<name>_ms` (max: the
// one stall that a percentile of many samples hides).
void add_latency_stats(nlohmann::json& j, const std::string& name,
                       const std::vector<double>& values_s) {
  std::vector<double> ms(values_s.size());
  for (size_t i = 0; i < ms.size(); ++i) ms[i] = values_s[i] * 1e3;
  j["mean_" + name + "_ms"] = mean(ms);
  j["median_" + name + "_ms"] = median(ms);
  j["p90_" + name + "_ms"] = percentile(ms, 90);
  j["p99_" + name + "_ms"] = percentile(ms, 99);
  j["max_" + name + "_ms"] = ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end());
}

constexpr size_t kMaxErrors = 5;

nlohmann::json null_if_empty(double x, const std::vector<double>& samples) {
  return samples.empty() ? nlohmann::json(nullptr) : nlohmann::json(x);
}

// The prefix-repetition fields (see bench_serve.h): how much of what could be served from
// the prefix cache was, and what that did to TTFT. Requests i < num_prefixes are the first
// of their prefix (round robin), so they measure a cold prefill and the others a warm one.
void add_prefix_repetition(nlohmann::json& j, const BenchServeArgs& args,
                           const BenchServeResult& r, int64_t total_cached) {
  const PrefixRepetition& p = args.prefix_repetition;
  j["prefix_repetition"] = {{"num_prefixes", p.num_prefixes},
                            {"prefix_len", p.prefix_len},
                            {"suffix_len", p.suffix_len},
                            {"output_len", effective_output_len(args)}};
  int64_t repeated = 0;
  std::vector<double> first_ms, repeated_ms;
  for (size_t i = 0; i < r.requests.size(); ++i) {
    const RequestResult& q = r.requests[i];
    if (!q.success) continue;
    if (int64_t(i) < p.num_prefixes) {
      first_ms.push_back(q.ttft_s * 1e3);
    } else {
      ++repeated;
      repeated_ms.push_back(q.ttft_s * 1e3);
    }
  }
  const int64_t shareable = p.prefix_len * repeated;
  j["shareable_tokens"] = shareable;
  j["hit_rate_of_shareable"] = shareable > 0
                                   ? nlohmann::json(double(total_cached) / double(shareable))
                                   : nlohmann::json(nullptr);
  j["mean_ttft_first_of_prefix_ms"] = null_if_empty(mean(first_ms), first_ms);
  j["median_ttft_first_of_prefix_ms"] = null_if_empty(median(first_ms), first_ms);
  j["mean_ttft_repeated_prefix_ms"] = null_if_empty(mean(repeated_ms), repeated_ms);
  j["median_ttft_repeated_prefix_ms"] = null_if_empty(median(repeated_ms), repeated_ms);
}

}  // namespace

nlohmann::json bench_serve_json(const BenchServeArgs& args, const BenchServeResult& r) {
  int64_t completed = 0, failed = 0, input_tokens = 0, output_tokens = 0, cached_tokens = 0;
  std::vector<double> ttft, tpot, itl, e2el;
  std::vector<std::string> errors;
  for (const RequestResult& q : r.requests) {
    if (!q.success) {
      ++failed;
      if (errors.size() < kMaxErrors &&
          std::find(errors.begin(), errors.end(), q.error) == errors.end())
        errors.push_back(q.error);
      continue;
    }
    ++completed;
    input_tokens += q.input_tokens;
    output_tokens += q.output_tokens;
    cached_tokens += q.cached_tokens;
    ttft.push_back(q.ttft_s);
    e2el.push_back(q.e2el_s);
    if (q.output_tokens > 1) tpot.push_back((q.e2el_s - q.ttft_s) / double(q.output_tokens - 1));
    itl.insert(itl.end(), q.itl_s.begin(), q.itl_s.end());
  }
  const double d = r.duration_s > 0 ? r.duration_s : 0.0;
  auto per_s = [d](double x) { return d > 0 ? x / d : 0.0; };
  nlohmann::json j;
  j["completed"] = completed;
  j["failed"] = failed;
  j["duration_s"] = d;
  j["total_input_tokens"] = input_tokens;
  j["total_output_tokens"] = output_tokens;
  j["request_throughput"] = per_s(double(completed));
  j["output_throughput"] = per_s(double(output_tokens));
  j["total_token_throughput"] = per_s(double(input_tokens + output_tokens));
  add_latency_stats(j, "ttft", ttft);
  add_latency_stats(j, "tpot", tpot);
  add_latency_stats(j, "itl", itl);
  add_latency_stats(j, "e2el", e2el);
  j["max_concurrent_requests"] = r.max_concurrent_requests;
  j["num_prompts"] = args.num_prompts;
  j["input_len"] = effective_input_len(args);
  j["output_len"] = effective_output_len(args);
  j["request_rate"] =
      std::isinf(args.request_rate) ? nlohmann::json(nullptr) : nlohmann::json(args.request_rate);
  j["burstiness"] = args.burstiness;
  j["max_concurrency"] =
      args.max_concurrency > 0 ? nlohmann::json(args.max_concurrency) : nlohmann::json(nullptr);
  j["seed"] = args.seed;
  j["model"] = r.model;
  j["url"] = args.url;
  j["errors"] = errors;
  j["dataset_name"] = dataset_name(args.dataset);
  j["total_cached_tokens"] = cached_tokens;
  j["prefix_cache_hit_rate"] =
      input_tokens > 0 ? double(cached_tokens) / double(input_tokens) : 0.0;
  if (args.dataset == BenchDataset::PrefixRepetition)
    add_prefix_repetition(j, args, r, cached_tokens);
  return j;
}

std::string bench_serve_table(const nlohmann::json& j) {
  std::string s;
  auto banner = [&](const std::string& title, char fill) {  // centred like Python's "^"
    const std::string t = title.empty() ? "" : " " + title + " ";
    const size_t pad = t.size() < 50 ? 50 - t.size() : 0;
    s += std::string(pad / 2, fill) + t + std::string(pad - pad / 2, fill) + "\n";
  };
  auto row = [&](const std::string& label, const nlohmann::json& v) {
    std::string value = v.is_null()           ? "inf"
                        : v.is_number_float() ? fmt::format("{:.2f}", v.get<double>())
                        : v.is_number()       ? std::to_string(v.get<int64_t>())
                        : v.is_string()       ? v.get<std::string>()
                                              : v.dump();
    s += fmt::format("{:<40} {:<10}\n", label, value);
  };
  banner("Serving Benchmark Result", '=');
  row("Successful requests:", j["completed"]);
  row("Failed requests:", j["failed"]);
  if (!j["max_concurrency"].is_null()) row("Maximum request concurrency:", j["max_concurrency"]);
  row("Request rate (req/s):", j["request_rate"]);
  row("Peak concurrent requests:", j["max_concurrent_requests"]);
  row("Benchmark duration (s):", j["duration_s"]);
  row("Total input tokens:", j["total_input_tokens"]);
  row("Total generated tokens:", j["total_output_tokens"]);
  row("Request throughput (req/s):", j["request_throughput"]);
  row("Output token throughput (tok/s):", j["output_throughput"]);
  row("Total token throughput (tok/s):", j["total_token_throughput"]);
  const struct {
    const char* key;
    const char* label;
    const char* title;
  } sections[] = {
      {"ttft", "TTFT", "Time to First Token"},
      {"tpot", "TPOT", "Time per Output Token (excl. 1st token)"},
      {"itl", "ITL", "Inter-token Latency"},
      {"e2el", "E2EL", "End-to-end Latency"},
  };
  for (const auto& sec : sections) {
    banner(sec.title, '-');
    row(fmt::format("Mean {} (ms):", sec.label), j[fmt::format("mean_{}_ms", sec.key)]);
    row(fmt::format("Median {} (ms):", sec.label), j[fmt::format("median_{}_ms", sec.key)]);
    row(fmt::format("P90 {} (ms):", sec.label), j[fmt::format("p90_{}_ms", sec.key)]);
    row(fmt::format("P99 {} (ms):", sec.label), j[fmt::format("p99_{}_ms", sec.key)]);
  }
  if (j.contains("total_cached_tokens")) {  // absent from summaries of older versions
    auto percent = [](const nlohmann::json& v) {
      return v.is_null() ? nlohmann::json("n/a") : nlohmann::json(100.0 * v.get<double>());
    };
    auto ms = [](const nlohmann::json& v) { return v.is_null() ? nlohmann::json("n/a") : v; };
    banner("Prefix Cache", '-');
    row("Dataset:", j["dataset_name"]);
    row("Cached prompt tokens:", j["total_cached_tokens"]);
    row("Prefix cache hit rate (%):", percent(j["prefix_cache_hit_rate"]));
    if (j.contains("shareable_tokens")) {
      row("Shareable prompt tokens:", j["shareable_tokens"]);
      row("Hit rate of shareable (%):", percent(j["hit_rate_of_shareable"]));
      row("Median TTFT, first of prefix (ms):", ms(j["median_ttft_first_of_prefix_ms"]));
      row("Median TTFT, repeated prefix (ms):", ms(j["median_ttft_repeated_prefix_ms"]));
    }
  }
  banner("", '=');
  return s;
}

}  // namespace cpinfer
