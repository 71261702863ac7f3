// `cpinfer bench serve`: an online serving benchmark client like `vllm bench serve`. It
// sends --num-prompts streamed /v1/completions requests of prompts of exact token ids (the
// random dataset, or prefix-repetition: shared prefixes, see bench_serve_workload.h) to
// an OpenAI-compatible server at their arrival times, at most --max-concurrency in
// flight, one thread per request, and measures each on the client's steady clock:
//   TTFT  request sent -> first content chunk (a chunk carrying a token, even one whose
//         text is "" because the token ends mid UTF-8 character)
//   ITL   gaps between successive content chunks
//   E2EL  request sent -> `data: [DONE]`
//   TPOT  (E2EL - TTFT) / (output tokens - 1), for requests with more than one token
// Output tokens are usage.completion_tokens (the number of content chunks when the server
// sends no usage); cached tokens are usage.prompt_tokens_details.cached_tokens, the prompt
// tokens a server with a prefix cache did not have to prefill. The CLI wrapper
// (bench_serve.cpp) prints bench_serve_json() as one line or bench_serve_table() for people.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cli/bench_serve_workload.h"

namespace cpinfer {

enum class BenchDataset {
  Random,            // input_len random ids per prompt
  PrefixRepetition,  // BenchServeArgs::prefix_repetition
};

// "random" or "prefix-repetition" (also vLLM's "prefix_repetition"); Error naming
// --dataset-name and the choices otherwise.
BenchDataset parse_dataset_name(const std::string& name);
// "random" or "prefix-repetition", as the summary reports it.
const char* dataset_name(BenchDataset d);

struct BenchServeArgs {
  std::string url;      // http://host:port
  std::string model;    // "": the first id GET /v1/models lists
  std::string api_key;  // "": no Authorization header
  int64_t num_prompts = 100;
  BenchDataset dataset = BenchDataset::Random;
  int64_t input_len = 1024;
  bool input_len_given = false;  // --input-len was on the command line: refused with
                                 // prefix-repetition, which it would not shape
  int64_t output_len = 128;
  PrefixRepetition prefix_repetition;  // used with BenchDataset::PrefixRepetition
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s; inf: all at once
  double burstiness = 1.0;      // gamma shape of the gaps; 1: Poisson
  int64_t max_concurrency = 0;  // 0: unlimited
  uint64_t seed = 0;
  int64_t vocab_size = 0;  // 0: large (ids in [1000, 30000)); see bench_serve_workload.h
  double timeout_s = 600;  // per request
  bool progress = false;   // a progress bar on stderr (drawn only when it is a terminal)
};

struct RequestResult {
  bool success = false;
  std::string error;
  int64_t input_tokens = 0;   // usage.prompt_tokens, else the prompt's length
  int64_t output_tokens = 0;  // usage.completion_tokens, else the content chunks
  int64_t cached_tokens = 0;  // usage.prompt_tokens_details.cached_tokens, else 0
  double ttft_s = 0, e2el_s = 0;
  std::vector<double> itl_s;
};

struct BenchServeResult {
  std::string model;                    // the model that was benchmarked
  double duration_s = 0;                // first request sent -> last one finished
  int64_t max_concurrent_requests = 0;  // peak requests in flight, as observed
  std::vector<RequestResult> requests;  // in send order (request i is prompt i)
};

// The prompt and output lengths the run sends: input_len and output_len for the random
// dataset; prefix_len + suffix_len and prefix_repetition.output_len (0: output_len) for
// prefix-repetition.
int64_t effective_input_len(const BenchServeArgs& args);
int64_t effective_output_len(const BenchServeArgs& args);

// Runs the benchmark. Throws Error on bad arguments (a malformed --url, ...) or when
// --model is empty and the model list cannot be had; failed requests are results.
BenchServeResult run_bench_serve(const BenchServeArgs& args);

// The summary, one flat object: completed, failed, duration_s, token totals, throughputs,
// {mean,median,p90,p99,max}_{ttft,tpot,itl,e2el}_ms, max_concurrent_requests, the inputs
// (num_prompts, input_len and output_len (the lengths sent), request_rate (null: inf),
// burstiness, max_concurrency (null: unlimited), seed, model, url, dataset_name), errors
// (up to 5 distinct messages, in send order), and the prefix cache: total_cached_tokens
// and prefix_cache_hit_rate (cached / input tokens of the successful requests; 0 if none).
// With prefix-repetition also: prefix_repetition {num_prefixes, prefix_len, suffix_len,
// output_len}; shareable_tokens = prefix_len * the successful requests that are not the
// first of their prefix (i >= num_prefixes); hit_rate_of_shareable = total_cached_tokens /
// shareable_tokens (null when 0; above 1 when a server also caches blocks that requests
// share by chance or that an earlier run left); {mean,median}_ttft_first_of_prefix_ms
// (requests i < num_prefixes) and {mean,median}_ttft_repeated_prefix_ms (the others),
// null when no successful request falls in the group.
nlohmann::json bench_serve_json(const BenchServeArgs& args, const BenchServeResult& result);

// The summary as a table like vllm's "Serving Benchmark Result", with a "Prefix Cache"
// section.
std::string bench_serve_table(const nlohmann::json& summary);

}  // namespace cpinfer
