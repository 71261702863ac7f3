#include "chat/jinja_ops.h"

#include <utf8proc.h>

#include <algorithm>
#include <cmath>

#include "chat/jinja_string.h"
#include "core/error.h"

namespace cpinfer::jinja {
namespace {

// How Jinja names an object in "has no attribute" messages: "'dict object', "None".
std::string object_desc(const Value& obj) {
  if (obj.is_none()) return "None";
  return fmt::format("'{} object'", obj.type_name());
}

Value no_attribute(const Value& obj, std::string_view name) {
  return Value::undefined(fmt::format("{} has no attribute '{}'", object_desc(obj), name));
}

Value no_element(const Value& obj, const Value& key) {
  return Value::undefined(fmt::format("{} has no element {}", object_desc(obj), key.repr()));
}

bool is_index(const Value& v) { return v.is_int() || v.is_bool(); }

std::optional<std::string> opt_string(const Value& v, std::string_view fn, std::string_view what) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  CPI_CHECK(v.is_string(), "{}() argument '{}' must be str or None, not {}", fn, what,
            v.type_name());
  return v.as_string();
}

int64_t int_arg(const Value& v, std::string_view fn, std::string_view what) {
  CPI_CHECK(is_index(v), "{}() argument '{}' must be an integer, not {}", fn, what, v.type_name());
  return v.as_int();
}

// Python's slice index clamping (PySlice_AdjustIndices) for a sequence of length n.
void adjust(int64_t n, int64_t step, std::optional<int64_t> start, std::optional<int64_t> stop,
            int64_t* b, int64_t* e) {
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  *b = clamp(start, step < 0 ? n - 1 : 0);
  *e = clamp(stop, step < 0 ? -1 : n);
}

// str.startswith / endswith with an optional [start:end] window (in code points).
Value starts_or_ends(const std::string& s, const std::vector<Value>& a, bool ends,
                     std::string_view fn) {
  std::u32string cps = to_code_points(s);
  int64_t b, e;
  auto opt = [&](const Value& v) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    return int_arg(v, fn, "start/end");
  };
  adjust(int64_t(cps.size()), 1, opt(a[1]), opt(a[2]), &b, &e);
  const std::string window =
      e > b ? to_utf8(std::u32string_view(cps).substr(size_t(b), size_t(e - b))) : std::string();
  auto test = [&](const Value& p) {
    CPI_CHECK(p.is_string(), "{}() first arg must be str or a tuple of str, not {}", fn,
              p.type_name());
    const std::string& x = p.as_string();
    if (x.size() > window.size()) return false;
    return ends ? window.compare(window.size() - x.size(), x.size(), x) == 0
                : window.compare(0, x.size(), x) == 0;
  };
  if (a[0].is_list()) {
    for (const Value& p : a[0].as_list())
      if (test(p)) return Value(true);
    return Value(false);
  }
  return Value(test(a[0]));
}

