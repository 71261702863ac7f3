// Jinja template source -> tokens, with the whitespace rules of the Environment that Hugging
// Face transformers renders chat templates in: trim_blocks=True (the first newline after a
// block or comment tag goes), lstrip_blocks=True (spaces and tabs before a block or comment
// tag on its own line go), `-` strips all whitespace on its side, `+` keeps it, one
// trailing newline of the template is dropped, and \r\n / \r become \n.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace cpinfer::jinja {

enum class TokenType {
  Text,        // template data, already whitespace-controlled
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,  // value: the unescaped text
  Int,
  Float,
  Op,  // value: the operator, e.g. "//", "==", "[", "|"
  Eof,
};

struct Token {
  TokenType type;
  std::string value;
  int line = 1;    // 1-based
  int column = 1;  // 1-based, in code points
  int64_t int_value = 0;
  double float_value = 0;
};

// Throws an Error for malformed tags, strings and numbers, naming the line and column.
std::vector<Token> tokenize(std::string_view source);

// "chat template syntax error at line L, column C: <what>"
template <typename... Args>
[[noreturn]] void syntax_error(int line, int column, fmt::format_string<Args...> f,
                               Args&&... args) {
  fail("chat template syntax error at line {}, column {}: {}", line, column,
       fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace cpinfer::jinja
