// `bench serve`: the SSE parser, percentiles, the workload, URL parsing, and the whole
// client against an in-process OpenAI-style streaming server (httplib) that succeeds,
// answers 400, drops the connection mid-stream, or only sends keep-alives.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <mutex>
#include <set>
#include <thread>

#include "cli/bench_serve.h"
#include "cli/bench_serve_workload.h"
#include "cli/httplib_config.h"
#include "cli/openai_client.h"
#include "cli/sse_parser.h"
#include "core/error.h"
#include "core/stats.h"

namespace cpinfer {
namespace {

// ---- SSE parser --------------------------------------------------------------------------

std::vector<SseEvent> parse_in_chunks(const std::string& s, size_t chunk) {
  SseParser p;
  std::vector<SseEvent> out;
  for (size_t i = 0; i < s.size(); i += chunk) p.feed(std::string_view(s).substr(i, chunk), out);
  EXPECT_FALSE(p.has_partial());
  return out;
}

TEST(BenchServeSse, SameEventsWhateverTheChunking) {
  const std::string stream =
      ": keep-alive\r\n\r\n"
      "data: {\"a\":1}\r\n\r\n"
      "event: note\ndata: line 1\ndata:line 2\nid: 7\n\n"
      ": comment between events\n"
      "retry: 10\n\n"  // no data: nothing to dispatch
      "data:\n\n"      // one empty data line: an event with ""
      "data: cr only\r\r"
      "data: [DONE]\r\n\r\n";
  for (size_t chunk : {size_t(1), size_t(2), size_t(3), size_t(7), size_t(13), stream.size()}) {
    SCOPED_TRACE(chunk);
    auto ev = parse_in_chunks(stream, chunk);
    ASSERT_EQ(ev.size(), 5u);
    EXPECT_EQ(ev[0].data, "{\"a\":1}");
    EXPECT_EQ(ev[0].event, "");
    EXPECT_EQ(ev[1].event, "note");
    EXPECT_EQ(ev[1].data, "line 1\nline 2");
    EXPECT_EQ(ev[2].data, "");
    EXPECT_EQ(ev[3].data, "cr only");
    EXPECT_EQ(ev[4].data, "[DONE]");
  }
}

TEST(BenchServeSse, CrLfSplitAcrossChunksIsOneLineEnd) {
  SseParser p;
  std::vector<SseEvent> out;
  p.feed("data: x\r", out);
  p.feed("\n\r", out);
  EXPECT_EQ(out.size(), 1u);         // "\r\n" then "\r": the blank line
  p.feed("\ndata: y\r\n\r\n", out);  // this "\n" ends the "\r" above, not a new blank line
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].data, "x");
  EXPECT_EQ(out[1].data, "y");
}

TEST(BenchServeSse, UnfinishedEventIsPartial) {
  SseParser p;
  std::vector<SseEvent> out;
  p.feed("data: {\"choices\"", out);
  EXPECT_TRUE(p.has_partial());
  p.feed(": []}\n", out);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(p.has_partial());  // the line ended, the event did not
  p.feed("\n: ping\n", out);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_FALSE(p.has_partial());  // a comment line leaves nothing pending
}

// ---- percentiles (numpy.percentile, linear) ----------------------------------------------

TEST(BenchServeStats, PercentileMatchesNumpyLinear) {
  // np.percentile([1, 2, 3, 4], [50, 90, 99]) = [2.5, 3.7, 3.97]
  std::vector<double> a{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(a, 50), 2.5);
  EXPECT_NEAR(percentile(a, 90), 3.7, 1e-12);
  EXPECT_NEAR(percentile(a, 99), 3.97, 1e-12);
  // np.percentile([15, 20, 35, 40, 50], [0, 25, 40, 90, 99, 100]) = [15, 20, 29, 46, 49.6, 50]
  std::vector<double> b{50, 15, 40, 20, 35};
  EXPECT_DOUBLE_EQ(percentile(b, 0), 15);
  EXPECT_DOUBLE_EQ(percentile(b, 25), 20);
  EXPECT_NEAR(percentile(b, 40), 29, 1e-12);
  EXPECT_NEAR(percentile(b, 90), 46, 1e-12);
  EXPECT_NEAR(percentile(b, 99), 49.6, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(b, 100), 50);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(mean(b), 32);
  EXPECT_DOUBLE_EQ(mean({}), 0);
}

// ---- workload ----------------------------------------------------------------------------

TEST(BenchServeWorkload, PromptsAreSeededAndInRange) {
  auto p = random_prompts(4, 300, 0, 1);
  ASSERT_EQ(p.size(), 4u);
  for (const auto& q : p) {
    ASSERT_EQ(q.size(), 300u);
    for (int32_t t : q) ASSERT_TRUE(t >= kPromptTokenLo && t < kPromptTokenHi) << t;
  }
  EXPECT_EQ(p, random_prompts(4, 300, 0, 1));
  EXPECT_NE(p, random_prompts(4, 300, 0, 2));
  EXPECT_NE(p[0], p[1]);
  for (const auto& q : random_prompts(2, 500, 5000, 3))
    for (int32_t t : q) ASSERT_TRUE(t >= 1000 && t < 5000) << t;
  for (const auto& q : random_prompts(2, 500, 256, 3))
    for (int32_t t : q) ASSERT_TRUE(t >= 0 && t < 256) << t;
}