Value string_method(const std::string& s, std::string_view name, const CallArgs& args) {
  auto bind = [&](const Params& p) { return bind_args(name, args, p); };
  const Value none = Value::none();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const auto a = bind({{"chars", none}});
    return Value(py_strip(s, opt_string(a[0], name, "chars"), name != "rstrip", name != "lstrip"));
  }
  if (name == "startswith" || name == "endswith") {
    const auto a = bind({{"prefix", std::nullopt}, {"start", none}, {"end", none}});
    return starts_or_ends(s, a, name == "endswith", name);
  }
  if (name == "split") {
    const auto a = bind({{"sep", none}, {"maxsplit", Value(-1)}});
    List out;
    for (std::string& part :
         py_split(s, opt_string(a[0], name, "sep"), int_arg(a[1], name, "maxsplit")))
      out.emplace_back(std::move(part));
    return Value::list(std::move(out));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    bind({});
    if (name == "upper") return Value(py_upper(s));
    if (name == "lower") return Value(py_lower(s));
    if (name == "title") return Value(py_title(s));
    return Value(py_capitalize(s));
  }
  if (name == "replace") {
    const auto a = bind({{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value(-1)}});
    CPI_CHECK(a[0].is_string() && a[1].is_string(),
              "replace() arguments must be str, not {} "
              "and {}",
              a[0].type_name(), a[1].type_name());
    return Value(py_replace(s, a[0].as_string(), a[1].as_string(), int_arg(a[2], name, "count")));
  }
  if (name == "join") {
    const auto a = bind({{"iterable", std::nullopt}});
    std::string out;
    const List items = iterate(a[0]);
    for (size_t i = 0; i < items.size(); ++i) {
      CPI_CHECK(items[i].is_string(), "sequence item {}: expected str instance, {} found", i,
                items[i].type_name());
      if (i) out += s;
      out += items[i].as_string();
    }
    return Value(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "count") {
    const auto a = bind({{"sub", std::nullopt}});
    CPI_CHECK(a[0].is_string(), "{}() argument must be str, not {}", name, a[0].type_name());
    const std::string& sub = a[0].as_string();
    if (name == "count") {
      if (sub.empty()) return Value(code_point_count(s) + 1);
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value(n);
    }
    const size_t p = name == "find" ? s.find(sub) : s.rfind(sub);
    if (p == std::string::npos) return Value(-1);
    return Value(code_point_count(std::string_view(s).substr(0, p)));
  }
  if (name == "isspace" || name == "isdigit" || name == "isalpha" || name == "isalnum" ||
      name == "islower" || name == "isupper") {
    bind({});
    if (name == "islower") return Value(py_is_lower(s));
    if (name == "isupper") return Value(py_is_upper(s));
    const std::u32string cps = to_code_points(s);
    if (cps.empty()) return Value(false);
    for (char32_t c : cps) {
      const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
      const bool digit = cat == UTF8PROC_CATEGORY_ND;
      const bool alpha = cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
                         cat == UTF8PROC_CATEGORY_LT || cat == UTF8PROC_CATEGORY_LM ||
                         cat == UTF8PROC_CATEGORY_LO;
      const bool ok = name == "isspace"   ? is_py_space(c)
                      : name == "isdigit" ? digit
                      : name == "isalpha" ? alpha
                                          : digit || alpha;
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  fail("'str object' has no attribute '{}'", name);
}

Value dict_method(const Value& d, std::string_view name, const CallArgs& args) {
  auto bind = [&](const Params& p) { return bind_args(name, args, p); };
  if (name == "items" || name == "keys" || name == "values") {
    bind({});
    List out;
    for (const auto& [k, v] : d.as_dict()) {
      if (name == "items")
        out.push_back(Value::tuple({Value(k), v}));
      else if (name == "keys")
        out.emplace_back(k);
      else
        out.push_back(v);
    }
    return Value::list(std::move(out));
  }
  if (name == "get") {
    const auto a = bind({{"key", std::nullopt}, {"default", Value::none()}});
    if (!a[0].is_string()) return a[1];
    const Value* v = d.find(a[0].as_string());
    return v ? *v : a[1];
  }
  fail("'dict object' has no attribute '{}'", name);
}

Value list_method(const Value& l, std::string_view name, const CallArgs& args) {
  const auto a = bind_args(name, args, {{"value", std::nullopt}});
  const List& items = l.as_list();
  if (name == "count")
    return Value(int64_t(std::count_if(items.begin(), items.end(),
                                       [&](const Value& v) { return equals(v, a[0]); })));
  for (size_t i = 0; i < items.size(); ++i)
    if (equals(items[i], a[0])) return Value(int64_t(i));
  fail("{} is not in list", a[0].repr());
}

// a (op) b on int64 with Python's result, or an Error where Python's int would outgrow 64 bits.
template <typename Op>
int64_t checked(Op op, int64_t a, int64_t b) {
  int64_t r = 0;
  CPI_CHECK(!op(a, b, &r), "integer overflow (chat templates compute with 64-bit integers)");
  return r;
}
bool add_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool sub_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mul_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

int64_t floor_div(int64_t a, int64_t b) {
  CPI_CHECK(b != 0, "integer division or modulo by zero");
  CPI_CHECK(!(a == INT64_MIN && b == -1),
            "integer overflow (chat templates compute with 64-bit "
            "integers)");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Strings and lists a template builds are capped, so that 'x' * 10**12 is an error.
constexpr int64_t kMaxBuilt = int64_t(1) << 26;

Value repeat(const Value& seq, int64_t n) {
  const int64_t unit =
      seq.is_string() ? int64_t(seq.as_string().size()) : int64_t(seq.as_list().size());
  CPI_CHECK(n <= 0 || unit <= kMaxBuilt / n, "repetition result too large (more than {} items)",
            kMaxBuilt);
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

}  // namespace

void undefined_error(const Value& u) {
  fail("{}", u.undefined_hint().empty() ? "undefined value" : u.undefined_hint());
}

Value get_attr(const Value& obj, std::string_view name) {
  switch (obj.type()) {
    case Value::Type::Undefined:
      undefined_error(obj);
    case Value::Type::Dict:
      if (has_method(obj, name)) break;
      if (const Value* v = obj.find(name)) return *v;
      return no_attribute(obj, name);
    case Value::Type::Namespace:
      if (const Value* v = obj.find(name)) return *v;
      return no_attribute(obj, name);
    default:
      if (has_method(obj, name)) break;
      return no_attribute(obj, name);
  }
  // A bound method, for a call later (`f = s.strip` ... `f()`); direct calls skip this.
  return Value::function(std::string(name), [obj, n = std::string(name)](const CallArgs& a) {
    return call_method(obj, n, a);
  });
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_dict()) {
    if (!key.is_string()) return no_element(obj, key);
    if (const Value* v = obj.find(key.as_string())) return *v;
    return get_attr(obj, key.as_string());
  }
  if ((obj.is_list() || obj.is_string()) && is_index(key)) {
    const int64_t n = length(obj);
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return no_element(obj, key);
    if (obj.is_list()) return obj.as_list()[size_t(i)];
    return Value(to_utf8(std::u32string(1, to_code_points(obj.as_string())[size_t(i)])));
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return no_element(obj, key);
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) undefined_error(obj);
  CPI_CHECK(obj.is_list() || obj.is_string(), "'{}' object is not subscriptable", obj.type_name());
  auto part = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    CPI_CHECK(is_index(v), "slice indices must be integers or None, not {}", v.type_name());
    return v.as_int();
  };
  const int64_t st = part(step).value_or(1);
  CPI_CHECK(st != 0, "slice step cannot be zero");
  std::u32string cps;
  if (obj.is_string()) cps = to_code_points(obj.as_string());
  const int64_t n = obj.is_string() ? int64_t(cps.size()) : int64_t(obj.as_list().size());
  int64_t b, e;
  adjust(n, st, part(start), part(stop), &b, &e);
  if (obj.is_string()) {
    std::u32string out;
    for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out += cps[size_t(i)];
    return Value(to_utf8(out));
  }
  List out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(obj.as_list()[size_t(i)]);
  return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

bool has_method(const Value& obj, std::string_view name) {
  static const std::vector<std::string_view> kStr = {
      "strip", "lstrip",  "rstrip",     "startswith", "endswith", "split",   "upper",
      "lower", "title",   "capitalize", "replace",    "join",     "find",    "rfind",
      "count", "isspace", "isdigit",    "isalpha",    "isalnum",  "islower", "isupper"};
  static const std::vector<std::string_view> kDict = {"items", "keys", "values", "get"};
  static const std::vector<std::string_view> kList = {"count", "index"};
  const auto& names = obj.is_string() ? kStr : obj.is_dict() ? kDict : kList;
  if (!obj.is_string() && !obj.is_dict() && !obj.is_list()) return false;
  return std::find(names.begin(), names.end(), name) != names.end();
}

Value call_method(const Value& obj, std::string_view name, const CallArgs& args) {
  if (obj.is_string()) return string_method(obj.as_string(), name, args);
  if (obj.is_dict()) return dict_method(obj, name, args);
  if (obj.is_list()) return list_method(obj, name, args);
  fail("'{}' object has no method '{}'", obj.type_name(), name);
}

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) return Value(checked(add_overflow, a.as_int(), b.as_int()));
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
    }
  } else if (op == "-") {
    if (ints) return Value(checked(sub_overflow, a.as_int(), b.as_int()));
    if (nums) return Value(a.as_double() - b.as_double());
  } else if (op == "*") {
    if (ints) return Value(checked(mul_overflow, a.as_int(), b.as_int()));
    if (nums) return Value(a.as_double() * b.as_double());
    const bool a_seq = a.is_string() || a.is_list(), b_seq = b.is_string() || b.is_list();
    if (a_seq && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
    if (b_seq && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
  } else if (op == "/") {
    if (nums) {
      CPI_CHECK(b.as_double() != 0.0, "division by zero");
      return Value(a.as_double() / b.as_double());
    }
  } else if (op == "//") {
    if (ints) return Value(floor_div(a.as_int(), b.as_int()));
    if (nums) {
      CPI_CHECK(b.as_double() != 0.0, "float floor division by zero");
      return Value(std::floor(a.as_double() / b.as_double()));
    }
  } else if (op == "%") {
    if (ints) {
      const int64_t q = floor_div(a.as_int(), b.as_int());
      return Value(a.as_int() - q * b.as_int());
    }
    if (nums) {
      const double x = a.as_double(), y = b.as_double();
      CPI_CHECK(y != 0.0, "float modulo by zero");
      double m = std::fmod(x, y);
      if (m != 0.0 && ((m < 0) != (y < 0))) m += y;  // the sign of the divisor, as in Python
      return Value(m);
    }
    CPI_CHECK(!a.is_string(), "printf-style string formatting with % is not supported");
  } else if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), out = 1;
      while (e > 0) {
        if (e & 1) out = checked(mul_overflow, out, base);
        e >>= 1;
        if (e > 0) base = checked(mul_overflow, base, base);
      }
      return Value(out);
    }
    if (nums) {
      CPI_CHECK(!(a.as_double() == 0.0 && b.as_double() < 0),
                "0.0 cannot be raised to a negative power");
      return Value(std::pow(a.as_double(), b.as_double()));
    }
  }
  fail("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name());
}

