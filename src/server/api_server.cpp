#include "server/api_server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>

#include "core/error.h"
#include "core/log.h"
#include "server/api_error.h"
#include "server/listen_backlog.h"
#include "core/constant_time.h"
#include "server/openai_responses.h"
#include "server/prometheus.h"

namespace cpinfer {

using nlohmann::json;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, e.to_json()); }

const char* status_text(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 415: return "Unsupported Media Type";
    case 413: return "The request body is too large";
    case 414: return "The request URI is too long";
    default: return "HTTP error";
  }
}

// POST bodies are JSON: a Content-Type other than application/json (parameters such as
// charset allowed) is refused with 415; a request without one is read as JSON.
void check_json_content_type(const httplib::Request& req) {
  if (!req.has_header("Content-Type")) return;
  const std::string type = req.get_header_value("Content-Type");
  std::string media = type.substr(0, type.find(';'));
  std::erase_if(media, [](char c) { return c == ' ' || c == '\t'; });
  std::transform(media.begin(), media.end(), media.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  if (media != "application/json" && !(media.starts_with("application/") && media.ends_with("+json")))
    throw ApiError(415, fmt::format("Content-Type '{}' is not supported: the body must be JSON "
                                    "(Content-Type: application/json)", type));
}

// One /v1/(chat/)completions call in flight: its channel and what each choice has produced.
struct Generation {
  ResponseContext ctx;
  std::shared_ptr<OutputChannel> channel;
  bool stream = false, include_usage = false;
  std::vector<ChoiceState> choices;
  std::vector<bool> started;  // chat: the first chunk of a choice carries the role
  size_t num_finished = 0;
  double keepalive_s = 2.0;
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
};

// Writes what the engine has produced since the last call; false when the response must end
// here without its last chunk (the client is gone, or a whole response failed).
// SSE: "data: {chunk}\n\n" per event, then the usage chunk and "data: [DONE]\n\n"; a failure
// is an SSE error event, which OpenAI clients raise on.
// Whole responses: JSON whitespace while waiting (so that a gone client is noticed), then
// the body. The status line (200) went out with the headers, before the result was known, so
// a whole response that fails writes its OpenAI error body and then ends the chunked
// transfer WITHOUT its terminating chunk: every HTTP client sees an incomplete response and
// raises (the openai npm client: "terminated"; curl: exit 18) instead of taking the error
// body for a completion; the error body is in what they read.
bool pump(Generation& g, httplib::DataSink& sink) {
  using clock = std::chrono::steady_clock;
  // Keep-alive after keepalive_s without a write: a whole response writes nothing until it
  // is complete, and only a write notices that the client has gone.
  auto keep_alive = [&] {
    if (std::chrono::duration<double>(clock::now() - g.last_write).count() < g.keepalive_s)
      return true;
    static const std::string kSse = ": keep-alive\n\n", kJson = "\n";
    const std::string& ka = g.stream ? kSse : kJson;
    g.last_write = clock::now();
    return sink.write(ka.data(), ka.size());
  };
  RequestEvent ev;
  const bool got = g.channel->pop(&ev, g.keepalive_s);
  if (const std::string why = g.channel->failure(); !why.empty()) {
    // The job failed (Engine::fail: a rank died): an error event (streamed) or an error
    // body (whole), then the end of the response.
    const std::string err = dump_json(ApiError(503, why).to_json());
    const std::string out = g.stream ? "data: " + err + "\n\ndata: [DONE]\n\n" : err;
    g.num_finished = g.choices.size();
    g.channel->cancel();  // this call is over (Engine::num_live_channels stops counting it)
    if (!sink.write(out.data(), out.size()) || !g.stream) return false;
    sink.done();
    return true;
  }
  if (!got) return keep_alive();
  std::string out;
  do {
    ChoiceState& c = g.choices[size_t(ev.index)];
    if (g.stream) {
      if (ev.finished && (ev.finish_reason == "error" || ev.finish_reason == "abort") &&
          ev.token_ids.empty()) {
        ApiError e(ev.finish_reason == "abort" ? 503 : 500,
                   ev.finish_reason == "abort" ? "the request was aborted (server shutting down)"
                                               : "generation failed: " + ev.error);
        out += "data: " + dump_json(e.to_json()) + "\n\n";
      } else {
        const bool first = !g.started[size_t(ev.index)];
        g.started[size_t(ev.index)] = true;
        const json chunk = stream_chunk(g.ctx, ev, first && g.ctx.chat, &c, g.include_usage);
        if (!chunk.is_null()) out += "data: " + dump_json(chunk) + "\n\n";
      }
    }
    const bool was_finished = c.finished;
    apply_event(ev, &c);
    if (c.finished && !was_finished) ++g.num_finished;
  } while (g.num_finished < g.choices.size() && g.channel->pop(&ev, 0));

  if (g.num_finished == g.choices.size()) {
    if (g.stream) {
      if (g.include_usage) out += "data: " + dump_json(usage_chunk(g.ctx, g.choices)) + "\n\n";
      out += "data: [DONE]\n\n";
    } else {
      const ChoiceState* failed = nullptr;
      for (const ChoiceState& c : g.choices)
        if (c.finish_reason == "error" || c.finish_reason == "abort") failed = &c;
      if (failed) {
        out = dump_json(ApiError(failed->finish_reason == "abort" ? 503 : 500,
                                 failed->finish_reason == "abort"
                                     ? "the request was aborted (server shutting down)"
                                     : "generation failed: " + failed->error)
                            .to_json());
        sink.write(out.data(), out.size());
        return false;  // no terminating chunk: the client sees the response fail
      }
      out = dump_json(full_response(g.ctx, g.choices));
    }
  }
  if (out.empty()) return keep_alive();
  g.last_write = clock::now();
  if (!sink.write(out.data(), out.size())) return false;
  if (g.num_finished == g.choices.size()) sink.done();
  return true;
}

}  // namespace

