#include "cli/openai_client.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <string_view>

#include "cli/httplib_config.h"
#include "cli/sse_parser.h"
#include "core/error.h"

namespace cpinfer {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string shorten(std::string_view s, size_t max_len = 200) {
  return s.size() <= max_len ? std::string(s) : std::string(s.substr(0, max_len)) + "...";
}

// Timeouts on the client: connecting, each read and each write get the whole budget;
// the total is checked as the stream arrives (a stream of keep-alives never ends a read).
void set_timeouts(httplib::Client& cli, double timeout_s) {
  const auto sec = time_t(std::floor(timeout_s));
  const auto usec = time_t((timeout_s - std::floor(timeout_s)) * 1e6);
  cli.set_connection_timeout(sec, usec);
  cli.set_read_timeout(sec, usec);
  cli.set_write_timeout(sec, usec);
}

httplib::Headers request_headers(const std::string& api_key) {
  // identity: a compressed event stream would be held back by the compressor.
  httplib::Headers h{{"Accept-Encoding", "identity"}};
  if (!api_key.empty()) h.emplace("Authorization", "Bearer " + api_key);
  return h;
}

// What went wrong on the wire, in words (httplib's own names are terse: "Read").
std::string describe(httplib::Error err, const HttpEndpoint& ep) {
  switch (err) {
    case httplib::Error::Connection:
      return fmt::format("cannot connect to {}:{} (is the server running?)", ep.host, ep.port);
    case httplib::Error::ConnectionTimeout:
      return fmt::format("connecting to {}:{} timed out", ep.host, ep.port);
    case httplib::Error::Read:
      return "reading the response failed (the server closed the connection?)";
    case httplib::Error::Write:
      return "sending the request failed (the server closed the connection?)";
    default:
      return httplib::to_string(err);
  }
}

// "HTTP 400: <error.message>" from an OpenAI error body, or the body itself.
std::string http_error(int status, const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error")) {
    const auto& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string())
      return fmt::format("HTTP {}: {}", status, e["message"].get<std::string>());
    if (e.is_string()) return fmt::format("HTTP {}: {}", status, e.get<std::string>());
  }
  if (body.empty()) return fmt::format("HTTP {}", status);
  return fmt::format("HTTP {}: {}", status, shorten(body));
}

// Interprets one request's response as it arrives: status, then the event stream.
class CompletionStream {
 public:
  CompletionStream(const HttpEndpoint& ep, Clock::time_point sent, double timeout_s)
      : ep_(ep), sent_(sent), timeout_s_(timeout_s) {}

  bool on_response(const httplib::Response& r) {
    status_ = r.status;
    if (status_ != 200) return true;  // read the error body
    const std::string type = r.get_header_value("Content-Type");
    if (type.rfind("text/event-stream", 0) != 0)
      return fail(
          fmt::format("expected a text/event-stream response, got Content-Type '{}'", type));
    return true;
  }

  bool on_bytes(std::string_view bytes) {
    const Clock::time_point now = Clock::now();
    if (seconds_between(sent_, now) > timeout_s_) return fail(timeout_message());
    if (status_ != 200) {
      if (error_body_.size() < (64u << 10)) error_body_.append(bytes);
      return true;
    }
    events_.clear();
    parser_.feed(bytes, events_);
    for (const SseEvent& e : events_)
      if (!on_event(e.data, seconds_between(sent_, now))) return false;
    return true;
  }

  StreamedCompletion finish(bool sent_ok, httplib::Error err) {
    const double elapsed = seconds_between(sent_, Clock::now());
    if (out_.error.empty()) {
      if (status_ > 0 && status_ != 200) {
        out_.error = http_error(status_, error_body_);
      } else if (!sent_ok && !done_) {
        if (elapsed >= timeout_s_)
          out_.error = timeout_message();
        else if (status_ < 0)
          out_.error = fmt::format("connection error: {}", describe(err, ep_));
        else
          out_.error = fmt::format("connection error after {} content chunks: {}",
                                   out_.content_chunks, describe(err, ep_));
      } else if (!done_) {
        out_.error = parser_.has_partial()
                         ? "stream ended in the middle of an event, without data: [DONE]"
                         : "stream ended without data: [DONE]";
      } else if (out_.content_chunks == 0) {
        out_.error = "stream had no completion chunk (no token was streamed)";
      }
    }
    out_.success = out_.error.empty();
    return std::move(out_);
  }

 private:
  bool fail(std::string message) {
    if (out_.error.empty()) out_.error = std::move(message);
    return false;
  }
  std::string timeout_message() const { return fmt::format("timed out after {}s", timeout_s_); }

