// How deeply JSON text nests, found by a linear scan of the brackets outside strings,
// without parsing. nlohmann's parser is iterative, but dump() and every walk over a value
// (error messages, the chat template's tojson) recurse, so text nested deeper than a cap
// (e.g. 100000 '[' in a request body) is refused before it is parsed.
#pragma once
#include <cstddef>
#include <string_view>

namespace cpinfer {

// Deepest nesting of [ and { in `text` (0 for a scalar). Stops scanning as soon as the
// depth exceeds `limit` and returns limit + 1. Malformed text gives some depth; the parser
// reports what is wrong with it.
inline size_t json_nesting_depth(std::string_view text, size_t limit = size_t(-1)) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > limit) return limit + 1;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// The nesting cap of request bodies and of the model's JSON files (config.json,
// tokenizer.json, safetensors headers): far above what real files and tool schemas use.
constexpr size_t kMaxJsonDepth = 128;

}  // namespace cpinfer
