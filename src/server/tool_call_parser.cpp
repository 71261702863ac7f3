#include "server/tool_call_parser.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace cpinfer {

namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>",
                           kPythonTag = "<|python_tag|>";

bool is_json_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool all_space(std::string_view s) { return std::all_of(s.begin(), s.end(), is_json_space); }

// How many trailing bytes of s are a proper prefix of tag (they may be its start).
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

enum class Match { Yes, More, No };

// Whether s begins (after whitespace) with {"name": "<name>", "arguments": {   (or
// "parameters"); on Yes, *args_at is the position of the arguments' '{'.
Match match_header(std::string_view s, std::string* name, size_t* args_at) {
  size_t i = 0;
  auto ws = [&] {
    while (i < s.size() && is_json_space(s[i])) ++i;
  };
  auto lit = [&](std::string_view l) {
    const size_t n = std::min(l.size(), s.size() - i);
    if (s.substr(i, n) != l.substr(0, n)) return Match::No;
    if (n < l.size()) return Match::More;
    i += n;
    return Match::Yes;
  };
  for (std::string_view l : {"{", "\"name\"", ":"}) {
    ws();
    if (Match m = lit(l); m != Match::Yes) return m;
  }
  ws();
  if (i == s.size()) return Match::More;
  if (s[i] != '"') return Match::No;
  size_t j = i + 1;
  for (bool esc = false; j < s.size(); ++j) {
    if (esc) esc = false;
    else if (s[j] == '\\') esc = true;
    else if (s[j] == '"') break;
  }
  if (j == s.size()) return Match::More;
  const auto n = nlohmann::json::parse(s.substr(i, j + 1 - i), nullptr, false);
  if (!n.is_string()) return Match::No;
  *name = n.get<std::string>();
  i = j + 1;
  ws();
  if (Match m = lit(","); m != Match::Yes) return m;
  ws();
  const size_t key_at = i;
  const Match a = lit("\"arguments\"");
  if (a != Match::Yes) {
    i = key_at;
    const Match p = lit("\"parameters\"");
    if (p != Match::Yes) return a == Match::More || p == Match::More ? Match::More : Match::No;
  }
  ws();
  if (Match m = lit(":"); m != Match::Yes) return m;
  ws();
  if (i == s.size()) return Match::More;
  if (s[i] != '{') return Match::No;
  *args_at = i;
  return Match::Yes;
}

// A call's JSON text: {"name": string, "arguments" or "parameters": any}; false otherwise.
bool parse_call(std::string_view text, ToolCall* call) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return false;
  auto name = j.find("name");
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  if (name == j.end() || !name->is_string() || args == j.end()) return false;
  call->name = name->get<std::string>();
  call->arguments = args->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return true;
}

}  // namespace

ToolCallFormat tool_call_format(const std::string& name) {
  if (name == "hermes") return ToolCallFormat::Hermes;
  if (name == "llama3_json") return ToolCallFormat::Llama3Json;
  fail("unknown tool call parser '{}': the parsers are hermes and llama3_json", name);
}

ToolParseDelta ToolCallStreamParser::feed(std::string_view text, bool last) {
  ToolParseDelta out;
  buf_.append(text);
  step(&out, last);
  return out;
}

void ToolCallStreamParser::emit_content(ToolParseDelta* out, std::string_view text) {
  out->content.append(text);
}

ToolCallDelta& ToolCallStreamParser::call_delta(ToolParseDelta* out, int index) {
  if (out->calls.empty() || out->calls.back().index != index) out->calls.push_back({index, {}, {}});
  return out->calls.back();
}

void ToolCallStreamParser::step(ToolParseDelta* out, bool at_end) {
  for (;;) {
    bool progressed = false;
    switch (state_) {
      case State::Start: {  // llama3_json: a call, or plain content?
        if (format_ == ToolCallFormat::Hermes) {
          state_ = State::Content;
          progressed = true;
          break;
        }
        size_t p = 0;
        while (p < buf_.size() && is_json_space(buf_[p])) ++p;
        const std::string_view rest = std::string_view(buf_).substr(p);
        if (rest.starts_with(kPythonTag)) {
          buf_.erase(0, p + kPythonTag.size());
          state_ = State::Content;  // llama3: between calls
          gap_committed_ = false;
          progressed = true;
        } else if (!rest.empty() && rest[0] == '{') {
          state_ = State::Content;
          gap_committed_ = false;
          progressed = true;
        } else if (!rest.empty() && !(kPythonTag.starts_with(rest) && !at_end)) {
          state_ = State::Rest;
          progressed = true;
        } else if (at_end) {
          state_ = State::Rest;
          progressed = true;
        }
        break;
      }
      case State::Rest:
        emit_content(out, buf_);
        buf_.clear();
        break;
      case State::Content:
        progressed = content_step(out, at_end);
        break;
      case State::Body:
      case State::Args:
      case State::Tail:
        progressed = body_step(out, at_end);
        break;
    }
    if (!progressed) return;
  }
}