ApiServer::ApiServer(Engine& engine, const Tokenizer& tok, const ChatTemplate* chat_template,
                     const ServerOptions& opts)
    : engine_(engine), tok_(tok), opts_(opts), created_(unix_now()) {
  ctx_.tokenizer = &tok;
  ctx_.chat_template = chat_template;
  ctx_.served_model_name = opts.served_model_name;
  ctx_.max_model_len = engine.options().max_model_len;
  ctx_.vocab_size = engine.vocab_size();
  ctx_.sampling_defaults = opts.sampling_defaults;
  ctx_.enable_auto_tool_choice = opts.tool_call_format.has_value();
  svr_ = std::make_unique<httplib::Server>();
  const int threads = std::max(4, opts.http_threads);
  svr_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  svr_->set_payload_max_length(opts.max_body_bytes);
  svr_->set_read_timeout(60, 0);
  svr_->set_write_timeout(60, 0);
  svr_->set_keep_alive_timeout(opts.http_keep_alive_timeout_s);
  routes();
}

ApiServer::~ApiServer() { stop(); }

int ApiServer::bind() {
  int port = opts_.port;
  if (port == 0) {
    port = svr_->bind_to_any_port(opts_.host);
    CPI_CHECK(port > 0, "cannot listen on {}:<any port>", opts_.host);
  } else {
    CPI_CHECK(svr_->bind_to_port(opts_.host, port),
              "cannot listen on {}:{} (is the port in use, or the address not local?)",
              opts_.host, port);
  }
  if (raise_listen_backlog(port, kApiListenBacklog) == 0)
    CPI_LOG_WARN("could not raise the accept queue of port {} to {} (it stays at cpp-httplib's 5)",
             port, kApiListenBacklog);
  return port;
}

