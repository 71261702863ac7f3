// Python str semantics on UTF-8 strings, for the Jinja interpreter: lengths, indices and
// slices count code points (not bytes, not UTF-16 units), whitespace is str.isspace(),
// and str()/repr()/json.dumps() spell values exactly as CPython does.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cpinfer::jinja {

// Code points of s (ill-formed bytes become U+FFFD, one per maximal subpart).
std::u32string to_code_points(std::string_view s);
std::string to_utf8(std::u32string_view cps);
int64_t code_point_count(std::string_view s);

// Python's str.isspace() for one code point.
bool is_py_space(char32_t c);

// str.strip/lstrip/rstrip: `chars` absent strips whitespace, else any code point in it.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                     bool right);

// str.split(sep=None, maxsplit=-1). An empty sep is an Error (as in Python).
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit);

// str.replace(old, new, count=-1); an empty `old` inserts `repl` between code points.
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count);

// str.upper/lower/title/capitalize with one-to-one (simple) case mappings.
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);
bool py_is_lower(std::string_view s);  // str.islower()
bool py_is_upper(std::string_view s);  // str.isupper()

// repr(str): single quotes unless the text has ' and no ", escapes for \\, the quote,
// \n \r \t and non-printable code points (\xNN, \uNNNN, \UNNNNNNNN).
std::string py_repr_string(std::string_view s);

// repr(float) / str(float): shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string py_float_repr(double v);

// A JSON string literal as Python's json.dumps writes it.
std::string json_quote(std::string_view s, bool ensure_ascii);

}  // namespace cpinfer::jinja
