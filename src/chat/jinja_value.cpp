#include "chat/jinja_value.h"

#include <algorithm>
#include <cmath>

#include "chat/jinja_string.h"
#include "core/error.h"

namespace cpinfer::jinja {

const Value* CallArgs::kwarg(std::string_view name) const {
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

Value Value::undefined(std::string hint) {
  Value v;
  v.p_ = std::move(hint);
  return v;
}

Value Value::none() {
  Value v;
  v.type_ = Type::None;
  v.p_ = std::monostate();
  return v;
}

Value Value::list(List items) {
  Value v;
  v.type_ = Type::List;
  v.p_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::tuple(List items) {
  Value v = list(std::move(items));
  v.tuple_ = true;
  return v;
}

Value Value::dict(Dict items) {
  Value v;
  v.type_ = Type::Dict;
  v.p_ = std::make_shared<const Dict>(std::move(items));
  return v;
}

Value Value::make_namespace(Dict attrs) {
  Value v;
  v.type_ = Type::Namespace;
  v.p_ = std::make_shared<Namespace>(Namespace{std::move(attrs)});
  return v;
}

Value Value::function(std::string name, NativeFunction fn) {
  Value v;
  v.type_ = Type::Function;
  v.p_ = std::make_shared<const Function>(Function{std::move(name), std::move(fn)});
  return v;
}

namespace {

[[noreturn]] void wrong_type(const Value& v, const char* want) {
  fail("expected {}, not {}", want, v.type_name());
}

}  // namespace

bool Value::as_bool() const {
  if (type_ != Type::Bool) wrong_type(*this, "a boolean");
  return std::get<bool>(p_);
}

int64_t Value::as_int() const {
  if (type_ == Type::Bool) return int64_t(std::get<bool>(p_));
  if (type_ != Type::Int) wrong_type(*this, "an integer");
  return std::get<int64_t>(p_);
}

double Value::as_double() const {
  if (type_ == Type::Float) return std::get<double>(p_);
  if (type_ != Type::Int && type_ != Type::Bool) wrong_type(*this, "a number");
  return double(as_int());
}

const std::string& Value::as_string() const {
  if (type_ != Type::String) wrong_type(*this, "a string");
  return std::get<std::string>(p_);
}

const List& Value::as_list() const {
  if (type_ != Type::List) wrong_type(*this, "a list");
  return *std::get<std::shared_ptr<const List>>(p_);
}

const Dict& Value::as_dict() const {
  if (type_ != Type::Dict) wrong_type(*this, "a dict");
  return *std::get<std::shared_ptr<const Dict>>(p_);
}

Namespace& Value::as_namespace() const {
  if (type_ != Type::Namespace) wrong_type(*this, "a namespace");
  return *std::get<std::shared_ptr<Namespace>>(p_);
}

const Function& Value::as_function() const {
  if (type_ != Type::Function) wrong_type(*this, "a function");
  return *std::get<std::shared_ptr<const Function>>(p_);
}

const std::string& Value::undefined_hint() const {
  static const std::string kNone;
  return type_ == Type::Undefined ? std::get<std::string>(p_) : kNone;
}

const Value* Value::find(std::string_view key) const {
  const Dict* d = type_ == Type::Dict        ? &as_dict()
                  : type_ == Type::Namespace ? &as_namespace().attrs
                                             : nullptr;
  if (!d) return nullptr;
  for (const auto& [k, v] : *d)
    if (k == key) return &v;
  return nullptr;
}

bool Value::truthy() const {
  switch (type_) {
    case Type::Undefined:
    case Type::None:
      return false;
    case Type::Bool:
      return as_bool();
    case Type::Int:
      return as_int() != 0;
    case Type::Float:
      return as_double() != 0.0;
    case Type::String:
      return !as_string().empty();
    case Type::List:
      return !as_list().empty();
    case Type::Dict:
      return !as_dict().empty();
    case Type::Namespace:
    case Type::Function:
      return true;
  }
  return false;
}

std::string Value::str() const {
  switch (type_) {
    case Type::Undefined:
      return "";
    case Type::String:
      return as_string();
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (type_) {
    case Type::Undefined:
      return "Undefined";
    case Type::None:
      return "None";
    case Type::Bool:
      return as_bool() ? "True" : "False";
    case Type::Int:
      return std::to_string(as_int());
    case Type::Float:
      return py_float_repr(as_double());
    case Type::String:
      return py_repr_string(as_string());
    case Type::List: {
      const List& l = as_list();
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + l[i].repr();
      if (tuple_ && l.size() == 1) out += ",";
      return out + (tuple_ ? ")" : "]");
    }
    case Type::Dict:
    case Type::Namespace: {
      const Dict& d = type_ == Type::Dict ? as_dict() : as_namespace().attrs;
      std::string out = "{";
      for (size_t i = 0; i < d.size(); ++i)
        out += (i ? ", " : "") + py_repr_string(d[i].first) + ": " + d[i].second.repr();
      out += "}";
      return type_ == Type::Dict ? out : "<Namespace " + out + ">";
    }
    case Type::Function:
      return "<function " + as_function().name + ">";
  }
  return "";
}

const char* Value::type_name() const {
  switch (type_) {
    case Type::Undefined:
      return "Undefined";
    case Type::None:
      return "NoneType";
    case Type::Bool:
      return "bool";
    case Type::Int:
      return "int";
    case Type::Float:
      return "float";
    case Type::String:
      return "str";
    case Type::List:
      return tuple_ ? "tuple" : "list";
    case Type::Dict:
      return "dict";
    case Type::Namespace:
      return "Namespace";
    case Type::Function:
      return "function";
  }
  return "?";
}

bool Value::same_object(const Value& o) const {
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::List:
      return &as_list() == &o.as_list();
    case Type::Dict:
      return &as_dict() == &o.as_dict();
    case Type::Namespace:
      return &as_namespace() == &o.as_namespace();
    case Type::Function:
      return &as_function() == &o.as_function();
    default:
      return equals(*this, o);
  }
}

namespace {

template <typename Json>
Value convert(const Json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();
      CPI_CHECK(u <= uint64_t(INT64_MAX), "integer {} is too large for a chat template", u);
      return Value(int64_t(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(convert(e));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict items;
      items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) items.emplace_back(it.key(), convert(*it));
      return Value::dict(std::move(items));
    }
    default:
      fail("cannot pass a JSON {} to a chat template", j.type_name());
  }
}

void dump(const Value& v, const JsonOptions& o, int level, std::string& out) {
  const std::string item_sep = o.separators ? o.separators->first : o.indent ? "," : ", ";
  const std::string key_sep = o.separators ? o.separators->second : ": ";
  auto newline = [&](int lvl) {
    if (!o.indent) return;
    out += '\n';
    for (int i = 0; i < lvl; ++i) out += *o.indent;
  };
  switch (v.type()) {
    case Value::Type::None:
      out += "null";
      return;
    case Value::Type::Bool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Type::Int:
      out += std::to_string(v.as_int());
      return;
    case Value::Type::Float: {
      const double d = v.as_double();
      if (std::isnan(d))
        out += "NaN";
      else if (std::isinf(d))
        out += d < 0 ? "-Infinity" : "Infinity";
      else
        out += py_float_repr(d);
      return;
    }
    case Value::Type::String:
      out += json_quote(v.as_string(), o.ensure_ascii);
      return;
    case Value::Type::List: {
      const List& l = v.as_list();
      if (l.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        dump(l[i], o, level + 1, out);
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Type::Dict: {
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.as_dict()) items.push_back(&kv);
      if (items.empty()) {
        out += "{}";
        return;
      }
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        out += json_quote(items[i]->first, o.ensure_ascii);
        out += key_sep;
        dump(items[i]->second, o, level + 1, out);
      }
      newline(level);
      out += '}';
      return;
    }
    default:
      fail("Object of type {} is not JSON serializable", v.type_name());
  }
}

}  // namespace

Value from_json(const nlohmann::json& j) { return convert(j); }
Value from_json(const nlohmann::ordered_json& j) { return convert(j); }

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::Undefined:
    case Value::Type::None:
      return true;
    case Value::Type::String:
      return a.as_string() == b.as_string();
    case Value::Type::List: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const List &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case Value::Type::Dict: {
      if (a.as_dict().size() != b.as_dict().size()) return false;
      for (const auto& [k, v] : a.as_dict()) {
        const Value* w = b.find(k);
        if (!w || !equals(v, *w)) return false;
      }
      return true;
    }
    default:
      return a.same_object(b);
  }
}

int compare(const Value& a, const Value& b, std::string_view op) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i])) return compare(x[i], y[i], op);
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  fail("'{}' not supported between instances of '{}' and '{}'", op, a.type_name(), b.type_name());
}

std::string to_json(const Value& v, const JsonOptions& opts) {
  std::string out;
  dump(v, opts, 0, out);
  return out;
}

}  // namespace cpinfer::jinja