Value neg(const Value& v) {
  if (v.is_undefined()) undefined_error(v);
  if (v.is_float()) return Value(-v.as_double());
  CPI_CHECK(v.is_int() || v.is_bool(), "bad operand type for unary -: '{}'", v.type_name());
  CPI_CHECK(v.as_int() != INT64_MIN,
            "integer overflow (chat templates compute with 64-bit "
            "integers)");
  return Value(-v.as_int());
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::Undefined:
      return false;  // iterating an undefined value finds nothing
    case Value::Type::String:
      CPI_CHECK(item.is_string(), "'in <string>' requires string as left operand, not {}",
                item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Type::List:
      for (const Value& v : container.as_list())
        if (equals(v, item)) return true;
      return false;
    case Value::Type::Dict:
      return item.is_string() && container.find(item.as_string()) != nullptr;
    default:
      fail("argument of type '{}' is not iterable", container.type_name());
  }
}

List iterate(const Value& v) {
  switch (v.type()) {
    case Value::Type::Undefined:
      return {};
    case Value::Type::List:
      return v.as_list();
    case Value::Type::Dict: {
      List keys;
      for (const auto& kv : v.as_dict()) keys.emplace_back(kv.first);
      return keys;
    }
    case Value::Type::String: {
      List chars;
      for (char32_t c : to_code_points(v.as_string()))
        chars.emplace_back(to_utf8(std::u32string(1, c)));
      return chars;
    }
    default:
      fail("'{}' object is not iterable", v.type_name());
  }
}