void ApiServer::start() {
  thread_ = std::thread([this] { svr_->listen_after_bind(); });
  // httplib's stop() does nothing before the listen loop runs: a stop() (e.g. SIGTERM at
  // start-up) would leave that loop blocked in accept() and stop() hanging in join().
  for (int i = 0; i < 5000 && !svr_->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void ApiServer::stop() {
  if (svr_) svr_->stop();
  if (thread_.joinable()) thread_.join();
}

void ApiServer::routes() {
  httplib::Server& s = *svr_;
  // Anything that ends in an error status without a body (unknown path, body over the cap,
  // malformed HTTP) gets an OpenAI-style JSON error too.
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = status_text(res.status);
    // Name the problem: which route is unknown, which limit a body broke.
    if (res.status == 404) msg = fmt::format("no route {} {}", req.method, req.path);
    if (res.status == 413)
      msg = fmt::format("the request body is larger than the limit of {} bytes "
                        "(--max-request-body-bytes)", opts_.max_body_bytes);
    send_error(res, ApiError(res.status, msg));
  });
  // Called once per request after its response is written, with the final status (a
  // streamed answer has 200 even if the engine fails mid-stream: that is an SSE error event).
  s.set_logger([this](const httplib::Request&, const httplib::Response& res) {
    if (res.status < 400) return;
    std::lock_guard<std::mutex> lock(error_responses_mu_);
    ++error_responses_[res.status];
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, what));
  });

  // Wraps a handler: API key check, ApiError / Error / JSON errors -> OpenAI error bodies.
  auto guarded = [this](bool needs_key, auto fn) {
    return [this, needs_key, fn](const httplib::Request& req, httplib::Response& res) {
      try {
        if (needs_key && !opts_.api_key.empty() &&
            !constant_time_equal(req.get_header_value("Authorization"), "Bearer " + opts_.api_key))
          throw ApiError(401, "Incorrect API key provided.", "", "invalid_api_key");
        if (req.method == "POST") check_json_content_type(req);
        fn(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const Error& e) {
        send_error(res, ApiError(400, e.what()));
      } catch (const json::exception& e) {
        send_error(res, ApiError(400, fmt::format("malformed request: {}", e.what())));
      }
    };
  };

  auto generate = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      if (const std::string why = engine_.failure(); !why.empty()) throw ApiError(503, why);
      if (!engine_.running()) throw ApiError(503, "the engine is not running");
      const json body = parse_body(req.body);
      ParsedRequest pr = chat ? parse_chat_request(body, nlohmann::ordered_json::parse(req.body), ctx_)
                              : parse_completion_request(body, ctx_);
      auto g = std::make_shared<Generation>();
      g->ctx = {random_id(chat ? "chatcmpl-" : "cmpl-"), unix_now(), opts_.served_model_name,
                chat, pr.logprobs, &tok_, pr.n,
                pr.parse_tool_calls ? opts_.tool_call_format : std::nullopt,
                pr.parallel_tool_calls};
      g->channel = std::make_shared<OutputChannel>();
      g->stream = pr.stream;
      g->include_usage = pr.include_usage;
      const size_t num_choices = pr.prompts.size() * size_t(pr.n);
      g->choices.resize(num_choices);
      g->started.assign(num_choices, false);
      g->keepalive_s = opts_.keepalive_s;
      try {
        // Choice i is completion i % n of prompt i / n, as vLLM numbers them. With a seed,
        // completion j samples with seed + j (vLLM's): each is reproducible, and they differ.
        for (size_t i = 0; i < num_choices; ++i) {
          RequestParams p = pr.params;
          p.prompt = pr.prompts[i / size_t(pr.n)];
          if (!p.random_seed) p.sampling.seed += uint64_t(i % size_t(pr.n));
          engine_.submit(std::move(p), g->channel, int32_t(i));
        }
      } catch (...) {
        g->channel->cancel();  // drop the prompts already queued
        if (const std::string why = engine_.failure(); !why.empty()) throw ApiError(503, why);
        throw;
      }
      res.set_chunked_content_provider(
          pr.stream ? "text/event-stream" : "application/json",
          [g](size_t, httplib::DataSink& sink) {
            if (pump(*g, sink)) return true;
            g->channel->cancel();  // the client went away, or the response failed
            return false;
          },
          [g](bool success) {
            if (!success || g->num_finished < g->choices.size()) g->channel->cancel();
          });
    };
  };
  s.Post("/v1/completions", guarded(true, generate(false)));
  s.Post("/v1/chat/completions", guarded(true, generate(true)));

  s.Get("/v1/models", guarded(true, [this](const httplib::Request&, httplib::Response& res) {
          json m = {{"id", opts_.served_model_name}, {"object", "model"}, {"created", created_},
                    {"owned_by", "cpinfer"},        {"root", opts_.model_dir},
                    {"parent", nullptr},            {"max_model_len", ctx_.max_model_len}};
          send_json(res, 200, {{"object", "list"}, {"data", json::array({m})}});
        }));
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (const std::string why = engine_.failure(); !why.empty())
      send_error(res, ApiError(503, why));
    else if (engine_.running())
      res.status = 200;
    else
      send_error(res, ApiError(503, "the engine is not running"));
  });
  s.Get("/version", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"version", "cpinfer 0.1"}});
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::map<int, uint64_t> errors;
    {
      std::lock_guard<std::mutex> lock(error_responses_mu_);
      errors = error_responses_;
    }
    res.set_content(render_prometheus(engine_.metrics(), opts_.served_model_name) +
                        render_error_responses(errors, opts_.served_model_name) +
                        render_process_memory(),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Post("/tokenize", guarded(true, [this](const httplib::Request& req, httplib::Response& res) {
           const json b = parse_body(req.body);
           if (b.contains("model") && b["model"] != opts_.served_model_name)
             throw ApiError(404, fmt::format("The model `{}` does not exist.", b["model"].dump()), "model");
           std::string text;
           // vLLM's defaults: the tokenizer template for a prompt, none for messages.
           bool add_special = !b.contains("messages");
           if (b.contains("add_special_tokens")) {
             if (!b["add_special_tokens"].is_boolean())
               throw ApiError(400, "'add_special_tokens' must be a boolean", "add_special_tokens");
             add_special = b["add_special_tokens"].get<bool>();
           }
           if (b.contains("messages")) {
             bool agp = true;
             if (b.contains("add_generation_prompt")) {
               if (!b["add_generation_prompt"].is_boolean())
                 throw ApiError(400, "'add_generation_prompt' must be a boolean",
                                "add_generation_prompt");
               agp = b["add_generation_prompt"].get<bool>();
             }
             text = render_chat_prompt(nlohmann::ordered_json::parse(req.body), agp, ctx_);
           } else if (b.contains("prompt") && b["prompt"].is_string()) {
             text = b["prompt"].get<std::string>();
           } else {
             throw ApiError(400, "give 'prompt' (a string) or 'messages'", "prompt");
           }
           std::vector<int32_t> ids = tok_.encode(text, add_special);
           send_json(res, 200, {{"tokens", ids}, {"count", ids.size()},
                                {"max_model_len", ctx_.max_model_len}});
         }));
  s.Post("/detokenize", guarded(true, [this](const httplib::Request& req, httplib::Response& res) {
           const json b = parse_body(req.body);
           if (b.contains("model") && b["model"] != opts_.served_model_name)
             throw ApiError(404, fmt::format("The model `{}` does not exist.", b["model"].dump()), "model");
           if (!b.contains("tokens") || !b["tokens"].is_array())
             throw ApiError(400, "'tokens' must be an array of token ids", "tokens");
           std::vector<int32_t> ids;
           for (const json& t : b["tokens"]) {
             if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= ctx_.vocab_size)
               throw ApiError(400, fmt::format("token {} is not an id in [0, {})", t.dump(), ctx_.vocab_size), "tokens");
             ids.push_back(t.get<int32_t>());
           }
           // Ids past the tokenizer's vocabulary (padding rows of the model's table) have no text.
           std::erase_if(ids, [this](int32_t id) { return id >= tok_.vocab_size(); });
           send_json(res, 200, {{"prompt", tok_.decode(ids)}});
         }));

  // The wrong method on a known route: 405 naming the allowed one (not a bare 404).
  auto wrong_method = [](const char* allowed) {
    return [allowed](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Allow", allowed);
      send_error(res, ApiError(405, fmt::format("method {} is not allowed on {}; use {}",
                                                req.method, req.path, allowed)));
    };
  };
  for (const char* path : {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"})
    s.Get(path, wrong_method("POST"));
  for (const char* path : {"/v1/models", "/health", "/version", "/metrics"})
    s.Post(path, wrong_method("GET"));
}

}  // namespace cpinfer
