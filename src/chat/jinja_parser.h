// Jinja tokens -> syntax tree, with Jinja2's grammar and operator precedence (lowest first):
// `a if c else b`, or, and, not, comparisons (== != < <= > >= in, not in; chained), + -,
// ~, * / // %, **, unary - +, then postfix .attr [item] [a:b:c] (call), | filter, is test.
// Unknown tags, filters and tests are syntax errors here, as they are when Jinja2 compiles.
#pragma once
#include <string_view>

#include "chat/jinja_ast.h"

namespace cpinfer::jinja {

// Throws an Error naming the line and column of the first problem.
Body parse_template(std::string_view source);

}  // namespace cpinfer::jinja
