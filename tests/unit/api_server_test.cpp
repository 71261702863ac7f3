// The HTTP server and the engine in one process, as `cpinfer serve` runs them on one rank:
// many client threads at once (streamed and whole completions, a client that disconnects
// mid-stream, /metrics and /health polled meanwhile), then the server stopped while requests
// are still running. Checks the answers (each equal to the same request alone), that every
// call ends, and that every page comes back. Its main purpose is ThreadSanitizer
// (scripts/tsan_test.sh): the HTTP threads, the engine thread and the thread pool meet here.
#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/engine.h"
#include "server/api_server.h"
#include "support/test_models.h"

namespace cpinfer {
namespace {

struct Live {
  ModelRunner runner;
  StepExecutor exec;
  Tokenizer tok;
  Engine engine;
  ApiServer server;
  std::thread loop;
  int port = 0;
  static RunnerOptions runner_options() {
    RunnerOptions ro;
    ro.num_pages = 256;
    return ro;
  }
  static ServerOptions server_options() {
    ServerOptions so;
    so.port = 0;
    so.served_model_name = "tiny";
    so.http_threads = 32;
    so.keepalive_s = 0.2;  // keep-alive writes happen, and notice the client that left
    return so;
  }
  explicit Live(const std::string& dir)
      : runner(dir, runner_options(), global_pool()),
        exec(runner, nullptr),
        tok(Tokenizer::from_file(dir + "/tokenizer.json")),
        engine(exec, tok, EngineOptions{{8, 128, true}, 1024, {}}, global_pool()),
        server(engine, tok, nullptr, server_options()) {
    // As `cpinfer serve`: the server listens before the engine loop starts; requests that
    // come first wait in the engine's inbox.
    port = server.bind();
    server.start();
    loop = std::thread([this] { engine.run(); });
  }
  ~Live() {
    engine.stop();
    loop.join();
    server.stop();
  }
};

std::string body(int i, int64_t max_tokens, bool stream) {
  nlohmann::json b;
  std::vector<int32_t> p;
  for (int k = 0; k < 20 + 7 * i; ++k) p.push_back(100 + (k * 31 + i * 977) % 3900);
  b["prompt"] = p;
  b["max_tokens"] = max_tokens;
  b["temperature"] = 0;
  b["ignore_eos"] = true;
  b["stream"] = stream;
  return b.dump();
}

// The completion text of a whole response, or of a stream's chunks put together.
std::string text_of(const std::string& resp, bool stream) {
  if (!stream) return nlohmann::json::parse(resp)["choices"][0]["text"].get<std::string>();
  std::string text;
  size_t at = 0;
  while ((at = resp.find("data: {", at)) != std::string::npos) {
    const size_t end = resp.find("\n\n", at);
    auto j = nlohmann::json::parse(resp.substr(at + 6, end - at - 6));
    if (j.contains("choices") && !j["choices"].empty()) text += j["choices"][0]["text"].get<std::string>();
    at = end;
  }
  return text;
}

// Sends a streamed request on a raw socket, reads until two SSE chunks came, and closes.
void leave_mid_stream(int port, const std::string& b) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                          "application/json\r\nContent-Length: " +
                          std::to_string(b.size()) + "\r\n\r\n" + b;
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), ssize_t(req.size()));
  std::string got;
  char buf[4096];
  size_t chunks = 0;
  while (chunks < 2) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, size_t(n));
    chunks = 0;
    for (size_t at = 0; (at = got.find("data: {", at)) != std::string::npos; ++at) ++chunks;
  }
  ::close(fd);
  EXPECT_GE(chunks, 2u);
}

TEST(ApiServer, ConcurrentClientsDisconnectsAndAStopUnderLoad) {
  // Its vocabulary cut to 4099 ids (the prompts stay below the cut's special tokens): the
  // requests are compared with each other, and the real vocabulary's LM head would be most
  // of every step.
  const std::string dir = testing::test_model("tiny", 2, DType::F32, 1, 4099);
  std::vector<std::string> alone(4);
  {
    Live s(dir);
    httplib::Client c("127.0.0.1", s.port);
    c.set_read_timeout(120, 0);
    for (int i = 0; i < 4; ++i) {
      auto r = c.Post("/v1/completions", body(i, 8, false), "application/json");
      ASSERT_TRUE(r && r->status == 200)
          << (r ? r->body : "no response: " + httplib::to_string(r.error()));
      alone[size_t(i)] = text_of(r->body, false);
    }
  }
  Live s(dir);
  std::atomic<int> done{0}, wrong{0};
  std::atomic<bool> polling{true};
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", s.port);
      c.set_read_timeout(120, 0);
      const bool stream = i % 2 == 0;
      auto r = c.Post("/v1/completions", body(i, 8, stream), "application/json");
      if (!r || r->status != 200 || text_of(r->body, stream) != alone[size_t(i)]) ++wrong;
      ++done;
    });
  // A client that leaves in the middle of a long stream.
  clients.emplace_back([&] { leave_mid_stream(s.port, body(3, 900, true)); });
  std::thread poller([&] {
    httplib::Client c("127.0.0.1", s.port);
    while (polling.load()) {
      c.Get("/metrics");
      c.Get("/health");
    }
  });
  for (auto& t : clients) t.join();
  EXPECT_EQ(done.load(), 4);
  EXPECT_EQ(wrong.load(), 0);
  // Every page back (the disconnected stream's too), as the engine's audit sees it.
  EngineMetrics m;
  for (int k = 0; k < 2000; ++k) {
    m = s.engine.metrics();
    if (m.running == 0 && m.waiting == 0 && m.kv_used_pages[0] == 0 &&
        m.kv_audited_free_pages[0] + m.kv_cached_pages[0] == 256)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(m.kv_used_pages[0], 0);
  EXPECT_EQ(m.kv_audited_free_pages[0] + m.kv_cached_pages[0], 256);
  EXPECT_GE(m.finished["abort"], 1u);
  polling = false;
  poller.join();
  // Requests still running when the server stops: each call ends (an error or a cut
  // response), none hangs.
  std::vector<std::thread> late;
  std::atomic<int> ended{0};
  for (int i = 0; i < 2; ++i)
    late.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", s.port);
      c.set_read_timeout(60, 0);
      c.Post("/v1/completions", body(i, 900, i % 2 == 0), "application/json");
      ++ended;
    });
  for (int k = 0; k < 4000 && s.engine.metrics().running < 2; ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  s.engine.stop();
  for (auto& t : late) t.join();
  EXPECT_EQ(ended.load(), 2);
}

}  // namespace
}  // namespace cpinfer
