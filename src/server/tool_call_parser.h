// Tool calls in a model's output text, as vLLM's tool-call parsers find them
// (`serve --enable-auto-tool-choice --tool-call-parser NAME`). Pure text processing: no
// tokenizer, no request; the response builders turn the result into OpenAI's
// message.tool_calls and delta.tool_calls.
//
//   hermes       (Qwen2.5, Qwen3, Hermes): any text, then one or more blocks
//                  <tool_call>{"name": "f", "arguments": {...}}</tool_call>
//                The text before the first block is content; text between or after
//                blocks is content too unless it is only whitespace. The last block may
//                be unclosed (the output ended).
//   llama3_json  (Llama 3.x): the whole output is {"name": "f", "parameters": {...}}
//                (or "arguments"), optionally after <|python_tag|>; several calls are
//                separated by ";". An output that does not start with "{" (leading
//                whitespace aside) or <|python_tag|> is plain content.
//
// Streamed (ToolCallStreamParser): content is passed on as it comes, except a tail that
// may be the start of "<tool_call>" (or, after a call, whitespace that may end up between
// two calls). A call whose text begins {"name": "f", "arguments": {  is announced with its
// name as soon as that much is there, and its arguments object is then passed on piece by
// piece, exactly as the model writes it; a call written another way (other key order,
// arguments not an object) is sent whole once it is complete.
//
// Malformed calls: a block whose text is not such a JSON object is plain content (with
// its tags); in a whole (non-streamed) parse, any malformed block makes the whole output
// plain content, as vLLM does. A streamed call already announced stays a call.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace cpinfer {

enum class ToolCallFormat { Hermes, Llama3Json };

// "hermes" or "llama3_json"; throws Error naming the accepted names otherwise.
ToolCallFormat tool_call_format(const std::string& name);

// A piece of one call: its name the first time the call appears (empty afterwards), and
// the next piece of its arguments (a JSON text once all pieces are joined).
struct ToolCallDelta {
  int index = 0;  // the call's position in the output: 0, 1, ...
  std::string name;
  std::string arguments;
};

// What one piece of output text adds: content, and pieces of calls (at most one entry per
// call index, in order).
struct ToolParseDelta {
  std::string content;
  std::vector<ToolCallDelta> calls;
  bool empty() const { return content.empty() && calls.empty(); }
};

class ToolCallStreamParser {
 public:
  explicit ToolCallStreamParser(ToolCallFormat format) : format_(format) {}
  // The next piece of output text; last: the output ends with it, so whatever was held
  // back (a partial tag, an unclosed call) goes out too.
  ToolParseDelta feed(std::string_view text, bool last = false);
  ToolParseDelta finish() { return feed({}, true); }
  int num_calls() const { return next_index_; }
  // A call's text did not parse: it went out as content, or (announced already) stays a
  // call with what its arguments were.
  bool malformed() const { return malformed_; }

 private:
  enum class State { Start, Content, Body, Args, Tail, Rest };
  void step(ToolParseDelta* out, bool at_end);
  bool content_step(ToolParseDelta* out, bool at_end);
  bool body_step(ToolParseDelta* out, bool at_end);
  void end_body(ToolParseDelta* out, size_t body_end, size_t close_len);
  void emit_content(ToolParseDelta* out, std::string_view text);
  ToolCallDelta& call_delta(ToolParseDelta* out, int index);

  ToolCallFormat format_;
  State state_ = State::Start;
  std::string buf_;               // text not yet consumed
  bool gap_committed_ = true;     // the current run of text outside calls is being sent
  int next_index_ = 0;
  bool malformed_ = false;
  // Body / Args / Tail: the call's text so far is buf_[0, scanned_); JSON nesting there.
  size_t scanned_ = 0;
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
  bool body_started_ = false;  // Body: decided (announced, or to be sent whole)
  size_t args_from_ = 0;       // Args: the arguments text starts here in buf_
  int announced_ = -1;         // Args / Tail: the index of the announced call, else -1
};

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON text
};

struct ParsedToolCalls {
  std::string content;  // the text outside calls ("" when there is none)
  std::vector<ToolCall> calls;
};

// A whole output: the same result as the streamed parser's pieces put together, except
// that a malformed call makes all of `text` content and no call.
ParsedToolCalls parse_tool_calls(ToolCallFormat format, std::string_view text);

}  // namespace cpinfer