// Text outside calls. hermes: content up to the next <tool_call>. llama3_json (after the
// first call): ';' and whitespace up to the next '{'; anything else ends the calls.
bool ToolCallStreamParser::content_step(ToolParseDelta* out, bool at_end) {
  auto start_body = [&](size_t erase) {
    buf_.erase(0, erase);
    state_ = State::Body;
    scanned_ = 0;
    depth_ = 0;
    in_string_ = escaped_ = false;
    body_started_ = false;
    announced_ = -1;
  };
  if (format_ == ToolCallFormat::Llama3Json) {
    size_t p = 0;
    while (p < buf_.size() && (is_json_space(buf_[p]) || buf_[p] == ';')) ++p;
    if (p < buf_.size() && buf_[p] == '{') {
      start_body(p);
      return true;
    }
    if (p < buf_.size() || at_end) {  // text after the calls: content from here on
      if (p < buf_.size()) buf_.erase(0, p);
      else buf_.clear();
      state_ = State::Rest;
      return true;
    }
    return false;
  }
  // A run of text after a call is sent once it holds more than whitespace; whitespace
  // alone before the next call (or the end) is dropped.
  auto send = [&](size_t n) {
    const std::string_view region = std::string_view(buf_).substr(0, n);
    if (!gap_committed_ && !all_space(region)) gap_committed_ = true;
    if (gap_committed_) {
      emit_content(out, region);
      buf_.erase(0, n);
    } else if (at_end) {
      buf_.erase(0, n);
    }
  };
  if (const size_t at = buf_.find(kOpen); at != std::string::npos) {
    const std::string_view before = std::string_view(buf_).substr(0, at);
    if (gap_committed_ || !all_space(before)) emit_content(out, before);
    start_body(at + kOpen.size());
    gap_committed_ = false;
    return true;
  }
  send(buf_.size() - (at_end ? 0 : partial_tag(buf_, kOpen)));
  return false;
}

// One call's text, from after <tool_call> (hermes) or its '{' (llama3_json).
bool ToolCallStreamParser::body_step(ToolParseDelta* out, bool at_end) {
  const bool hermes = format_ == ToolCallFormat::Hermes;
  auto scan = [&](char c) {
    if (in_string_) {
      if (escaped_) escaped_ = false;
      else if (c == '\\') escaped_ = true;
      else if (c == '"') in_string_ = false;
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      --depth_;
    }
  };
  if (state_ == State::Body && !body_started_) {
    std::string name;
    size_t args_at = 0;
    const Match m = match_header(buf_, &name, &args_at);
    if (m == Match::More && !at_end) return false;
    body_started_ = true;  // decided: announced now, or sent whole once complete
    if (m == Match::Yes) {
      announced_ = next_index_++;
      call_delta(out, announced_).name = name;
      for (; scanned_ < args_at; ++scanned_) scan(buf_[scanned_]);
      args_from_ = args_at;
      state_ = State::Args;
    }
    return true;
  }
  if (state_ == State::Args) {
    // The arguments object (which opened at depth 1) is passed on as it comes; it ends when
    // the depth is back to 1. A '<' outside a string is no JSON: the tag that ends the block.
    for (; scanned_ < buf_.size(); ++scanned_) {
      const char c = buf_[scanned_];
      if (hermes && c == '<' && !in_string_) {
        malformed_ = true;
        state_ = State::Tail;
        break;
      }
      scan(c);
      if (depth_ == 1) {
        ++scanned_;
        state_ = State::Tail;
        break;
      }
    }
    if (scanned_ > args_from_)
      call_delta(out, announced_).arguments.append(buf_, args_from_, scanned_ - args_from_);
    args_from_ = scanned_;
    if (state_ == State::Tail) return true;
    if (!at_end) return false;
    malformed_ = true;  // the output ended inside the arguments
    end_body(out, buf_.size(), 0);
    return true;
  }
  // Body sent whole, or Tail: find the end of the call's text.
  if (hermes) {
    const size_t at = buf_.find(kClose, scanned_);
    if (at != std::string::npos) {
      end_body(out, at, kClose.size());
      return true;
    }
    scanned_ = buf_.size() - partial_tag(buf_, kClose);
  } else {
    for (; scanned_ < buf_.size(); ++scanned_) {
      scan(buf_[scanned_]);
      if (depth_ == 0) {
        end_body(out, scanned_ + 1, 0);
        return true;
      }
    }
  }
  if (!at_end) return false;
  end_body(out, buf_.size(), 0);
  return true;
}

// The call's text is buf_[0, body_end), followed by close_len bytes of closing tag.
void ToolCallStreamParser::end_body(ToolParseDelta* out, size_t body_end, size_t close_len) {
  const std::string_view text = std::string_view(buf_).substr(0, body_end);
  ToolCall call;
  const bool ok = parse_call(text, &call);
  if (announced_ >= 0) {
    if (!ok) malformed_ = true;
  } else if (ok) {
    ToolCallDelta& d = call_delta(out, next_index_++);
    d.name = call.name;
    d.arguments = call.arguments;
  } else {
    malformed_ = true;
    if (format_ == ToolCallFormat::Hermes) emit_content(out, kOpen);
    emit_content(out, std::string_view(buf_).substr(0, body_end + close_len));
  }
  buf_.erase(0, body_end + close_len);
  announced_ = -1;
  gap_committed_ = false;
  state_ = State::Content;
}

ParsedToolCalls parse_tool_calls(ToolCallFormat format, std::string_view text) {
  ToolCallStreamParser p(format);
  ParsedToolCalls r;
  for (const ToolParseDelta& d : {p.feed(text), p.finish()}) {
    r.content += d.content;
    for (const ToolCallDelta& c : d.calls) {
      if (size_t(c.index) >= r.calls.size()) r.calls.resize(size_t(c.index) + 1);
      if (!c.name.empty()) r.calls[size_t(c.index)].name = c.name;
      r.calls[size_t(c.index)].arguments += c.arguments;
    }
  }
  if (p.malformed()) return {std::string(text), {}};
  return r;
}

}  // namespace cpinfer
