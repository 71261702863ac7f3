// The OpenAI-compatible HTTP server (cpp-httplib) in front of the Engine: /v1/completions,
// /v1/chat/completions (both streamed as SSE or whole), /v1/models, /health, /tokenize,
// /detokenize, /metrics, /version. HTTP threads parse, tokenize and wait on their request's
// channel; only the engine loop touches the model.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "server/openai_protocol.h"
#include "server/tool_call_parser.h"
#include "tokenizer/tokenizer.h"

namespace httplib { class Server; }

namespace cpinfer {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                    // 0: any free port (see bind())
  std::string api_key;                // empty: no authentication
  std::string served_model_name;
  std::string model_dir;
  size_t max_body_bytes = 16u << 20;  // larger bodies get 413
  int http_threads = 64;              // requests served at once (streams hold one each)
  double keepalive_s = 2.0;           // idle gap before a keep-alive write (detects gone clients)
  // An idle HTTP keep-alive connection is closed after this many seconds (serve
  // --http-keep-alive-timeout). Longer than the clients' own idle limits (Node's fetch: the
  // server's hint minus 1 s, 4 s by default; httpx: 5 s), so a client does not send on a
  // connection the server is closing (the request would fail with a reset) unless its
  // event loop stalls past this. An idle connection holds one of the http_threads.
  int http_keep_alive_timeout_s = 15;
  // Sampling values of the fields a request omits (serve --generation-config).
  SamplingParams sampling_defaults = openai_sampling_defaults();
  // serve --enable-auto-tool-choice --tool-call-parser NAME: chat requests with tools and
  // tool_choice "auto" get their tool calls parsed out of the output in this format.
  std::optional<ToolCallFormat> tool_call_format;
};

class ApiServer {
 public:
  ApiServer(Engine& engine, const Tokenizer& tok, const ChatTemplate* chat_template,
            const ServerOptions& opts);
  ~ApiServer();
  // Binds the listening socket; throws Error if it cannot. Returns the port.
  int bind();
  // Serves on a background thread until stop().
  void start();
  void stop();

 private:
  void routes();
  Engine& engine_;
  const Tokenizer& tok_;
  ServerOptions opts_;
  ProtocolContext ctx_;
  int64_t created_ = 0;
  // HTTP responses sent with an error status (>= 400), by status, for /metrics: the
  // server's own count of refused requests (load tests compare it with their clients').
  std::mutex error_responses_mu_;
  std::map<int, uint64_t> error_responses_;
  std::unique_ptr<httplib::Server> svr_;
  std::thread thread_;
};

}  // namespace cpinfer
