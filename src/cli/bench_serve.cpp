// `cpinfer bench serve`: the load generator (one thread per request in flight, arrivals
// on schedule, a gate for --max-concurrency) and the CLI around it. What a request
// measures is in openai_client.h, what is sent and when in bench_serve_workload.h, the
// summary in bench_serve_report.cpp.
#include "cli/bench_serve.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "cli/bench_serve_workload.h"
#include "cli/commands.h"
#include "cli/openai_client.h"
#include "core/error.h"
#include "core/progress.h"

namespace cpinfer {

namespace {

using Clock = std::chrono::steady_clock;

// Requests in flight: acquire() blocks while `limit` are (0: never), and the peak count.
class InFlightGate {
 public:
  explicit InFlightGate(int64_t limit) : limit_(limit) {}
  void acquire() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return limit_ <= 0 || count_ < limit_; });
    peak_ = std::max(peak_, ++count_);
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      --count_;
    }
    cv_.notify_one();
  }
  int64_t peak() const {
    std::lock_guard lock(mu_);
    return peak_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t limit_, count_ = 0, peak_ = 0;
};

void check_args(const BenchServeArgs& a) {
  CPI_CHECK(a.num_prompts >= 1, "--num-prompts {} must be at least 1", a.num_prompts);
  CPI_CHECK(a.input_len >= 1, "--input-len {} must be at least 1", a.input_len);
  CPI_CHECK(a.output_len >= 1, "--output-len {} must be at least 1", a.output_len);
  if (a.dataset == BenchDataset::PrefixRepetition) {
    const PrefixRepetition& p = a.prefix_repetition;
    CPI_CHECK(!a.input_len_given,
              "--input-len does not apply to --dataset-name prefix-repetition (a prompt is "
              "--prefix-repetition-prefix-len + --prefix-repetition-suffix-len tokens); drop it");
    CPI_CHECK(p.num_prefixes >= 1, "--prefix-repetition-num-prefixes {} must be at least 1",
              p.num_prefixes);
    CPI_CHECK(p.prefix_len >= 0, "--prefix-repetition-prefix-len {} must be at least 0",
              p.prefix_len);
    CPI_CHECK(p.suffix_len >= 1, "--prefix-repetition-suffix-len {} must be at least 1",
              p.suffix_len);
    CPI_CHECK(p.output_len >= 0,
              "--prefix-repetition-output-len {} must be at least 1 (default: --output-len)",
              p.output_len);
  }
  CPI_CHECK(a.request_rate > 0, "--request-rate {} must be positive (inf: all at once)",
            a.request_rate);
  CPI_CHECK(a.burstiness > 0 && std::isfinite(a.burstiness), "--burstiness {} must be positive",
            a.burstiness);
  CPI_CHECK(a.max_concurrency >= 0, "--max-concurrency {} must be positive", a.max_concurrency);
  CPI_CHECK(a.timeout_s > 0 && std::isfinite(a.timeout_s), "--timeout {} must be positive seconds",
            a.timeout_s);
}

RequestResult to_result(StreamedCompletion s, int64_t prompt_len) {
  RequestResult r;
  r.success = s.success;
  r.error = std::move(s.error);
  r.input_tokens = s.prompt_tokens >= 0 ? s.prompt_tokens : prompt_len;
  r.output_tokens = s.completion_tokens >= 0 ? s.completion_tokens : s.content_chunks;
  r.cached_tokens = std::max<int64_t>(s.cached_tokens, 0);
  r.ttft_s = s.ttft_s;
  r.e2el_s = s.e2el_s;
  r.itl_s = std::move(s.itl_s);
  return r;
}

// "inf" (any case) or a positive number.
double parse_request_rate(const std::string& s) {
  std::string lower;
  for (char c : s) lower += char(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "inf" || lower == "infinity") return std::numeric_limits<double>::infinity();
  size_t used = 0;
  double r = 0;
  try {
    r = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  CPI_CHECK(used == s.size() && used > 0 && r > 0 && std::isfinite(r),
            "--request-rate '{}' must be a positive number of requests/s or inf", s);
  return r;
}

}  // namespace

BenchDataset parse_dataset_name(const std::string& name) {
  if (name == "random") return BenchDataset::Random;
  if (name == "prefix-repetition" || name == "prefix_repetition")
    return BenchDataset::PrefixRepetition;
  CPI_CHECK(false, "--dataset-name '{}' is not one of random, prefix-repetition", name);
  return BenchDataset::Random;
}