  bool on_event(const std::string& data, double t) {
    if (done_) return true;  // anything after [DONE] is ignored
    if (data == "[DONE]") {
      done_ = true;
      out_.e2el_s = t;
      return true;
    }
    auto j = nlohmann::json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return fail(fmt::format("malformed stream chunk (not a JSON object): {}", shorten(data)));
    try {
      if (j.contains("error")) {
        const auto& e = j["error"];
        return fail(fmt::format("error in stream: {}", e.is_object() && e.contains("message")
                                                           ? e["message"].get<std::string>()
                                                           : e.dump()));
      }
      if (j.contains("choices")) {
        const auto& choices = j.at("choices");
        if (!choices.is_array())
          return fail(
              fmt::format("malformed stream chunk ('choices' is not an array): {}", shorten(data)));
        if (!choices.empty()) {
          const auto& c = choices.at(0);
          const std::string text =
              c.contains("text") && !c["text"].is_null() ? c["text"].get<std::string>() : "";
          const bool finished = c.contains("finish_reason") && !c["finish_reason"].is_null();
          if (!text.empty() || !finished) content_chunk(t);
        }
      }
      if (j.contains("usage") && !j["usage"].is_null()) {
        const auto& u = j["usage"];
        out_.prompt_tokens = u.at("prompt_tokens").get<int64_t>();
        out_.completion_tokens = u.at("completion_tokens").get<int64_t>();
        // Optional, and null where a server does not report it (vLLM by default).
        if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object()) {
          const auto& d = u["prompt_tokens_details"];
          if (d.contains("cached_tokens") && !d["cached_tokens"].is_null())
            out_.cached_tokens = d["cached_tokens"].get<int64_t>();
        }
      }
    } catch (const nlohmann::json::exception& e) {
      return fail(fmt::format("malformed stream chunk ({}): {}", e.what(), shorten(data)));
    }
    return true;
  }

  void content_chunk(double t) {
    if (out_.content_chunks == 0)
      out_.ttft_s = t;
    else
      out_.itl_s.push_back(t - last_chunk_s_);
    last_chunk_s_ = t;
    ++out_.content_chunks;
  }

  const HttpEndpoint& ep_;
  Clock::time_point sent_;
  double timeout_s_;
  int status_ = -1;
  bool done_ = false;
  double last_chunk_s_ = 0;
  std::string error_body_;
  SseParser parser_;
  std::vector<SseEvent> events_;
  StreamedCompletion out_;
};

}  // namespace

HttpEndpoint parse_http_url(const std::string& url) {
  const std::string_view scheme = "http://";
  if (url.rfind("https://", 0) == 0)
    fail("--url '{}': https is not supported; use http:// (e.g. http://127.0.0.1:8000)", url);
  if (url.rfind(scheme, 0) != 0)
    fail("--url '{}' must start with http:// (e.g. http://127.0.0.1:8000)", url);
  std::string_view rest = std::string_view(url).substr(scheme.size());
  if (rest.find_first_of("?#") != std::string_view::npos)
    fail("--url '{}': a query or fragment is not allowed; give the server's base URL", url);
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  HttpEndpoint ep;
  if (slash != std::string_view::npos) {
    ep.prefix = std::string(rest.substr(slash));
    while (!ep.prefix.empty() && ep.prefix.back() == '/') ep.prefix.pop_back();
  }
  if (authority.find('@') != std::string_view::npos)
    fail("--url '{}': credentials in the URL are not supported; use --api-key", url);
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) fail("--url '{}': unterminated '[' in the host", url);
    ep.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') fail("--url '{}': expected ':port' after ']'", url);
    if (!after.empty()) port = after.substr(1);
    if (after == ":") fail("--url '{}': empty port", url);
  } else {
    const size_t colon = authority.find(':');
    ep.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) fail("--url '{}': empty port", url);
    }
  }
  if (ep.host.empty()) fail("--url '{}' has no host (e.g. http://127.0.0.1:8000)", url);
  if (!port.empty()) {
    int p = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || p > 65535)
        fail("--url '{}': port '{}' is not a number in 1..65535", url, port);
      p = p * 10 + (c - '0');
    }
    if (p < 1 || p > 65535) fail("--url '{}': port '{}' is not a number in 1..65535", url, port);
    ep.port = p;
  }
  return ep;
}

std::string first_model_id(const HttpEndpoint& ep, const std::string& api_key, double timeout_s) {
  const std::string where = fmt::format("http://{}:{}{}/v1/models", ep.host, ep.port, ep.prefix);
  httplib::Client cli(ep.host, ep.port);
  set_timeouts(cli, timeout_s);
  auto res = cli.Get(ep.prefix + "/v1/models", request_headers(api_key));
  if (!res)
    fail("cannot list the models at {}: {} (--model skips this request)", where,
         describe(res.error(), ep));
  if (res->status != 200)
    fail("cannot list the models at {}: {}", where, http_error(res->status, res->body));
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("data") || !j["data"].is_array())
    fail("cannot list the models at {}: the answer is not {{\"data\": [...]}}: {}", where,
         shorten(res->body));
  if (j["data"].empty()) fail("the server at {} lists no models", where);
  const auto& m = j["data"][0];
  if (!m.is_object() || !m.contains("id") || !m["id"].is_string())
    fail("cannot list the models at {}: the first entry has no string 'id': {}", where, m.dump());
  return m["id"].get<std::string>();
}

std::string completion_request_body(const std::string& model, const std::vector<int32_t>& prompt,
                                    int64_t max_tokens) {
  nlohmann::json j;
  j["model"] = model;
  j["prompt"] = prompt;
  j["max_tokens"] = max_tokens;
  j["temperature"] = 0;
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  j["ignore_eos"] = true;
  return j.dump();
}

StreamedCompletion stream_completion(const HttpEndpoint& ep, const std::string& api_key,
                                     const std::string& body, double timeout_s) {
  httplib::Client cli(ep.host, ep.port);
  set_timeouts(cli, timeout_s);
  cli.set_keep_alive(false);
  httplib::Request req;
  req.method = "POST";
  req.path = ep.prefix + "/v1/completions";
  req.headers = request_headers(api_key);
  req.headers.emplace("Accept", "text/event-stream");
  req.headers.emplace("Content-Type", "application/json");
  req.body = body;
  const Clock::time_point sent = Clock::now();
  CompletionStream stream(ep, sent, timeout_s);
  req.response_handler = [&](const httplib::Response& r) { return stream.on_response(r); };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    return stream.on_bytes(std::string_view(data, n));
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  bool ok = false;
  try {
    ok = cli.send(req, res, err);
  } catch (const std::exception& e) {
    StreamedCompletion out;
    out.error = fmt::format("request failed: {}", e.what());
    return out;
  }
  return stream.finish(ok, err);
}

}  // namespace cpinfer
