// Fuzz target: model output text through the tool-call parsers (server/tool_call_parser.h).
// Input: byte 0 picks the format (even: hermes, odd: llama3_json), byte 1 a split point;
// the rest is the output text, parsed whole and streamed in two pieces cut there and in
// pieces of 3 bytes. Properties: unless a call was malformed, the streamed pieces put
// together equal the whole parse, every call has a name, and its arguments are JSON.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "server/tool_call_parser.h"

using namespace cpinfer;

namespace {

// The pieces streamed, put together; *malformed as the parser reports it.
ParsedToolCalls streamed(ToolCallFormat f, const std::vector<std::string_view>& pieces,
                         bool* malformed) {
  ToolCallStreamParser p(f);
  ParsedToolCalls r;
  for (size_t i = 0; i <= pieces.size(); ++i) {
    const ToolParseDelta d = i < pieces.size() ? p.feed(pieces[i]) : p.finish();
    r.content += d.content;
    for (const ToolCallDelta& c : d.calls) {
      FUZZ_CHECK(size_t(c.index) <= r.calls.size(), "call index %d skips", c.index);
      if (size_t(c.index) == r.calls.size()) r.calls.push_back({c.name, {}});
      r.calls[size_t(c.index)].arguments += c.arguments;
    }
  }
  *malformed = p.malformed();
  return r;
}

void check_same(const ParsedToolCalls& a, const ParsedToolCalls& b) {
  FUZZ_CHECK(a.content == b.content, "content differs");
  FUZZ_CHECK(a.calls.size() == b.calls.size(), "%zu calls vs %zu", a.calls.size(), b.calls.size());
  for (size_t i = 0; i < a.calls.size(); ++i)
    FUZZ_CHECK(a.calls[i].name == b.calls[i].name && a.calls[i].arguments == b.calls[i].arguments,
               "call %zu differs", i);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const ToolCallFormat f = data[0] % 2 ? ToolCallFormat::Llama3Json : ToolCallFormat::Hermes;
  const std::string_view text = fuzz::as_text(data + 2, size - 2);
  const size_t cut = text.empty() ? 0 : data[1] % (text.size() + 1);
  const ParsedToolCalls whole = parse_tool_calls(f, text);
  bool malformed = false;
  const ParsedToolCalls two = streamed(f, {text.substr(0, cut), text.substr(cut)}, &malformed);
  std::vector<std::string_view> threes;
  for (size_t i = 0; i < text.size(); i += 3) threes.push_back(text.substr(i, 3));
  bool malformed3 = false;
  const ParsedToolCalls three = streamed(f, threes, &malformed3);
  FUZZ_CHECK(malformed == malformed3, "malformed depends on the pieces");
  if (malformed) {
    FUZZ_CHECK(whole.content == text && whole.calls.empty(), "malformed: not all content");
    return 0;
  }
  check_same(whole, two);
  check_same(whole, three);
  for (const ToolCall& c : whole.calls) {
    FUZZ_CHECK(nlohmann::json::accept(c.arguments), "arguments are not JSON");
  }
  return 0;
}
