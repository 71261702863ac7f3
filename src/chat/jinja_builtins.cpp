#include "chat/jinja_builtins.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>

#include "chat/jinja_ops.h"
#include "chat/jinja_string.h"
#include "core/error.h"

namespace cpinfer::jinja {
namespace {

using std::nullopt;

Value none() { return Value::none(); }

// Padding a template asks for (indent, center) is capped, so that a huge width is an error.
size_t pad_width(const Value& v, std::string_view fn) {
  const int64_t w = v.as_int();
  CPI_CHECK(w <= (int64_t(1) << 20), "{}(): width {} is too large", fn, w);
  return size_t(std::max<int64_t>(0, w));
}

// Jinja's attribute getter for sort/map/...: "a.b.0" looks each part up as an item first.
Value attr_path(const Value& v, const Value& path) {
  if (path.is_int()) return get_item(v, path);
  CPI_CHECK(path.is_string(), "attribute must be a string or an integer, not {}", path.type_name());
  Value cur = v;
  const std::string& p = path.as_string();
  size_t b = 0;
  while (true) {
    const size_t e = std::min(p.find('.', b), p.size());
    const std::string part = p.substr(b, e - b);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    int64_t index = 0;
    const bool is_index =
        digits && std::from_chars(part.data(), part.data() + part.size(), index).ec == std::errc();
    cur = is_index ? get_item(cur, Value(index)) : get_item(cur, Value(part));
    if (e == p.size()) return cur;
    b = e + 1;
  }
}

// The key a value sorts and compares by: strings lowercased unless case_sensitive.
Value fold(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.as_string()));
  return v;
}

Value keyed(const Value& v, const Value& attribute, bool case_sensitive) {
  return fold(attribute.is_none() ? v : attr_path(v, attribute), case_sensitive);
}

Value make_list(List items) { return Value::list(std::move(items)); }

bool flag(const Value& v) { return v.truthy(); }

// Python's int(str, base) / float(str): surrounding whitespace and '_' between digits allowed.
std::optional<int64_t> parse_int(std::string s, int base) {
  s = py_strip(s, nullopt, true, true);
  std::string t;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != '_' || (i > 0 && i + 1 < s.size())) t += s[i];
  if (t.empty()) return nullopt;
  size_t pos = 0;
  try {
    const long long v = std::stoll(t, &pos, base);
    if (pos != t.size()) return nullopt;
    return int64_t(v);
  } catch (const std::exception&) {
    return nullopt;
  }
}

std::optional<double> parse_float(const std::string& in) {
  const std::string s = py_strip(in, nullopt, true, true);
  if (s.empty()) return nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return nullopt;
  return v;
}

