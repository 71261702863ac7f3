// Parsing JSON text that comes from outside the process (model files, request bodies) with
// the project's limits, so every reader refuses the same inputs with the same words.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "core/error.h"
#include "core/json_depth.h"

namespace cpinfer {

// Parses `text`, called `what` in errors (e.g. "'dir/config.json'", "the request body");
// `hint` ends either message (e.g. "; not a safetensors file?"). Throws Error with
//   "<what> is nested deeper than 128 levels<hint>": refused before parsing (json_depth.h);
//   "<what> is not valid JSON (at byte B): <parser message><hint>": a syntax error;
//   "<what> is not valid JSON: <parser message><hint>": anything else the parser throws,
//     e.g. out_of_range.406 for a number beyond double's range ("1e400").
// Json is nlohmann::json or nlohmann::ordered_json (which keeps the keys' order).
template <class Json = nlohmann::json>
Json parse_json_text(std::string_view text, std::string_view what, std::string_view hint = "") {
  if (json_nesting_depth(text, kMaxJsonDepth) > kMaxJsonDepth)
    fail("{} is nested deeper than {} levels{}", what, kMaxJsonDepth, hint);
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    fail("{} is not valid JSON (at byte {}): {}{}", what, e.byte, e.what(), hint);
  } catch (const nlohmann::json::exception& e) {
    fail("{} is not valid JSON: {}{}", what, e.what(), hint);
  }
}

// A short rendering of a JSON value for error messages: its text (bytes that are not UTF-8
// become U+FFFD, so rendering never throws), cut to `max_chars` with "..." at the end.
inline std::string json_excerpt(const nlohmann::json& v, size_t max_chars = 60) {
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return s.size() > max_chars ? s.substr(0, max_chars - 3) + "..." : s;
}

}  // namespace cpinfer