TEST(BenchServeWorkload, PrefixRepetitionSharesPrefixesRoundRobin) {
  PrefixRepetition cfg;
  cfg.num_prefixes = 3;
  cfg.prefix_len = 40;
  cfg.suffix_len = 7;
  const auto p = prefix_repetition_prompts(10, cfg, 0, 1);
  ASSERT_EQ(p.size(), 10u);
  auto prefix = [](const std::vector<int32_t>& q) {
    return std::vector<int32_t>(q.begin(), q.begin() + 40);
  };
  auto suffix = [](const std::vector<int32_t>& q) {
    return std::vector<int32_t>(q.begin() + 40, q.end());
  };
  std::set<std::vector<int32_t>> suffixes;
  for (size_t i = 0; i < p.size(); ++i) {
    ASSERT_EQ(p[i].size(), 47u);
    for (int32_t t : p[i]) ASSERT_TRUE(t >= kPromptTokenLo && t < kPromptTokenHi) << t;
    // Round robin: request i uses prefix i % 3, so 0, 1, 2 are the first of theirs.
    EXPECT_EQ(prefix(p[i]), prefix(p[i % 3])) << i;
    suffixes.insert(suffix(p[i]));
  }
  EXPECT_EQ(suffixes.size(), 10u);  // a fresh suffix per request
  EXPECT_NE(prefix(p[0]), prefix(p[1]));
  EXPECT_NE(prefix(p[1]), prefix(p[2]));
  EXPECT_NE(prefix(p[0]), prefix(p[2]));
  EXPECT_EQ(p, prefix_repetition_prompts(10, cfg, 0, 1));
  EXPECT_NE(p, prefix_repetition_prompts(10, cfg, 0, 2));
  // A longer run starts with the same requests.
  const auto longer = prefix_repetition_prompts(14, cfg, 0, 1);
  EXPECT_EQ(std::vector<std::vector<int32_t>>(longer.begin(), longer.begin() + 10), p);
  // Not the random dataset's ids of the same seed: a random run does not warm the cache.
  EXPECT_NE(prefix(p[0]), prefix(random_prompts(1, 47, 0, 1)[0]));
  // --vocab-size as for the random dataset; an empty prefix is only suffixes.
  for (const auto& q : prefix_repetition_prompts(4, cfg, 256, 3))
    for (int32_t t : q) ASSERT_TRUE(t >= 0 && t < 256) << t;
  cfg.prefix_len = 0;
  for (const auto& q : prefix_repetition_prompts(4, cfg, 0, 3)) EXPECT_EQ(q.size(), 7u);
  // Bad shapes name their flag.
  auto refused = [](PrefixRepetition c, const char* flag) {
    try {
      prefix_repetition_prompts(4, c, 0, 0);
      ADD_FAILURE() << "accepted " << flag;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  PrefixRepetition bad;
  bad.num_prefixes = 0;
  refused(bad, "--prefix-repetition-num-prefixes");
  bad = {};
  bad.prefix_len = -1;
  refused(bad, "--prefix-repetition-prefix-len");
  bad = {};
  bad.suffix_len = 0;
  refused(bad, "--prefix-repetition-suffix-len");
}

TEST(BenchServeWorkload, ArrivalGapsHaveTheRequestedMean) {
  for (double v : arrival_times(10, INFINITY, 1.0, 0)) EXPECT_EQ(v, 0.0);
  for (double burstiness : {1.0, 0.5, 3.0}) {
    SCOPED_TRACE(burstiness);
    auto t = arrival_times(20001, 10.0, burstiness, 7);
    EXPECT_EQ(t[0], 0.0);
    for (size_t i = 1; i < t.size(); ++i) ASSERT_GE(t[i], t[i - 1]);
    std::vector<double> gaps;
    for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
    const double m = mean(gaps);
    EXPECT_NEAR(m, 0.1, 0.005);
    // The variance of Gamma(k, theta) is k theta^2 = mean^2 / k.
    double var = 0;
    for (double g : gaps) var += (g - m) * (g - m);
    var /= double(gaps.size());
    EXPECT_NEAR(var, 0.01 / burstiness, 0.1 * 0.01 / burstiness);
  }
  EXPECT_EQ(arrival_times(5, 3.0, 1.0, 9), arrival_times(5, 3.0, 1.0, 9));
  EXPECT_THROW(arrival_times(5, 0.0, 1.0, 9), Error);
  EXPECT_THROW(arrival_times(5, 1.0, 0.0, 9), Error);
}

// ---- URLs --------------------------------------------------------------------------------

TEST(BenchServeUrl, ParsesHostPortAndPrefix) {
  HttpEndpoint e = parse_http_url("http://127.0.0.1:8000");
  EXPECT_EQ(e.host, "127.0.0.1");
  EXPECT_EQ(e.port, 8000);
  EXPECT_EQ(e.prefix, "");
  e = parse_http_url("http://localhost/");
  EXPECT_EQ(e.host, "localhost");
  EXPECT_EQ(e.port, 80);
  EXPECT_EQ(e.prefix, "");
  e = parse_http_url("http://[::1]:9000/proxy/llm/");
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 9000);
  EXPECT_EQ(e.prefix, "/proxy/llm");
  for (const char* bad : {"https://127.0.0.1:8000", "127.0.0.1:8000", "http://", "http://:80",
                          "http://h:", "http://h:0", "http://h:65536", "http://h:8o",
                          "http://h:8000?x=1", "http://u:p@h:80", "http://[::1", "ftp://h"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(parse_http_url(bad), Error);
  }
  try {
    parse_http_url("https://example.com");
    FAIL();
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("https is not supported"), std::string::npos);
  }
}

// ---- the client against a fake server ----------------------------------------------------

enum class Mode {
  Ok,             // usage in a last chunk, a separate finish chunk, "\n" line ends
  OkNoUsage,      // no usage chunk, finish_reason on the last token, "\r\n", split writes
  BadRequest,     // 400 with an OpenAI error body
  EveryOtherBad,  // requests 1, 3, 5, ... answer 400
  Drop,           // two tokens, then the connection is dropped
  KeepAliveOnly,  // ": ping" comments for 3 s, never a token
  Malformed,      // one token, then a chunk that is not JSON
  NotStreaming,   // 200 with a plain JSON completion
};

constexpr const char* kModel = "fake-model";
constexpr const char* kBadMessage = "This model's maximum context length is 8 tokens";

class FakeServer {
 public:
  explicit FakeServer(Mode mode, int token_delay_ms = 3) : mode_(mode), delay_ms_(token_delay_ms) {
    std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the test
    svr_.new_task_queue = [] { return new httplib::ThreadPool(32); };
    svr_.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      note_auth(req);
      res.set_content(R"({"object":"list","data":[{"id":"fake-model","object":"model","created":0,)"
                      R"("owned_by":"cpinfer"},{"id":"other","object":"model"}]})",
                      "application/json");
    });
    svr_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      completions(req, res);
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeServer() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<nlohmann::json> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  std::set<std::string> auth() {
    std::lock_guard lock(mu_);
    return auth_;
  }
  std::string last_content_type() {
    std::lock_guard lock(mu_);
    return content_type_;
  }

 private:
  void note_auth(const httplib::Request& req) {
    std::lock_guard lock(mu_);
    auth_.insert(req.get_header_value("Authorization"));
  }

  // What a prefix cache of whole 16-token blocks holding every earlier prompt would find:
  // the longest common prefix with one of them, in whole blocks, leaving at least one
  // token to prefill. Under mu_.
  int64_t cached_tokens(const std::vector<int32_t>& prompt) const {
    size_t best = 0;
    for (const auto& b : bodies_) {
      const auto q = b.at("prompt").get<std::vector<int32_t>>();
      size_t k = 0;
      while (k < q.size() && k < prompt.size() && q[k] == prompt[k]) ++k;
      best = std::max(best, k);
    }
    best = std::min(best, prompt.size() - 1);
    return int64_t(best / 16 * 16);
  }

  static std::string chunk(const std::string& text, const char* finish) {
    nlohmann::json c = {{"id", "cmpl-1"},
                        {"object", "text_completion"},
                        {"created", 0},
                        {"model", kModel},
                        {"usage", nullptr}};
    c["choices"] = nlohmann::json::array(
        {{{"index", 0},
          {"text", text},
          {"logprobs", nullptr},
          {"finish_reason", finish ? nlohmann::json(finish) : nlohmann::json(nullptr)}}});
    return c.dump();
  }

  void completions(const httplib::Request& req, httplib::Response& res) {
    note_auth(req);
    const int index = next_++;
    auto body = nlohmann::json::parse(req.body);
    int64_t cached = 0;
    {
      std::lock_guard lock(mu_);
      cached = cached_tokens(body.at("prompt").get<std::vector<int32_t>>());
      bodies_.push_back(body);
      content_type_ = req.get_header_value("Content-Type");
    }
    if (mode_ == Mode::BadRequest || (mode_ == Mode::EveryOtherBad && index % 2 == 1)) {
      res.status = 400;
      res.set_content(
          nlohmann::json{
              {"error", {{"message", kBadMessage}, {"type", "BadRequestError"}, {"code", 400}}}}
              .dump(),
          "application/json");
      return;
    }
    if (mode_ == Mode::NotStreaming) {
      res.set_content(R"({"id":"c","object":"text_completion","choices":[{"text":"hi"}]})",
                      "application/json");
      return;
    }
    const int64_t n = body.at("max_tokens").get<int64_t>();
    const int64_t prompt_len = int64_t(body.at("prompt").size());
    const Mode mode = mode_;
    const int delay = delay_ms_;
    res.set_chunked_content_provider("text/event-stream", [=](size_t, httplib::DataSink& sink) {
      const std::string eol = mode == Mode::OkNoUsage ? "\r\n" : "\n";
      auto send = [&](const std::string& data) {
        const std::string ev = "data: " + data + eol + eol;
        if (mode != Mode::OkNoUsage) return sink.write(ev.data(), ev.size());
        // Split each event at an awkward place (between "\r" and "\n" of the end).
        const size_t cut = ev.size() - 3;
        if (!sink.write(ev.data(), cut)) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return sink.write(ev.data() + cut, ev.size() - cut);
      };
      auto sleep = [&] { std::this_thread::sleep_for(std::chrono::milliseconds(delay)); };
      const std::string ping = ": ping" + eol + eol;
      if (mode == Mode::Malformed) {
        send(chunk("t0", nullptr));
        send("{\"choices\": [{\"text\": \"t1\"");
        send("[DONE]");
        sink.done();
        return true;
      }
      if (mode == Mode::KeepAliveOnly) {
        for (int i = 0; i < 150; ++i) {
          if (!sink.write(ping.data(), ping.size())) return false;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        sink.done();
        return true;
      }
      sink.write(ping.data(), ping.size());
      for (int64_t k = 0; k < n; ++k) {
        sleep();
        if (mode == Mode::Drop && k == 2) return false;  // the server goes away mid-stream
        const bool last = k == n - 1;
        // Token 1 ends mid UTF-8 character: its text is "" but it is a token.
        const std::string text = k == 1 ? "" : "t" + std::to_string(k);
        if (!send(chunk(text, last && mode == Mode::OkNoUsage ? "length" : nullptr))) return false;
      }
      if (mode == Mode::Ok) {
        send(chunk("", "length"));  // a finish-only chunk: not a token
        nlohmann::json u = {{"id", "cmpl-1"},
                            {"object", "text_completion"},
                            {"created", 0},
                            {"model", kModel},
                            {"choices", nlohmann::json::array()}};
        u["usage"] = {{"prompt_tokens", prompt_len},
                      {"completion_tokens", n},
                      {"total_tokens", prompt_len + n}};
        // No hit: null details, as vLLM sends them without --enable-prompt-tokens-details.
        u["usage"]["prompt_tokens_details"] =
            cached > 0 ? nlohmann::json{{"cached_tokens", cached}} : nlohmann::json(nullptr);
        send(u.dump());
      }
      send("[DONE]");
      sink.done();
      return true;
    });
  }

  Mode mode_;
  int delay_ms_;
  httplib::Server svr_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> next_{0};
  std::mutex mu_;
  std::vector<nlohmann::json> bodies_;
  std::set<std::string> auth_;
  std::string content_type_;
};

BenchServeArgs small_args(const FakeServer& s) {
  BenchServeArgs a;
  a.url = s.url();
  a.num_prompts = 6;
  a.input_len = 16;
  a.output_len = 5;
  a.timeout_s = 20;
  return a;
}

const char* const kContractFields[] = {"completed",
                                       "failed",
                                       "duration_s",
                                       "total_input_tokens",
                                       "total_output_tokens",
                                       "request_throughput",
                                       "output_throughput",
                                       "total_token_throughput",
                                       "mean_ttft_ms",
                                       "median_ttft_ms",
                                       "p90_ttft_ms",
                                       "p99_ttft_ms",
                                       "mean_tpot_ms",
                                       "median_tpot_ms",
                                       "p90_tpot_ms",
                                       "p99_tpot_ms",
                                       "mean_itl_ms",
                                       "median_itl_ms",
                                       "p90_itl_ms",
                                       "p99_itl_ms",
                                       "mean_e2el_ms",
                                       "median_e2el_ms",
                                       "p90_e2el_ms",
                                       "p99_e2el_ms",
                                       "max_concurrent_requests",
                                       "num_prompts",
                                       "input_len",
                                       "output_len",
                                       "request_rate",
                                       "max_concurrency",
                                       "model",
                                       "url",
                                       "errors"};

// A row of bench_serve_table: the label in 40 columns, a space, the value.
std::string table_row(const std::string& label, const std::string& value) {
  return fmt::format("{:<40} {}", label, value);
}

void expect_contract(const nlohmann::json& j) {
  for (const char* f : kContractFields) EXPECT_TRUE(j.contains(f)) << f;
  EXPECT_TRUE(j["errors"].is_array());
  EXPECT_LE(j["errors"].size(), 5u);
}

TEST(BenchServe, StreamsAndMeasuresEveryRequest) {
  FakeServer server(Mode::Ok);
  BenchServeArgs a = small_args(server);
  a.api_key = "secret";
  BenchServeResult r = run_bench_serve(a);
  EXPECT_EQ(r.model, kModel);  // the first of /v1/models
  ASSERT_EQ(r.requests.size(), 6u);
  for (const RequestResult& q : r.requests) {
    ASSERT_TRUE(q.success) << q.error;
    EXPECT_EQ(q.input_tokens, 16);
    EXPECT_EQ(q.output_tokens, 5);
    EXPECT_GT(q.ttft_s, 0);
    EXPECT_LT(q.ttft_s, q.e2el_s);
    ASSERT_EQ(q.itl_s.size(), 4u);  // 5 tokens, the "" one included, not the finish chunk
    for (double g : q.itl_s) EXPECT_GT(g, 0);
  }
  EXPECT_GE(r.max_concurrent_requests, 1);
  EXPECT_LE(r.max_concurrent_requests, 6);

  // What went over the wire.
  EXPECT_EQ(server.auth(), std::set<std::string>{"Bearer secret"});
  EXPECT_EQ(server.last_content_type(), "application/json");
  auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 6u);
  std::set<std::vector<int32_t>> prompts;
  for (const auto& b : bodies) {
    EXPECT_EQ(b["model"], kModel);
    EXPECT_EQ(b["max_tokens"], 5);
    EXPECT_EQ(b["temperature"], 0);
    EXPECT_EQ(b["stream"], true);
    EXPECT_EQ(b["ignore_eos"], true);
    EXPECT_EQ(b["stream_options"]["include_usage"], true);
    auto p = b["prompt"].get<std::vector<int32_t>>();
    ASSERT_EQ(p.size(), 16u);
    for (int32_t t : p) EXPECT_TRUE(t >= kPromptTokenLo && t < kPromptTokenHi);
    prompts.insert(p);
  }
  EXPECT_EQ(prompts.size(), 6u);

  nlohmann::json j = bench_serve_json(a, r);
  expect_contract(j);
  EXPECT_EQ(j["completed"], 6);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["total_input_tokens"], 96);
  EXPECT_EQ(j["total_output_tokens"], 30);
  EXPECT_TRUE(j["request_rate"].is_null());
  EXPECT_TRUE(j["max_concurrency"].is_null());
  EXPECT_EQ(j["model"], kModel);
  EXPECT_EQ(j["url"], server.url());
  EXPECT_TRUE(j["errors"].empty());
  EXPECT_GT(j["duration_s"].get<double>(), 0);
  EXPECT_GT(j["mean_itl_ms"].get<double>(), 0);
  EXPECT_LT(j["median_ttft_ms"].get<double>(), j["median_e2el_ms"].get<double>());
  EXPECT_LE(j["median_ttft_ms"].get<double>(), j["p99_ttft_ms"].get<double>());
  EXPECT_NEAR(j["output_throughput"].get<double>(), 30 / j["duration_s"].get<double>(), 1e-9);
  // TPOT of a request = (E2EL - TTFT) / (5 - 1); ITLs pooled over all requests.
  std::vector<double> tpot, itl;
  for (const RequestResult& q : r.requests) {
    tpot.push_back((q.e2el_s - q.ttft_s) / 4 * 1e3);
    for (double g : q.itl_s) itl.push_back(g * 1e3);
  }
  EXPECT_NEAR(j["mean_tpot_ms"].get<double>(), mean(tpot), 1e-9);
  EXPECT_NEAR(j["p90_tpot_ms"].get<double>(), percentile(tpot, 90), 1e-9);
  EXPECT_NEAR(j["median_itl_ms"].get<double>(), median(itl), 1e-9);
  EXPECT_NEAR(j["p99_itl_ms"].get<double>(), percentile(itl, 99), 1e-9);
  EXPECT_NEAR(j["max_itl_ms"].get<double>(), *std::max_element(itl.begin(), itl.end()), 1e-9);
  EXPECT_NEAR(j["max_ttft_ms"].get<double>(), 1e3 * std::max_element(r.requests.begin(), r.requests.end(), [](const RequestResult& a, const RequestResult& b) { return a.ttft_s < b.ttft_s; })->ttft_s, 1e-9);

  // Random prompts share no block: nothing cached (and null details read as 0).
  EXPECT_EQ(j["dataset_name"], "random");
  EXPECT_EQ(j["total_cached_tokens"], 0);
  EXPECT_EQ(j["prefix_cache_hit_rate"], 0.0);
  EXPECT_FALSE(j.contains("prefix_repetition"));
  EXPECT_FALSE(j.contains("shareable_tokens"));

  const std::string table = bench_serve_table(j);
  EXPECT_NE(table.find("Serving Benchmark Result"), std::string::npos);
  EXPECT_NE(table.find("Successful requests:                     6"), std::string::npos);
  EXPECT_NE(table.find("Mean TTFT (ms):"), std::string::npos);
  EXPECT_NE(table.find("Prefix Cache"), std::string::npos);
  EXPECT_NE(table.find(table_row("Prefix cache hit rate (%):", "0.00")), std::string::npos);
  EXPECT_EQ(table.find("first of prefix"), std::string::npos);
}