const char* dataset_name(BenchDataset d) {
  return d == BenchDataset::PrefixRepetition ? "prefix-repetition" : "random";
}

int64_t effective_input_len(const BenchServeArgs& a) {
  return a.dataset == BenchDataset::PrefixRepetition
             ? a.prefix_repetition.prefix_len + a.prefix_repetition.suffix_len
             : a.input_len;
}

int64_t effective_output_len(const BenchServeArgs& a) {
  return a.dataset == BenchDataset::PrefixRepetition && a.prefix_repetition.output_len > 0
             ? a.prefix_repetition.output_len
             : a.output_len;
}

BenchServeResult run_bench_serve(const BenchServeArgs& a) {
  check_args(a);
  const HttpEndpoint ep = parse_http_url(a.url);
  BenchServeResult out;
  out.model =
      a.model.empty() ? first_model_id(ep, a.api_key, std::min(a.timeout_s, 60.0)) : a.model;

  const size_t n = size_t(a.num_prompts);
  std::vector<std::string> bodies(n);
  std::vector<int64_t> prompt_lens(n);
  {
    auto prompts =
        a.dataset == BenchDataset::PrefixRepetition
            ? prefix_repetition_prompts(a.num_prompts, a.prefix_repetition, a.vocab_size, a.seed)
            : random_prompts(a.num_prompts, a.input_len, a.vocab_size, a.seed);
    const int64_t output_len = effective_output_len(a);
    for (size_t i = 0; i < n; ++i) {
      bodies[i] = completion_request_body(out.model, prompts[i], output_len);
      prompt_lens[i] = int64_t(prompts[i].size());
    }
  }
  const std::vector<double> arrivals =
      arrival_times(a.num_prompts, a.request_rate, a.burstiness, a.seed);
  out.requests.resize(n);

  InFlightGate gate(a.max_concurrency);
  std::mutex progress_mu;
  std::optional<ProgressBar> progress;
  if (a.progress) progress.emplace(fmt::format("bench serve: {} requests", n), n);

  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Worker> workers;
  auto reap = [&workers](bool all) {  // join the finished threads (all of them: wait)
    for (auto it = workers.begin(); it != workers.end();) {
      if (all || it->done->load()) {
        it->thread.join();
        it = workers.erase(it);
      } else {
        ++it;
      }
    }
  };

  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < n; ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(arrivals[i])));
    gate.acquire();
    reap(false);
    auto done = std::make_shared<std::atomic<bool>>(false);
    auto task = [&, i, done] {
      try {
        out.requests[i] =
            to_result(stream_completion(ep, a.api_key, bodies[i], a.timeout_s), prompt_lens[i]);
      } catch (const std::exception& e) {
        out.requests[i].error = fmt::format("request failed: {}", e.what());
      }
      gate.release();
      if (progress) {
        std::lock_guard lock(progress_mu);
        progress->advance(1);
      }
      done->store(true);
    };
    try {
      workers.push_back({std::thread(task), done});
    } catch (const std::system_error& e) {
      out.requests[i].error = fmt::format("cannot start a request thread: {}", e.what());
      gate.release();
    }
  }
  reap(true);
  out.duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  out.max_concurrent_requests = gate.peak();
  if (progress) progress->finish();
  return out;
}

namespace {

struct ServeCliArgs {
  BenchServeArgs bench;
  std::string request_rate = "inf";
  std::string dataset_name = "random";
  std::string prefix_repetition_flag;  // the first --prefix-repetition-* flag given, or ""
  bool json = false;
};

int run_serve_cli(ServeCliArgs& c) {
  std::signal(SIGPIPE, SIG_IGN);  // a server hanging up is a failed request, not our death
  c.bench.request_rate = parse_request_rate(c.request_rate);
  c.bench.dataset = parse_dataset_name(c.dataset_name);
  // Shaping a dataset that is not sent would benchmark something else than was asked for.
  CPI_CHECK(c.prefix_repetition_flag.empty() || c.bench.dataset == BenchDataset::PrefixRepetition,
            "{} needs --dataset-name prefix-repetition", c.prefix_repetition_flag);
  c.bench.progress = true;
  const BenchServeResult r = run_bench_serve(c.bench);
  const nlohmann::json j = bench_serve_json(c.bench, r);
  if (c.json)
    std::printf("%s\n", j.dump().c_str());
  else
    std::printf("%s", bench_serve_table(j).c_str());
  std::fflush(stdout);
  const int64_t completed = j["completed"].get<int64_t>(), failed = j["failed"].get<int64_t>();
  const std::string first = j["errors"].empty() ? "" : j["errors"][0].get<std::string>();
  if (completed == 0) {
    std::fprintf(stderr, "error: all %lld requests failed; first error: %s\n", (long long)failed,
                 first.c_str());
    return 1;
  }
  if (failed > 0)
    std::fprintf(stderr, "warning: %lld of %lld requests failed; first error: %s\n",
                 (long long)failed, (long long)(failed + completed), first.c_str());
  return 0;
}

}  // namespace

