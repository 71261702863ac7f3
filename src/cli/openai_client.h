// A small client of an OpenAI-compatible server (ours or vLLM's), for benchmarks: where
// the server is, which model it serves, and one streamed /v1/completions request timed
// chunk by chunk on the client's steady clock.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cpinfer {

// "http://host[:port][/prefix]", e.g. http://127.0.0.1:8000. Only plain http; IPv6 hosts
// in brackets ("http://[::1]:8000"). The prefix (a reverse proxy's path) goes before
// every /v1/... path; a trailing "/" is dropped.
struct HttpEndpoint {
  std::string host;
  int port = 80;
  std::string prefix;  // "" or "/something" (no trailing slash)
};

// Parses a base URL; Error naming the URL and what is wrong with it (https, no host, a
// bad port, a query string).
HttpEndpoint parse_http_url(const std::string& url);

// The id of the first model GET {prefix}/v1/models lists; Error when the server cannot
// be reached, answers an error, or lists none.
std::string first_model_id(const HttpEndpoint& ep, const std::string& api_key, double timeout_s);

// The JSON body of a streamed completion of exactly `prompt` (token ids) and `max_tokens`
// generated tokens: greedy, ignore_eos (vLLM's extension), usage in the last chunk.
std::string completion_request_body(const std::string& model, const std::vector<int32_t>& prompt,
                                    int64_t max_tokens);

// What one streamed request measured. Times are seconds since the request was sent.
struct StreamedCompletion {
  bool success = false;
  std::string error;          // why it failed (the first problem seen)
  double ttft_s = 0;          // -> the first content chunk (one carrying a token)
  double e2el_s = 0;          // -> `data: [DONE]`
  std::vector<double> itl_s;  // gaps between successive content chunks
  int64_t content_chunks = 0;
  int64_t prompt_tokens = -1;      // usage.prompt_tokens, -1 when the server sent none
  int64_t completion_tokens = -1;  // usage.completion_tokens, -1 when the server sent none
  int64_t cached_tokens = -1;  // usage.prompt_tokens_details.cached_tokens, -1 when absent
                               // (no prefix cache, or vLLM without --enable-prompt-tokens-details)
};

// POSTs `body` to {prefix}/v1/completions and reads the event stream. Never throws: a
// connection error, a non-200 status (with the OpenAI error's message), a chunk that is
// not the OpenAI format, a stream without [DONE] or without any content chunk, and a
// request running past `timeout_s` all come back as success = false with the reason.
// A content chunk is one with a non-empty `choices`, unless it is only a terminator
// (text "" with a finish_reason): a token that is an incomplete UTF-8 character streams
// as text "" and still counts.
StreamedCompletion stream_completion(const HttpEndpoint& ep, const std::string& api_key,
                                     const std::string& body, double timeout_s);

}  // namespace cpinfer