TEST(BenchServe, PrefixRepetitionAgainstAPrefixCache) {
  FakeServer server(Mode::Ok);
  BenchServeArgs a = small_args(server);
  a.dataset = BenchDataset::PrefixRepetition;
  a.prefix_repetition = {.num_prefixes = 2, .prefix_len = 32, .suffix_len = 5, .output_len = 3};
  a.max_concurrency = 1;  // each first request of a prefix is done before the next one
  BenchServeResult r = run_bench_serve(a);
  ASSERT_EQ(r.requests.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const RequestResult& q = r.requests[i];
    ASSERT_TRUE(q.success) << q.error;
    EXPECT_EQ(q.input_tokens, 37);
    EXPECT_EQ(q.output_tokens, 3);
    EXPECT_EQ(q.cached_tokens, i < 2 ? 0 : 32) << i;
  }
  auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(bodies[i]["max_tokens"], 3);  // --prefix-repetition-output-len
    const auto p = bodies[i]["prompt"].get<std::vector<int32_t>>();
    const auto first = bodies[i % 2]["prompt"].get<std::vector<int32_t>>();
    ASSERT_EQ(p.size(), 37u);
    EXPECT_TRUE(std::equal(p.begin(), p.begin() + 32, first.begin())) << i;
  }
  nlohmann::json j = bench_serve_json(a, r);
  expect_contract(j);
  EXPECT_EQ(j["dataset_name"], "prefix-repetition");
  EXPECT_EQ(j["input_len"], 37);  // the lengths sent
  EXPECT_EQ(j["output_len"], 3);
  EXPECT_EQ(j["total_input_tokens"], 6 * 37);
  EXPECT_EQ(j["total_cached_tokens"], 4 * 32);
  EXPECT_DOUBLE_EQ(j["prefix_cache_hit_rate"].get<double>(), 128.0 / 222.0);
  EXPECT_EQ(j["prefix_repetition"],
            (nlohmann::json{
                {"num_prefixes", 2}, {"prefix_len", 32}, {"suffix_len", 5}, {"output_len", 3}}));
  EXPECT_EQ(j["shareable_tokens"], 4 * 32);
  EXPECT_DOUBLE_EQ(j["hit_rate_of_shareable"].get<double>(), 1.0);
  EXPECT_GT(j["median_ttft_first_of_prefix_ms"].get<double>(), 0);
  EXPECT_GT(j["median_ttft_repeated_prefix_ms"].get<double>(), 0);
  const std::string table = bench_serve_table(j);
  EXPECT_NE(table.find(table_row("Hit rate of shareable (%):", "100.00")), std::string::npos)
      << table;
  EXPECT_NE(table.find("Median TTFT, first of prefix (ms):"), std::string::npos);
  EXPECT_NE(table.find("Median TTFT, repeated prefix (ms):"), std::string::npos);
  EXPECT_NE(table.find(table_row("Dataset:", "prefix-repetition")), std::string::npos);
}

