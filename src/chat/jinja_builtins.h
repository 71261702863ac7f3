// Jinja2's built-in filters and tests, and the global functions a chat template can call:
// Jinja's range / dict / namespace, plus raise_exception and strftime_now, which Hugging
// Face transformers adds (tojson is transformers' version too: json.dumps with
// ensure_ascii=False, indent, separators and sort_keys).
#pragma once
#include <string_view>

#include "chat/jinja_value.h"

namespace cpinfer::jinja {

bool is_filter(std::string_view name);
bool is_test(std::string_view name);

Value apply_filter(std::string_view name, const Value& operand, const CallArgs& args);
bool apply_test(std::string_view name, const Value& operand, const CallArgs& args);

// range, dict, namespace, raise_exception (throws an Error with the template's message),
// strftime_now (the local time, formatted like Python's datetime.strftime).
Dict make_globals();

}  // namespace cpinfer::jinja
