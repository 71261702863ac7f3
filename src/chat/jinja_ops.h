// What Jinja2 does with values, with Python's semantics: attribute and item access
// (attributes first for `.`, items first for `[]`, an undefined value when neither
// exists), slices, the methods of str / dict / list, arithmetic, `in`, iteration and len().
// Errors (a TypeError or UndefinedError in Python) are cpinfer::Error.
#pragma once
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace cpinfer::jinja {

// Throws the UndefinedError for using `u` ("'x' is undefined", "'dict object' has no
// attribute 'y'").
[[noreturn]] void undefined_error(const Value& u);

Value get_attr(const Value& obj, std::string_view name);  // obj.name
Value get_item(const Value& obj, const Value& key);       // obj[key]
// obj[start:stop:step]; none or undefined parts take their defaults.
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Calls obj.name(args) for a method of str, dict or list (false from has_method otherwise).
bool has_method(const Value& obj, std::string_view name);
Value call_method(const Value& obj, std::string_view name, const CallArgs& args);

// + - * / // % ** on two values; neg(v) is unary minus.
Value binary_op(std::string_view op, const Value& a, const Value& b);
Value neg(const Value& v);

bool contains(const Value& container, const Value& item);  // item in container
List iterate(const Value& v);  // list items, dict keys, str characters; undefined: nothing
int64_t length(const Value& v);

// Binds a call's arguments to a function's parameters like Python: positional first, then
// by keyword; nullopt marks a required parameter. Throws for missing, unknown or extra
// arguments.
using Params = std::vector<std::pair<std::string_view, std::optional<Value>>>;
std::vector<Value> bind_args(std::string_view function, const CallArgs& args, const Params& params);

}  // namespace cpinfer::jinja
