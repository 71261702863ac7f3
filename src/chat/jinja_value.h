// The values a Jinja template computes with, modelled on the Python objects that
// Hugging Face transformers hands to Jinja2: undefined, None, bool, int, float, str,
// list/tuple, dict (insertion-ordered), namespace and callables.
//
// Values are immutable and cheap to copy (containers are shared), so a parsed template
// can hold constants that many renders read at once. The one mutable kind is the
// namespace (`{% set ns.x = ... %}`), and namespaces are only created during a render.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace cpinfer::jinja {

class Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // in insertion order, like dict

// Arguments of a call: positional, then keyword (in the order written).
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  const Value* kwarg(std::string_view name) const;
};

using NativeFunction = std::function<Value(const CallArgs&)>;

struct Function {
  std::string name;
  NativeFunction call;
};

struct Namespace {
  Dict attrs;
};

class Value {
 public:
  enum class Type : uint8_t {
    Undefined,
    None,
    Bool,
    Int,
    Float,
    String,
    List,
    Dict,
    Namespace,
    Function
  };

  Value() = default;  // undefined
  Value(bool b) : type_(Type::Bool), p_(b) {}
  Value(int v) : Value(int64_t(v)) {}
  Value(int64_t v) : type_(Type::Int), p_(v) {}
  Value(double v) : type_(Type::Float), p_(v) {}
  Value(std::string s) : type_(Type::String), p_(std::move(s)) {}
  Value(std::string_view s) : Value(std::string(s)) {}
  Value(const char* s) : Value(std::string(s)) {}

  // `hint` says what was undefined, for the error when it is used: "'x' is undefined".
  static Value undefined(std::string hint);
  static Value none();
  static Value list(List items);
  static Value tuple(List items);
  static Value dict(Dict items);
  static Value make_namespace(Dict attrs);
  static Value function(std::string name, NativeFunction fn);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::Undefined; }
  bool is_none() const { return type_ == Type::None; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_int() const { return type_ == Type::Int; }
  bool is_float() const { return type_ == Type::Float; }
  bool is_string() const { return type_ == Type::String; }
  bool is_list() const { return type_ == Type::List; }  // list or tuple
  bool is_tuple() const { return type_ == Type::List && tuple_; }
  bool is_dict() const { return type_ == Type::Dict; }
  bool is_namespace() const { return type_ == Type::Namespace; }
  bool is_function() const { return type_ == Type::Function; }
  // bool, int or float: Python's numbers (bool is an int there).
  bool is_number() const {
    return type_ == Type::Bool || type_ == Type::Int || type_ == Type::Float;
  }

  // The payload; a value of another type is an Error ("expected an integer, not str").
  bool as_bool() const;
  int64_t as_int() const;    // bool or int
  double as_double() const;  // bool, int or float
  const std::string& as_string() const;
  const List& as_list() const;
  const Dict& as_dict() const;
  Namespace& as_namespace() const;
  const Function& as_function() const;
  const std::string& undefined_hint() const;  // what was undefined, or ""

  // The value under `key` in a dict or namespace, or nullptr.
  const Value* find(std::string_view key) const;

  bool truthy() const;      // Python bool()
  std::string str() const;  // Python str() (undefined prints as nothing, as in Jinja)
  std::string repr() const;
  const char* type_name() const;           // Python's: "str", "int", "dict", "NoneType", ...
  bool same_object(const Value& o) const;  // `is` identity, for containers and callables

 private:
  using Payload = std::variant<std::monostate, bool, int64_t, double, std::string,
                               std::shared_ptr<const List>, std::shared_ptr<const Dict>,
                               std::shared_ptr<Namespace>, std::shared_ptr<const Function>>;
  Type type_ = Type::Undefined;
  bool tuple_ = false;
  Payload p_ = std::string();
};

// JSON objects keep their key order (ordered_json), or come sorted (json).
Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);

// Python ==, and <, <=, >, >= (`op` names the operator in the error for unorderable types).
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b, std::string_view op);

// json.dumps(v, ensure_ascii=..., indent=..., separators=..., sort_keys=...), as the tojson
// filter of transformers calls it. `indent`: the indent string (n spaces for indent=n), or
// none for a single line.
struct JsonOptions {
  std::optional<std::string> indent;
  std::optional<std::pair<std::string, std::string>> separators;
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string to_json(const Value& v, const JsonOptions& opts);

}  // namespace cpinfer::jinja