TEST(BenchServe, PrefixRepetitionOutputLenDefaultsToOutputLen) {
  FakeServer server(Mode::OkNoUsage);  // no usage at all: nothing cached, lengths from the prompt
  BenchServeArgs a = small_args(server);
  a.dataset = BenchDataset::PrefixRepetition;
  a.prefix_repetition = {.num_prefixes = 1, .prefix_len = 16, .suffix_len = 2};
  a.num_prompts = 2;
  a.max_concurrency = 1;
  BenchServeResult r = run_bench_serve(a);
  for (const RequestResult& q : r.requests) {
    ASSERT_TRUE(q.success) << q.error;
    EXPECT_EQ(q.input_tokens, 18);
    EXPECT_EQ(q.output_tokens, 5);  // --output-len
    EXPECT_EQ(q.cached_tokens, 0);
  }
  nlohmann::json j = bench_serve_json(a, r);
  EXPECT_EQ(j["output_len"], 5);
  EXPECT_EQ(j["prefix_repetition"]["output_len"], 5);
  EXPECT_EQ(j["shareable_tokens"], 16);
  EXPECT_EQ(j["hit_rate_of_shareable"], 0.0);
}

// The summary of a hand-made result: which requests count as the first of their prefix,
// what is shareable, and that failed requests count for nothing.
TEST(BenchServeSummary, PrefixRepetitionFields) {
  BenchServeArgs a;
  a.url = "http://h:1";
  a.dataset = BenchDataset::PrefixRepetition;
  a.prefix_repetition = {.num_prefixes = 2, .prefix_len = 64, .suffix_len = 8, .output_len = 0};
  a.output_len = 4;
  a.num_prompts = 7;
  BenchServeResult r;
  r.model = "m";
  r.duration_s = 2;
  auto ok = [](double ttft_ms, int64_t cached) {
    RequestResult q;
    q.success = true;
    q.input_tokens = 72;
    q.output_tokens = 4;
    q.cached_tokens = cached;
    q.ttft_s = ttft_ms / 1e3;
    q.e2el_s = q.ttft_s + 0.03;
    return q;
  };
  RequestResult failed;
  failed.error = "boom";
  failed.cached_tokens = 64;  // a failed request's numbers are not counted
  // i:        0 (first)  1 (first)  2        3 (failed)  4        5        6
  r.requests = {ok(40, 0), ok(60, 0), ok(10, 64), failed, ok(12, 64), ok(20, 48), ok(14, 64)};
  const nlohmann::json j = bench_serve_json(a, r);
  EXPECT_EQ(j["completed"], 6);
  EXPECT_EQ(j["dataset_name"], "prefix-repetition");
  EXPECT_EQ(j["input_len"], 72);
  EXPECT_EQ(j["output_len"], 4);
  EXPECT_EQ(j["total_input_tokens"], 6 * 72);
  EXPECT_EQ(j["total_cached_tokens"], 64 + 64 + 48 + 64);
  EXPECT_DOUBLE_EQ(j["prefix_cache_hit_rate"].get<double>(), 240.0 / 432.0);
  EXPECT_EQ(j["prefix_repetition"]["num_prefixes"], 2);
  EXPECT_EQ(j["prefix_repetition"]["prefix_len"], 64);
  EXPECT_EQ(j["prefix_repetition"]["suffix_len"], 8);
  EXPECT_EQ(j["prefix_repetition"]["output_len"], 4);
  EXPECT_EQ(j["shareable_tokens"], 4 * 64);  // requests 2, 4, 5, 6
  EXPECT_DOUBLE_EQ(j["hit_rate_of_shareable"].get<double>(), 240.0 / 256.0);
  EXPECT_NEAR(j["mean_ttft_first_of_prefix_ms"].get<double>(), 50, 1e-9);
  EXPECT_NEAR(j["median_ttft_first_of_prefix_ms"].get<double>(), 50, 1e-9);
  EXPECT_NEAR(j["mean_ttft_repeated_prefix_ms"].get<double>(), 14, 1e-9);
  EXPECT_NEAR(j["median_ttft_repeated_prefix_ms"].get<double>(), 13, 1e-9);

  // Nothing shareable (every request the first of its prefix): nulls, shown as n/a.
  a.prefix_repetition.num_prefixes = 8;
  const nlohmann::json k = bench_serve_json(a, r);
  EXPECT_EQ(k["shareable_tokens"], 0);
  EXPECT_TRUE(k["hit_rate_of_shareable"].is_null());
  EXPECT_TRUE(k["mean_ttft_repeated_prefix_ms"].is_null());
  EXPECT_TRUE(k["median_ttft_repeated_prefix_ms"].is_null());
  EXPECT_NEAR(k["median_ttft_first_of_prefix_ms"].get<double>(), 17, 1e-9);
  const std::string table = bench_serve_table(k);
  EXPECT_NE(table.find(table_row("Hit rate of shareable (%):", "n/a")), std::string::npos)
      << table;

  // No successful request: rates are 0, not NaN.
  BenchServeResult none;
  none.requests = {failed};
  const nlohmann::json z = bench_serve_json(a, none);
  EXPECT_EQ(z["prefix_cache_hit_rate"], 0.0);
  EXPECT_EQ(z["total_cached_tokens"], 0);
  EXPECT_TRUE(z["median_ttft_first_of_prefix_ms"].is_null());
}