// The int filter of a finite float: toward zero, as Python's int(). Python would give a
// big integer past 64 bits; templates here compute with int64, so that is an error (the
// conversion itself would be undefined behaviour). 2^63 = 9.223372036854775808e18 exactly.
int64_t truncate_to_int(double d) {
  CPI_CHECK(d >= -9.223372036854775808e18 && d < 9.223372036854775808e18,
            "int filter: {} is outside the 64-bit integer range (chat templates compute with "
            "64-bit integers)", d);
  return int64_t(d);
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// select / reject / selectattr / rejectattr: keep the items whose test (or truth) is `keep`.
Value select_items(const Value& seq, const CallArgs& a, bool by_attr, bool keep,
                   std::string_view fn) {
  size_t i = 0;
  Value attr;
  if (by_attr) {
    CPI_CHECK(!a.args.empty(), "{}() needs the attribute name", fn);
    attr = a.args[i++];
  }
  std::string test;
  if (i < a.args.size()) {
    CPI_CHECK(a.args[i].is_string(), "{}(): the test name must be a string", fn);
    test = a.args[i++].as_string();
    CPI_CHECK(is_test(test), "no test named '{}'", test);
  }
  CallArgs rest;
  rest.args.assign(a.args.begin() + std::ptrdiff_t(i), a.args.end());
  rest.kwargs = a.kwargs;
  List out;
  for (const Value& item : iterate(seq)) {
    const Value v = by_attr ? attr_path(item, attr) : item;
    const bool ok = test.empty() ? v.truthy() : apply_test(test, v, rest);
    if (ok == keep) out.push_back(item);
  }
  return make_list(std::move(out));
}

Value map_items(const Value& seq, const CallArgs& a) {
  List out;
  if (const Value* attr = a.kwarg("attribute")) {
    const Value* dflt = a.kwarg("default");
    for (const Value& item : iterate(seq)) {
      Value v = attr_path(item, *attr);
      out.push_back(v.is_undefined() && dflt ? *dflt : v);
    }
    return make_list(std::move(out));
  }
  CPI_CHECK(!a.args.empty() && a.args[0].is_string(), "map() needs a filter name or attribute=...");
  const std::string filter = a.args[0].as_string();
  CPI_CHECK(is_filter(filter), "no filter named '{}'", filter);
  CallArgs rest;
  rest.args.assign(a.args.begin() + 1, a.args.end());
  rest.kwargs = a.kwargs;
  for (const Value& item : iterate(seq)) out.push_back(apply_filter(filter, item, rest));
  return make_list(std::move(out));
}

Value sorted(const Value& seq, const std::vector<Value>& p) {
  // sort(reverse=False, case_sensitive=False, attribute=None), stable like Python's
  List items = iterate(seq);
  const bool rev = flag(p[0]), cs = flag(p[1]);
  std::vector<std::pair<Value, size_t>> keys;
  for (size_t i = 0; i < items.size(); ++i) keys.emplace_back(keyed(items[i], p[2], cs), i);
  std::stable_sort(keys.begin(), keys.end(), [&](const auto& x, const auto& y) {
    return rev ? compare(y.first, x.first, "<") < 0 : compare(x.first, y.first, "<") < 0;
  });
  List out;
  for (const auto& k : keys) out.push_back(items[k.second]);
  return make_list(std::move(out));
}

Value min_max(const Value& seq, const std::vector<Value>& p, bool want_max) {
  const List items = iterate(seq);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = keyed(items[0], p[1], flag(p[0]));
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = keyed(items[i], p[1], flag(p[0]));
    const int c = compare(k, best_key, want_max ? ">" : "<");
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Value to_json_filter(const Value& v, const std::vector<Value>& p) {
  // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  JsonOptions o;
  o.ensure_ascii = flag(p[0]);
  if (p[1].is_int() || p[1].is_bool()) {
    o.indent = std::string(pad_width(p[1], "tojson"), ' ');
  } else if (p[1].is_string()) {
    o.indent = p[1].as_string();
  } else {
    CPI_CHECK(p[1].is_none(), "tojson(): indent must be an integer, a string or none, not {}",
              p[1].type_name());
  }
  if (!p[2].is_none()) {
    CPI_CHECK(p[2].is_list() && p[2].as_list().size() == 2 && p[2].as_list()[0].is_string() &&
                  p[2].as_list()[1].is_string(),
              "tojson(): separators must be a pair of strings");
    o.separators = std::make_pair(p[2].as_list()[0].as_string(), p[2].as_list()[1].as_string());
  }
  o.sort_keys = flag(p[3]);
  return Value(to_json(v, o));
}

Value indent_filter(const Value& v, const std::vector<Value>& p) {
  // indent(width=4, first=False, blank=False); lines split at "\n"
  const std::string ind =
      p[0].is_string() ? p[0].as_string() : std::string(pad_width(p[0], "indent"), ' ');
  std::vector<std::string> lines = py_split(v.str(), std::string("\n"), -1);
  if (!lines.empty() && lines.back().empty() && lines.size() > 1) lines.pop_back();
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    const bool pad = i == 0 ? flag(p[1]) : (!lines[i].empty() || flag(p[2]));
    if (pad) out += ind;
    out += lines[i];
  }
  return Value(std::move(out));
}

Value round_filter(const Value& v, const std::vector<Value>& p) {
  // round(precision=0, method='common'): 'common' rounds half to even, like Python's round()
  if (v.is_undefined()) undefined_error(v);
  CPI_CHECK(v.is_number(), "round() needs a number, not {}", v.type_name());
  CPI_CHECK(p[1].is_string(), "round(): method must be a string");
  const std::string& m = p[1].as_string();
  CPI_CHECK(m == "common" || m == "ceil" || m == "floor",
            "round(): method must be 'common', 'ceil' or 'floor', not '{}'", m);
  const double scale = std::pow(10.0, double(p[0].as_int()));
  const double x = v.as_double() * scale;
  const double r = m == "ceil" ? std::ceil(x) : m == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value(r / scale);
}

using FilterFn = Value (*)(const Value& v, const CallArgs& a);

Value filter_with(const Value& v, const CallArgs& a, std::string_view name, const Params& params,
                  Value (*body)(const Value&, const std::vector<Value>&)) {
  return body(v, bind_args(name, a, params));
}

const std::vector<std::pair<std::string_view, FilterFn>>& filters() {
  static const std::vector<std::pair<std::string_view, FilterFn>> table = {
      {"abs",
       [](const Value& v, const CallArgs& a) {
         bind_args("abs", a, {});
         if (v.is_undefined()) undefined_error(v);
         if (v.is_float()) return Value(std::fabs(v.as_double()));
         CPI_CHECK(v.is_int() || v.is_bool(), "bad operand type for abs(): '{}'", v.type_name());
         return v.as_int() < 0 ? neg(v) : Value(v.as_int());
       }},
      {"attr",
       [](const Value& v, const CallArgs& a) {
         const auto p = bind_args("attr", a, {{"name", nullopt}});
         CPI_CHECK(p[0].is_string(), "attr(): the name must be a string");
         return get_attr(v, p[0].as_string());
       }},
      {"capitalize",
       [](const Value& v, const CallArgs& a) {
         bind_args("capitalize", a, {});
         return Value(py_capitalize(v.str()));
       }},
      {"center",
       [](const Value& v, const CallArgs& a) {
         const auto p = bind_args("center", a, {{"width", Value(80)}});
         const std::string s = v.str();
         const int64_t n = code_point_count(s), w = int64_t(pad_width(p[0], "center"));
         if (w <= n) return Value(s);
         const int64_t marg = w - n, left = marg / 2 + (marg & w & 1);
         return Value(std::string(size_t(left), ' ') + s + std::string(size_t(marg - left), ' '));
       }},
      {"count",
       [](const Value& v, const CallArgs& a) {
         bind_args("count", a, {});
         return Value(length(v));
       }},
      {"default",
       [](const Value& v, const CallArgs& a) {
         const auto p =
             bind_args("default", a, {{"default_value", Value("")}, {"boolean", Value(false)}});
         return v.is_undefined() || (flag(p[1]) && !v.truthy()) ? p[0] : v;
       }},
      {"dictsort",
       [](const Value& v, const CallArgs& a) {
         const auto p = bind_args(
             "dictsort", a,
             {{"case_sensitive", Value(false)}, {"by", Value("key")}, {"reverse", Value(false)}});
         CPI_CHECK(v.is_dict(), "dictsort() needs a mapping, not {}", v.type_name());
         CPI_CHECK(p[1].is_string() && (p[1].as_string() == "key" || p[1].as_string() == "value"),
                   "dictsort(): 'by' must be 'key' or 'value'");
         const size_t pos = p[1].as_string() == "key" ? 0 : 1;
         List pairs;
         for (const auto& [k, x] : v.as_dict()) pairs.push_back(Value::tuple({Value(k), x}));
         std::vector<Value> sp = {p[2], p[0], Value(int64_t(pos))};
         return sorted(make_list(std::move(pairs)), sp);
       }},
      {"escape",
       [](const Value& v, const CallArgs& a) {
         bind_args("escape", a, {});
         return Value(html_escape(v.str()));
       }},
      {"first",
       [](const Value& v, const CallArgs& a) {
         bind_args("first", a, {});
         if (v.is_undefined()) return v;
         const List items = iterate(v);
         return items.empty() ? Value::undefined("No first item, sequence was empty.") : items[0];
       }},
      {"float",
       [](const Value& v, const CallArgs& a) {
         const auto p = bind_args("float", a, {{"default", Value(0.0)}});
         if (v.is_number()) return Value(v.as_double());
         if (v.is_string())
           if (auto d = parse_float(v.as_string())) return Value(*d);
         return p[0];
       }},
      {"indent",
       [](const Value& v, const CallArgs& a) {
         return filter_with(v, a, "indent",
                            {{"width", Value(4)}, {"first", Value(false)}, {"blank", Value(false)}},
                            indent_filter);
       }},
      {"int",
       [](const Value& v, const CallArgs& a) {
         const auto p = bind_args("int", a, {{"default", Value(0)}, {"base", Value(10)}});
         if (v.is_int() || v.is_bool()) return Value(v.as_int());
         if (v.is_float() && std::isfinite(v.as_double())) return Value(truncate_to_int(v.as_double()));
         if (v.is_string()) {
           if (auto i = parse_int(v.as_string(), int(p[1].as_int()))) return Value(*i);
           if (auto d = parse_float(v.as_string()); d && std::isfinite(*d))
             return Value(truncate_to_int(*d));
         }
         return p[0];
       }},
      {"items",
       [](const Value& v, const CallArgs& a) {
         bind_args("items", a, {});
         if (v.is_undefined()) return make_list({});
         CPI_CHECK(v.is_dict(), "Can only get item pairs from a mapping.");
         List pairs;
         for (const auto& [k, x] : v.as_dict()) pairs.push_back(Value::tuple({Value(k), x}));
         return make_list(std::move(pairs));
       }},
      {"join",
       [](const Value& v, const CallArgs& a) {
         const auto p = bind_args("join", a, {{"d", Value("")}, {"attribute", none()}});
         std::string out;
         const std::string sep = p[0].str();
         const List items = iterate(v);
         for (size_t i = 0; i < items.size(); ++i) {
           if (i) out += sep;
           out += (p[1].is_none() ? items[i] : attr_path(items[i], p[1])).str();
         }
         return Value(std::move(out));
       }},
      {"last",
       [](const Value& v, const CallArgs& a) {
         bind_args("last", a, {});
         if (v.is_undefined()) return v;
         const List items = iterate(v);
         return items.empty() ? Value::undefined("No last item, sequence was empty.")
                              : items.back();
       }},
      {"length",
       [](const Value& v, const CallArgs& a) {
         bind_args("length", a, {});
         return Value(length(v));
       }},
      {"list",
       [](const Value& v, const CallArgs& a) {
         bind_args("list", a, {});
         return make_list(iterate(v));
       }},
      {"lower",
       [](const Value& v, const CallArgs& a) {
         bind_args("lower", a, {});
         return Value(py_lower(v.str()));
       }},
      {"map", [](const Value& v, const CallArgs& a) { return map_items(v, a); }},
      {"max",
       [](const Value& v, const CallArgs& a) {
         const auto p =
             bind_args("max", a, {{"case_sensitive", Value(false)}, {"attribute", none()}});
         return min_max(v, p, true);
       }},
      {"min",
       [](const Value& v, const CallArgs& a) {
         const auto p =
             bind_args("min", a, {{"case_sensitive", Value(false)}, {"attribute", none()}});
         return min_max(v, p, false);
       }},
      {"reject", [](const Value& v,
                    const CallArgs& a) { return select_items(v, a, false, false, "reject"); }},
      {"rejectattr",
       [](const Value& v, const CallArgs& a) {
         return select_items(v, a, true, false, "rejectattr");
       }},
      {"replace",
       [](const Value& v, const CallArgs& a) {
         const auto p =
             bind_args("replace", a, {{"old", nullopt}, {"new", nullopt}, {"count", none()}});
         return Value(
             py_replace(v.str(), p[0].str(), p[1].str(), p[2].is_none() ? -1 : p[2].as_int()));
       }},
      {"reverse",
       [](const Value& v, const CallArgs& a) {
         bind_args("reverse", a, {});
         if (v.is_string()) {
           std::u32string cps = to_code_points(v.as_string());
           std::reverse(cps.begin(), cps.end());
           return Value(to_utf8(cps));
         }
         List items = iterate(v);
         std::reverse(items.begin(), items.end());
         return make_list(std::move(items));
       }},
      {"round",
       [](const Value& v, const CallArgs& a) {
         return filter_with(v, a, "round", {{"precision", Value(0)}, {"method", Value("common")}},
                            round_filter);
       }},
      {"safe",
       [](const Value& v, const CallArgs& a) {
         bind_args("safe", a, {});
         return v;
       }},
      {"select",
       [](const Value& v, const CallArgs& a) { return select_items(v, a, false, true, "select"); }},
      {"selectattr",
       [](const Value& v, const CallArgs& a) {
         return select_items(v, a, true, true, "selectattr");
       }},
      {"sort",
       [](const Value& v, const CallArgs& a) {
         return filter_with(
             v, a, "sort",
             {{"reverse", Value(false)}, {"case_sensitive", Value(false)}, {"attribute", none()}},
             sorted);
       }},
      {"string",
       [](const Value& v, const CallArgs& a) {
         bind_args("string", a, {});
         return Value(v.str());
       }},
      {"sum",
       [](const Value& v, const CallArgs& a) {
         const auto p = bind_args("sum", a, {{"attribute", none()}, {"start", Value(0)}});
         Value total = p[1];
         for (const Value& item : iterate(v))
           total = binary_op("+", total, p[0].is_none() ? item : attr_path(item, p[0]));
         return total;
       }},
      {"title",
       [](const Value& v, const CallArgs& a) {
         bind_args("title", a, {});
         return Value(py_title(v.str()));
       }},
      {"tojson",
       [](const Value& v, const CallArgs& a) {
         return filter_with(v, a, "tojson",
                            {{"ensure_ascii", Value(false)},
                             {"indent", none()},
                             {"separators", none()},
                             {"sort_keys", Value(false)}},
                            to_json_filter);
       }},
      {"trim",
       [](const Value& v, const CallArgs& a) {
         const auto p = bind_args("trim", a, {{"chars", none()}});
         std::optional<std::string> chars;
         if (!p[0].is_none()) chars = p[0].str();
         return Value(py_strip(v.str(), chars, true, true));
       }},
      {"unique",
       [](const Value& v, const CallArgs& a) {
         const auto p =
             bind_args("unique", a, {{"case_sensitive", Value(false)}, {"attribute", none()}});
         List out, seen;
         for (const Value& item : iterate(v)) {
           const Value k = keyed(item, p[1], flag(p[0]));
           if (std::none_of(seen.begin(), seen.end(),
                            [&](const Value& s) { return equals(s, k); })) {
             seen.push_back(k);
             out.push_back(item);
           }
         }
         return make_list(std::move(out));
       }},
      {"upper",
       [](const Value& v, const CallArgs& a) {
         bind_args("upper", a, {});
         return Value(py_upper(v.str()));
       }},
  };
  return table;
}

std::string_view canonical_filter(std::string_view name) {
  if (name == "d") return "default";
  if (name == "e") return "escape";
  return name;
}

FilterFn find_filter(std::string_view name) {
  name = canonical_filter(name);
  for (const auto& [n, f] : filters())
    if (n == name) return f;
  return nullptr;
}

bool number_test(const Value& v, std::string_view name, int64_t mod, int64_t rem) {
  if (v.is_undefined()) undefined_error(v);
  CPI_CHECK(v.is_number(), "the '{}' test needs a number, not {}", name, v.type_name());
  if (v.is_float()) return std::fmod(v.as_double(), double(mod)) == double(rem);
  const int64_t m = v.as_int() % mod;
  return (m < 0 ? m + mod : m) == rem;
}

using TestFn = bool (*)(const Value& v, const std::vector<Value>& args);

const std::vector<std::pair<std::string_view, TestFn>>& tests() {
  using V = const Value&;
  using A = const std::vector<Value>&;
  static const std::vector<std::pair<std::string_view, TestFn>> table = {
      {"boolean", [](V v, A) { return v.is_bool(); }},
      {"callable", [](V v, A) { return v.is_function(); }},
      {"defined", [](V v, A) { return !v.is_undefined(); }},
      {"divisibleby",
       [](V v, A a) {
         CPI_CHECK(a.size() == 1 && (a[0].is_int() || a[0].is_bool()) && a[0].as_int() != 0,
                   "divisibleby needs one non-zero integer");
         return number_test(v, "divisibleby", a[0].as_int(), 0);
       }},
      {"eq", [](V v, A a) { return equals(v, a.at(0)); }},
      {"escaped", [](V, A) { return false; }},
      {"even", [](V v, A) { return number_test(v, "even", 2, 0); }},
      {"false", [](V v, A) { return v.is_bool() && !v.as_bool(); }},
      {"filter", [](V v, A) { return v.is_string() && is_filter(v.as_string()); }},
      {"float", [](V v, A) { return v.is_float(); }},
      {"ge", [](V v, A a) { return compare(v, a.at(0), ">=") >= 0; }},
      {"gt", [](V v, A a) { return compare(v, a.at(0), ">") > 0; }},
      {"in", [](V v, A a) { return contains(a.at(0), v); }},
      {"integer", [](V v, A) { return v.is_int(); }},
      {"iterable",
       [](V v, A) { return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict(); }},
      {"le", [](V v, A a) { return compare(v, a.at(0), "<=") <= 0; }},
      {"lower", [](V v, A) { return py_is_lower(v.str()); }},
      {"lt", [](V v, A a) { return compare(v, a.at(0), "<") < 0; }},
      {"mapping", [](V v, A) { return v.is_dict(); }},
      {"ne", [](V v, A a) { return !equals(v, a.at(0)); }},
      {"none", [](V v, A) { return v.is_none(); }},
      {"number", [](V v, A) { return v.is_number(); }},
      {"odd", [](V v, A) { return number_test(v, "odd", 2, 1); }},
      {"sameas", [](V v, A a) { return v.same_object(a.at(0)); }},
      {"sequence",
       [](V v, A) { return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict(); }},
      {"string", [](V v, A) { return v.is_string(); }},
      {"test", [](V v, A) { return v.is_string() && is_test(v.as_string()); }},
      {"true", [](V v, A) { return v.is_bool() && v.as_bool(); }},
      {"undefined", [](V v, A) { return v.is_undefined(); }},
      {"upper", [](V v, A) { return py_is_upper(v.str()); }},
  };
  return table;
}

std::string_view canonical_test(std::string_view name) {
  if (name == "==" || name == "equalto") return "eq";
  if (name == "!=") return "ne";
  if (name == "<" || name == "lessthan") return "lt";
  if (name == "<=") return "le";
  if (name == ">" || name == "greaterthan") return "gt";
  if (name == ">=") return "ge";
  return name;
}

TestFn find_test(std::string_view name) {
  name = canonical_test(name);
  for (const auto& [n, f] : tests())
    if (n == name) return f;
  return nullptr;
}

// dict(...) and namespace(...): an optional mapping (or list of pairs), then keywords.
Dict mapping_args(const CallArgs& a, std::string_view fn) {
  CPI_CHECK(a.args.size() <= 1, "{}() takes at most 1 positional argument ({} given)", fn,
            a.args.size());
  Dict out;
  auto put = [&](const std::string& k, const Value& v) {
    for (auto& kv : out)
      if (kv.first == k) {
        kv.second = v;
        return;
      }
    out.emplace_back(k, v);
  };
  if (!a.args.empty()) {
    const Value& src = a.args[0];
    if (src.is_dict() || src.is_namespace()) {
      for (const auto& [k, v] : src.is_dict() ? src.as_dict() : src.as_namespace().attrs) put(k, v);
    } else {
      for (const Value& pair : iterate(src)) {
        const List kv = iterate(pair);
        CPI_CHECK(kv.size() == 2 && kv[0].is_string(),
                  "{}(): expected a mapping or (key, value) pairs with string keys", fn);
        put(kv[0].as_string(), kv[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kwargs) put(k, v);
  return out;
}

Value range_fn(const CallArgs& a) {
  CPI_CHECK(a.kwargs.empty() && !a.args.empty() && a.args.size() <= 3,
            "range() takes 1 to 3 positional arguments");
  for (const Value& v : a.args)
    CPI_CHECK(v.is_int() || v.is_bool(), "range() arguments must be integers, not {}",
              v.type_name());
  int64_t start = 0, stop, step = 1;
  if (a.args.size() == 1) {
    stop = a.args[0].as_int();
  } else {
    start = a.args[0].as_int();
    stop = a.args[1].as_int();
    if (a.args.size() == 3) step = a.args[2].as_int();
  }
  CPI_CHECK(step != 0, "range() arg 3 must not be zero");
  List out;
  constexpr size_t kMaxRange = 100000;  // Jinja's sandbox limit
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    CPI_CHECK(out.size() < kMaxRange, "range too big (more than {} items)", kMaxRange);
    out.emplace_back(i);
  }
  return make_list(std::move(out));
}

Value strftime_now(const CallArgs& a) {
  const auto p = bind_args("strftime_now", a, {{"format", nullopt}});
  CPI_CHECK(p[0].is_string(), "strftime_now() needs a format string, not {}", p[0].type_name());
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  const std::string& f = p[0].as_string();
  if (f.empty()) return Value("");
  for (size_t cap = 64 + f.size() * 4;; cap *= 2) {
    std::string buf(cap, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), f.c_str(), &tm);
    if (n > 0 || cap > 65536) return Value(buf.substr(0, n));
  }
}

}  // namespace

bool is_filter(std::string_view name) { return find_filter(name) != nullptr; }
bool is_test(std::string_view name) { return find_test(name) != nullptr; }

Value apply_filter(std::string_view name, const Value& operand, const CallArgs& args) {
  const FilterFn f = find_filter(name);
  CPI_CHECK(f, "no filter named '{}'", name);
  return f(operand, args);
}

bool apply_test(std::string_view name, const Value& operand, const CallArgs& args) {
  const TestFn f = find_test(name);
  CPI_CHECK(f, "no test named '{}'", name);
  CPI_CHECK(args.kwargs.empty(), "the '{}' test takes no keyword arguments", name);
  static const std::vector<std::string_view> kOneArg = {"divisibleby", "eq", "ge", "gt",    "in",
                                                        "le",          "lt", "ne", "sameas"};
  const std::string_view c = canonical_test(name);
  const size_t want = std::find(kOneArg.begin(), kOneArg.end(), c) != kOneArg.end() ? 1 : 0;
  CPI_CHECK(args.args.size() == want, "the '{}' test takes {} argument(s), {} given", name, want,
            args.args.size());
  return f(operand, args.args);
}

Dict make_globals() {
  Dict g;
  g.emplace_back("range", Value::function("range", range_fn));
  g.emplace_back("dict", Value::function("dict", [](const CallArgs& a) {
                   return Value::dict(mapping_args(a, "dict"));
                 }));
  g.emplace_back("namespace", Value::function("namespace", [](const CallArgs& a) {
                   return Value::make_namespace(mapping_args(a, "namespace"));
                 }));
  g.emplace_back("raise_exception",
                 Value::function("raise_exception", [](const CallArgs& a) -> Value {
                   const auto p = bind_args("raise_exception", a, {{"message", nullopt}});
                   fail("{}", p[0].str());
                 }));
  g.emplace_back("strftime_now", Value::function("strftime_now", strftime_now));
  return g;
}

}  // namespace cpinfer::jinja