int64_t length(const Value& v) {
  switch (v.type()) {
    case Value::Type::Undefined:
      return 0;
    case Value::Type::String:
      return code_point_count(v.as_string());
    case Value::Type::List:
      return int64_t(v.as_list().size());
    case Value::Type::Dict:
      return int64_t(v.as_dict().size());
    default:
      fail("object of type '{}' has no len()", v.type_name());
  }
}

std::vector<Value> bind_args(std::string_view function, const CallArgs& args,
                             const Params& params) {
  CPI_CHECK(args.args.size() <= params.size(), "{}() takes at most {} argument(s) ({} given)",
            function, params.size(), args.args.size());
  std::vector<std::optional<Value>> bound(params.size());
  for (size_t i = 0; i < args.args.size(); ++i) bound[i] = args.args[i];
  for (const auto& [k, v] : args.kwargs) {
    size_t i = 0;
    while (i < params.size() && params[i].first != k) ++i;
    CPI_CHECK(i < params.size(), "{}() got an unexpected keyword argument '{}'", function, k);
    CPI_CHECK(!bound[i], "{}() got multiple values for argument '{}'", function, k);
    bound[i] = v;
  }
  std::vector<Value> out;
  out.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (!bound[i]) {
      CPI_CHECK(params[i].second.has_value(), "{}() missing required argument '{}'", function,
                params[i].first);
      bound[i] = params[i].second;
    }
    out.push_back(std::move(*bound[i]));
  }
  return out;
}

}  // namespace cpinfer::jinja
