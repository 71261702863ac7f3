// A parsed Jinja template and its renderer, following Jinja2 as Hugging Face transformers
// configures it for chat templates (see jinja_lexer.h for the whitespace rules).
//
// Scoping is Jinja2's: `set` binds in the current scope; `if` opens no scope; each
// iteration of a `for` loop gets a fresh scope (its `set`s are gone at the next iteration
// and after the loop), so state that must outlive an iteration lives in a namespace();
// macros and `{% set x %}...{% endset %}` bodies get their own scope too.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace cpinfer::jinja {

class Template {
 public:
  // Parses `source`; a syntax error is an Error naming its line and column.
  explicit Template(std::string_view source);

  // Renders with the variables of `context` (a dict), over the globals of jinja_builtins.h.
  // Errors (raise_exception, undefined values used, type errors) are Errors naming the
  // line and column of the expression. Const and without shared mutable state: any
  // number of threads may render one Template at once.
  std::string render(const Value& context) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace cpinfer::jinja