TEST(BenchServe, DatasetArgumentsAreChecked) {
  EXPECT_EQ(parse_dataset_name("random"), BenchDataset::Random);
  EXPECT_EQ(parse_dataset_name("prefix-repetition"), BenchDataset::PrefixRepetition);
  EXPECT_EQ(parse_dataset_name("prefix_repetition"), BenchDataset::PrefixRepetition);
  auto refused = [](auto&& f, const char* flag) {
    try {
      f();
      ADD_FAILURE() << "accepted " << flag;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  refused([] { parse_dataset_name("sharegpt"); }, "--dataset-name");
  // Checked before any connection: the URL is never reached.
  BenchServeArgs a;
  a.url = "http://127.0.0.1:1";
  a.model = "m";
  a.dataset = BenchDataset::PrefixRepetition;
  a.input_len_given = true;
  refused([&] { run_bench_serve(a); }, "--input-len");
  a.input_len_given = false;
  const std::pair<int64_t PrefixRepetition::*, const char*> fields[] = {
      {&PrefixRepetition::num_prefixes, "--prefix-repetition-num-prefixes"},
      {&PrefixRepetition::prefix_len, "--prefix-repetition-prefix-len"},
      {&PrefixRepetition::suffix_len, "--prefix-repetition-suffix-len"},
      {&PrefixRepetition::output_len, "--prefix-repetition-output-len"},
  };
  for (const auto& [field, flag] : fields) {
    BenchServeArgs b = a;
    b.prefix_repetition.*field = field == &PrefixRepetition::num_prefixes ||
                                         field == &PrefixRepetition::suffix_len
                                     ? 0
                                     : -1;
    refused([&] { run_bench_serve(b); }, flag);
  }
}

TEST(BenchServe, CountsChunksWithoutUsageOverCrLf) {
  FakeServer server(Mode::OkNoUsage);
  BenchServeArgs a = small_args(server);
  a.model = "given-model";  // no /v1/models request
  a.num_prompts = 3;
  a.output_len = 4;
  BenchServeResult r = run_bench_serve(a);
  EXPECT_EQ(r.model, "given-model");
  EXPECT_TRUE(server.auth() == std::set<std::string>{""});  // no key, no header
  for (const RequestResult& q : r.requests) {
    ASSERT_TRUE(q.success) << q.error;
    EXPECT_EQ(q.output_tokens, 4);  // the content chunks, the last carrying finish_reason
    EXPECT_EQ(q.input_tokens, 16);  // no usage: the prompt's length
    EXPECT_EQ(q.itl_s.size(), 3u);
    EXPECT_LT(q.ttft_s, q.e2el_s);
  }
  EXPECT_EQ(bench_serve_json(a, r)["total_output_tokens"], 12);
}

TEST(BenchServe, MaxConcurrencyAndRateAreHonoured) {
  FakeServer server(Mode::Ok, 5);
  BenchServeArgs a = small_args(server);
  a.max_concurrency = 2;
  a.request_rate = 200;
  a.seed = 3;
  BenchServeResult r = run_bench_serve(a);
  for (const RequestResult& q : r.requests) ASSERT_TRUE(q.success) << q.error;
  EXPECT_GE(r.max_concurrent_requests, 1);
  EXPECT_LE(r.max_concurrent_requests, 2);
  // The last request cannot start before its arrival time.
  EXPECT_GE(r.duration_s, arrival_times(6, 200, 1.0, 3).back());
  nlohmann::json j = bench_serve_json(a, r);
  EXPECT_EQ(j["request_rate"], 200.0);
  EXPECT_EQ(j["max_concurrency"], 2);
  EXPECT_LE(j["max_concurrent_requests"].get<int64_t>(), 2);
}

TEST(BenchServe, HttpErrorsFailWithTheServersMessage) {
  FakeServer server(Mode::BadRequest);
  BenchServeArgs a = small_args(server);
  a.num_prompts = 3;
  BenchServeResult r = run_bench_serve(a);
  nlohmann::json j = bench_serve_json(a, r);
  expect_contract(j);
  EXPECT_EQ(j["completed"], 0);
  EXPECT_EQ(j["failed"], 3);
  EXPECT_EQ(j["total_output_tokens"], 0);
  EXPECT_EQ(j["mean_ttft_ms"], 0.0);
  ASSERT_EQ(j["errors"].size(), 1u);  // distinct messages only
  EXPECT_EQ(j["errors"][0], std::string("HTTP 400: ") + kBadMessage);
}

TEST(BenchServe, SomeFailSomeSucceed) {
  FakeServer server(Mode::EveryOtherBad);
  BenchServeArgs a = small_args(server);
  a.num_prompts = 4;
  a.max_concurrency = 1;  // requests reach the server in order
  nlohmann::json j = bench_serve_json(a, run_bench_serve(a));
  EXPECT_EQ(j["completed"], 2);
  EXPECT_EQ(j["failed"], 2);
  EXPECT_EQ(j["total_input_tokens"], 32);
  EXPECT_EQ(j["total_output_tokens"], 10);
  EXPECT_EQ(j["errors"].size(), 1u);
}

TEST(BenchServe, DroppedConnectionMidStreamFails) {
  FakeServer server(Mode::Drop);
  BenchServeArgs a = small_args(server);
  a.num_prompts = 2;
  BenchServeResult r = run_bench_serve(a);
  for (const RequestResult& q : r.requests) {
    EXPECT_FALSE(q.success);
    EXPECT_EQ(q.error.rfind("connection error after 2 content chunks", 0), 0u) << q.error;
  }
  EXPECT_EQ(bench_serve_json(a, r)["completed"], 0);
}

TEST(BenchServe, MalformedOrNonStreamingAnswersFail) {
  {
    FakeServer server(Mode::Malformed);
    BenchServeArgs a = small_args(server);
    a.num_prompts = 1;
    BenchServeResult r = run_bench_serve(a);
    EXPECT_FALSE(r.requests[0].success);
    EXPECT_EQ(r.requests[0].error.rfind("malformed stream chunk (not a JSON object)", 0), 0u)
        << r.requests[0].error;
  }
  {
    FakeServer server(Mode::NotStreaming);
    BenchServeArgs a = small_args(server);
    a.num_prompts = 1;
    BenchServeResult r = run_bench_serve(a);
    EXPECT_FALSE(r.requests[0].success);
    EXPECT_NE(r.requests[0].error.find("expected a text/event-stream response"), std::string::npos)
        << r.requests[0].error;
  }
}

TEST(BenchServe, KeepAlivesDoNotOutliveTheTimeout) {
  FakeServer server(Mode::KeepAliveOnly);
  BenchServeArgs a = small_args(server);
  a.num_prompts = 1;
  a.timeout_s = 0.3;
  const auto t0 = std::chrono::steady_clock::now();
  BenchServeResult r = run_bench_serve(a);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.requests.size(), 1u);
  EXPECT_FALSE(r.requests[0].success);
  EXPECT_EQ(r.requests[0].error, "timed out after 0.3s");
  EXPECT_LT(took, 2.0);
}

TEST(BenchServe, UnreachableServer) {
  // A port that was free a moment ago: bound, never listened on, closed.
  int port = 0;
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port = ntohs(addr.sin_port);
    ::close(fd);
  }
  BenchServeArgs a;
  a.url = "http://127.0.0.1:" + std::to_string(port);
  a.num_prompts = 2;
  a.input_len = 4;
  a.output_len = 2;
  a.timeout_s = 5;
  try {
    run_bench_serve(a);  // no --model: asks /v1/models first
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot list the models"), std::string::npos) << e.what();
  }
  a.model = "m";
  BenchServeResult r = run_bench_serve(a);
  for (const RequestResult& q : r.requests) {
    EXPECT_FALSE(q.success);
    EXPECT_NE(q.error.find("cannot connect to 127.0.0.1"), std::string::npos) << q.error;
  }
  a.url = "https://127.0.0.1:1";
  EXPECT_THROW(run_bench_serve(a), Error);
}

}  // namespace
}  // namespace cpinfer