void register_bench_serve(CLI::App& bench, CommandAction* action) {
  auto c = std::make_shared<ServeCliArgs>();
  BenchServeArgs& a = c->bench;
  auto* cmd = bench.add_subcommand(
      "serve",
      "Online serving benchmark against an OpenAI-compatible server (like vllm bench serve)");
  cmd->add_option("--url", a.url, "Server base URL, http://host:port")->required();
  cmd->add_option("--model", a.model, "Model name to request (default: the first of /v1/models)");
  cmd->add_option("--num-prompts", a.num_prompts, "Requests to send")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--dataset-name", c->dataset_name,
                  "Prompts: random (--input-len random ids) or prefix-repetition (shared "
                  "prefixes, fresh suffixes; prefix_repetition also accepted)")
      ->capture_default_str();
  CLI::Option* input_len =
      cmd->add_option("--input-len", a.input_len,
                      "Prompt tokens per request (random ids; random dataset only)")
          ->capture_default_str()
          ->check(CLI::Range(int64_t(1), int64_t(1) << 22));
  cmd->add_option("--output-len", a.output_len, "Generated tokens per request (ignore_eos)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 22));
  PrefixRepetition& p = a.prefix_repetition;
  const CLI::Option* prefix_options[] = {
      cmd->add_option("--prefix-repetition-num-prefixes", p.num_prefixes,
                      "prefix-repetition: distinct prefixes; request i uses prefix i % N")
          ->capture_default_str()
          ->check(CLI::Range(int64_t(1), int64_t(1) << 24)),
      cmd->add_option("--prefix-repetition-prefix-len", p.prefix_len,
                      "prefix-repetition: tokens of each shared prefix")
          ->capture_default_str()
          ->check(CLI::Range(int64_t(0), int64_t(1) << 22)),
      cmd->add_option("--prefix-repetition-suffix-len", p.suffix_len,
                      "prefix-repetition: fresh random tokens after the prefix, per request")
          ->capture_default_str()
          ->check(CLI::Range(int64_t(1), int64_t(1) << 22)),
      cmd->add_option("--prefix-repetition-output-len", p.output_len,
                      "prefix-repetition: generated tokens per request (default: --output-len)")
          ->check(CLI::Range(int64_t(1), int64_t(1) << 22)),
  };
  cmd->add_option("--request-rate", c->request_rate,
                  "Requests per second, Poisson arrivals; inf sends all at once")
      ->capture_default_str();
  cmd->add_option("--burstiness", a.burstiness,
                  "Gamma shape of the arrival gaps: 1 Poisson, < 1 burstier, > 1 more even")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-concurrency", a.max_concurrency,
                  "Most requests in flight (default: unlimited)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", a.seed, "Seed of the prompts and the arrival times")
      ->capture_default_str();
  cmd->add_option(
         "--vocab-size", a.vocab_size,
         "Vocabulary size, for small models: prompt ids are drawn from [1000, min(V, 30000)) "
         "([0, V) when V <= 2000); default: a large vocabulary")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--api-key", a.api_key, "Sent as 'Authorization: Bearer <key>'");
  cmd->add_option("--timeout", a.timeout_s, "Seconds one request may take")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", c->json, "One JSON line on stdout");
  std::vector<const CLI::Option*> prefix_flags(std::begin(prefix_options),
                                               std::end(prefix_options));
  cmd->callback([c, action, input_len, prefix_flags] {
    c->bench.input_len_given = input_len->count() > 0;
    for (const CLI::Option* o : prefix_flags)
      if (o->count() > 0 && c->prefix_repetition_flag.empty())
        c->prefix_repetition_flag = o->get_name();
    *action = [c] { return run_serve_cli(*c); };
  });
}

}  // namespace cpinfer
