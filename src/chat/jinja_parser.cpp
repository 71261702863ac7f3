#include "chat/jinja_parser.h"

#include <algorithm>

#include "chat/jinja_builtins.h"
#include "chat/jinja_lexer.h"

namespace cpinfer::jinja {
namespace {

using Names = std::vector<std::string>;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse() {
    Body body = subparse({});
    return body;
  }

 private:
  // ---- the token stream -----------------------------------------------------------
  const Token& cur() const { return t_[i_]; }
  const Token& look(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  static bool is_op(const Token& t, std::string_view op) {
    return t.type == TokenType::Op && t.value == op;
  }
  static bool is_name(const Token& t, std::string_view name) {
    return t.type == TokenType::Name && t.value == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(cur(), op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(cur(), name)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::Text:
        return "template text";
      case TokenType::VarBegin:
        return "'{{'";
      case TokenType::VarEnd:
        return "end of print statement '}}'";
      case TokenType::BlockBegin:
        return "'{%'";
      case TokenType::BlockEnd:
        return "end of statement block '%}'";
      case TokenType::Name:
        return "'" + t.value + "'";
      case TokenType::String:
        return "string";
      case TokenType::Int:
      case TokenType::Float:
        return "number " + t.value;
      case TokenType::Op:
        return "'" + t.value + "'";
      case TokenType::Eof:
        return "end of template";
    }
    return "?";
  }

  template <typename... Args>
  [[noreturn]] void error(const Token& at, fmt::format_string<Args...> f, Args&&... args) const {
    syntax_error(at.line, at.column, f, std::forward<Args>(args)...);
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) error(cur(), "expected '{}', found {}", op, describe(cur()));
  }
  void expect(TokenType type, const char* what) {
    if (cur().type != type) error(cur(), "expected {}, found {}", what, describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().type != TokenType::Name) error(cur(), "expected a name, found {}", describe(cur()));
    return next().value;
  }

  // Bounds the parser's recursion (and so the renderer's), so that a hostile template
  // like "((((...))))" is an error rather than a stack overflow.
  static constexpr int kMaxDepth = 200;
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.error(p.cur(), "nested more than {} levels deep", kMaxDepth);
    }
    ~Nest() { --p.depth_; }
  };

  ExprPtr node(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }
  StmtPtr stmt(Stmt::Kind kind, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = at.line;
    s->column = at.column;
    return s;
  }

  // ---- statements -------------------------------------------------------------------

  // Template data, {{ }} and {% %} until a block tag named in `end` (left as the current
  // token, right after its '{%') or the end of the template.
  Body subparse(const Names& end) {
    struct Expecting {  // the end tags of the enclosing blocks, for "unknown tag" errors
      std::vector<const Names*>& stack;
      Expecting(std::vector<const Names*>& s, const Names& e) : stack(s) { stack.push_back(&e); }
      ~Expecting() { stack.pop_back(); }
    } expecting(expecting_, end);
    const Nest nest(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      switch (t.type) {
        case TokenType::Eof:
          return body;
        case TokenType::Text: {
          auto s = stmt(Stmt::Kind::Text, t);
          s->text = next().value;
          body.push_back(std::move(s));
          break;
        }
        case TokenType::VarBegin: {
          auto s = stmt(Stmt::Kind::Output, t);
          next();
          s->expr = parse_tuple(true, {}, false);
          expect(TokenType::VarEnd, "'}}'");
          body.push_back(std::move(s));
          break;
        }
        case TokenType::BlockBegin: {
          const Token& name = look();
          if (name.type == TokenType::Name &&
              std::find(end.begin(), end.end(), name.value) != end.end()) {
            next();
            return body;
          }
          next();
          body.push_back(parse_statement());
          expect(TokenType::BlockEnd, "'%}'");
          break;
        }
        default:
          error(t, "unexpected {}", describe(t));
      }
    }
  }

  // The body of a block statement: '%}' then statements up to one of `end`, which is
  // consumed (with the tokens after it left to the caller) when drop_needle.
  Body parse_statements(const Names& end, const Token& opener, bool drop_needle) {
    expect(TokenType::BlockEnd, "'%}'");
    Body body = subparse(end);
    if (cur().type == TokenType::Eof) {
      std::string tags;
      for (const std::string& n : end) tags += (tags.empty() ? "'" : " or '") + n + "'";
      error(opener, "the '{}' tag is never closed (expected {} before the end of the template)",
            opener.value, tags);
    }
    if (drop_needle) next();
    return body;
  }

  StmtPtr parse_statement() {
    const Token& t = cur();
    if (t.type != TokenType::Name) error(t, "expected a tag name, found {}", describe(t));
    const std::string& n = t.value;
    if (n == "if") return parse_if();
    if (n == "for") return parse_for();
    if (n == "set") return parse_set();
    if (n == "macro") return parse_macro();
    if (n == "break" || n == "continue") {
      if (loop_depth_ == 0) error(t, "'{}' outside of a for loop", n);
      auto s = stmt(n == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, t);
      next();
      return s;
    }
    if (n == "generation") {  // transformers' assistant-mask marker: renders its body
      auto s = stmt(Stmt::Kind::Block, t);
      const Token& opener = next();
      s->body = parse_statements({"endgeneration"}, opener, true);
      return s;
    }
    static const Names kUnsupported = {"call",  "filter", "include",    "import", "from", "extends",
                                       "block", "with",   "autoescape", "do",     "print"};
    if (std::find(kUnsupported.begin(), kUnsupported.end(), n) != kUnsupported.end())
      error(t, "the '{}' tag is not supported by cpinfer's chat template renderer", n);
    const Names* open = expecting_.empty() ? nullptr : expecting_.back();
    if (!open || open->empty()) error(t, "unknown tag '{}'", n);
    std::string tags;
    for (const std::string& e : *open) tags += (tags.empty() ? "'" : " or '") + e + "'";
    error(t, "unknown tag '{}' (expected {} here)", n, tags);
  }

  StmtPtr parse_if() {
    auto s = stmt(Stmt::Kind::If, cur());
    const Token& opener = next();
    while (true) {
      ExprPtr cond = parse_tuple(false, {}, false);
      Body body = parse_statements({"elif", "else", "endif"}, opener, false);
      s->branches.emplace_back(std::move(cond), std::move(body));
      const Token& tag = next();
      if (tag.value == "elif") continue;
      if (tag.value == "else") s->else_body = parse_statements({"endif"}, opener, true);
      break;
    }
    return s;
  }

  // Assignment targets: names separated by commas ("a" or "a, b"), or with `ns_attr`
  // allowed, one "ns.attr".
  void parse_targets(Stmt& s, bool ns_attr, const Names& end_names) {
    while (true) {
      const Token& t = cur();
      if (t.type != TokenType::Name || t.value == "true" || t.value == "false" ||
          t.value == "none" || t.value == "True" || t.value == "False" || t.value == "None")
        error(t, "can't assign to {}", describe(t));
      s.targets.push_back(next().value);
      if (ns_attr && s.targets.size() == 1 && is_op(cur(), ".")) {
        next();
        s.targets.push_back(expect_name());
        s.ns_attr = true;
        if (is_op(cur(), ",")) error(cur(), "can't assign to a tuple with a namespace attribute");
        return;
      }
      if (!skip_op(",")) return;
      if (cur().type == TokenType::Name &&
          std::find(end_names.begin(), end_names.end(), cur().value) != end_names.end())
        return;  // a trailing comma
    }
  }

  StmtPtr parse_for() {
    auto s = stmt(Stmt::Kind::For, cur());
    const Token& opener = next();
    parse_targets(*s, false, {"in"});
    if (!skip_name("in")) error(cur(), "expected 'in', found {}", describe(cur()));
    s->expr = parse_tuple(false, {"recursive"}, false);
    if (skip_name("if")) s->filter = parse_expression(true);
    if (is_name(cur(), "recursive")) error(cur(), "recursive for loops are not supported");
    ++loop_depth_;
    s->body = parse_statements({"endfor", "else"}, opener, false);
    --loop_depth_;
    if (next().value == "else") s->else_body = parse_statements({"endfor"}, opener, true);
    return s;
  }

  StmtPtr parse_set() {
    auto s = stmt(Stmt::Kind::Set, cur());
    const Token& opener = next();
    parse_targets(*s, true, {});
    if (skip_op("=")) {
      s->expr = parse_tuple(true, {}, false);
      return s;
    }
    if (s->ns_attr || s->targets.size() != 1)
      error(cur(), "expected '=' after the targets of a set");
    if (is_op(cur(), "|")) error(cur(), "filters on a block set are not supported");
    s->kind = Stmt::Kind::SetBlock;
    s->body = parse_statements({"endset"}, opener, true);
    return s;
  }

  StmtPtr parse_macro() {
    auto s = stmt(Stmt::Kind::Macro, cur());
    const Token& opener = next();
    s->name = expect_name();
    expect_op("(");
    bool defaults = false;
    while (!is_op(cur(), ")")) {
      if (!s->params.empty()) expect_op(",");
      if (is_op(cur(), ")")) break;
      const Token& at = cur();
      std::string p = expect_name();
      ExprPtr def;
      if (skip_op("=")) {
        def = parse_expression(true);
        defaults = true;
      } else if (defaults) {
        error(at, "non-default argument follows default argument");
      }
      s->params.emplace_back(std::move(p), std::move(def));
    }
    expect_op(")");
    const int depth = loop_depth_;
    loop_depth_ = 0;  // a macro body is not inside the loop around its definition
    s->body = parse_statements({"endmacro"}, opener, true);
    loop_depth_ = depth;
    return s;
  }

  // ---- expressions ----------------------------------------------------------------

  bool is_tuple_end(const Names& extra) const {
    const Token& t = cur();
    if (t.type == TokenType::VarEnd || t.type == TokenType::BlockEnd || is_op(t, ")")) return true;
    return t.type == TokenType::Name &&
           std::find(extra.begin(), extra.end(), t.value) != extra.end();
  }

  // Expressions separated by commas: one is itself, several (or "()") a tuple.
  ExprPtr parse_tuple(bool with_condexpr, const Names& extra_end, bool explicit_parens) {
    const Token& start = cur();
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      args.push_back(parse_expression(with_condexpr));
      if (is_op(cur(), ",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) error(cur(), "expected an expression, found {}", describe(cur()));
    }
    auto e = node(Expr::Kind::Tuple, start);
    e->items = std::move(args);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    const Nest nest(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr e = parse_or();
    while (is_name(cur(), "if")) {
      auto c = node(Expr::Kind::Cond, next());
      ExprPtr test = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_condexpr() : nullptr;
      c->items.push_back(std::move(test));
      c->items.push_back(std::move(e));
      c->items.push_back(std::move(otherwise));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(Expr::Kind kind, const Token& at, ExprPtr a, ExprPtr b, std::string op = {}) {
    auto e = node(kind, at);
    e->name = std::move(op);
    e->items.push_back(std::move(a));
    e->items.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name(cur(), "or")) {
      const Token& at = next();
      e = binary(Expr::Kind::Or, at, std::move(e), parse_and());
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name(cur(), "and")) {
      const Token& at = next();
      e = binary(Expr::Kind::And, at, std::move(e), parse_not());
    }
    return e;
  }

  ExprPtr parse_not() {
    const Nest nest(*this);
    if (is_name(cur(), "not")) {
      auto e = node(Expr::Kind::Not, next());
      e->items.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Token& start = cur();
    ExprPtr first = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> rest;
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::Op && (t.value == "==" || t.value == "!=" || t.value == "<" ||
                                      t.value == "<=" || t.value == ">" || t.value == ">=")) {
        ops.push_back(next().value);
      } else if (is_name(t, "in")) {
        next();
        ops.push_back("in");
      } else if (is_name(t, "not") && is_name(look(), "in")) {
        next();
        next();
        ops.push_back("not in");
      } else {
        break;
      }
      rest.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto e = node(Expr::Kind::Compare, start);
    e->items.push_back(std::move(first));
    for (ExprPtr& r : rest) e->items.push_back(std::move(r));
    e->ops = std::move(ops);
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op(cur(), "+") || is_op(cur(), "-")) {
      const Token& at = next();
      e = binary(Expr::Kind::Binary, at, std::move(e), parse_concat(), at.value);
    }
    return e;
  }

  ExprPtr parse_concat() {
    const Token& start = cur();
    ExprPtr first = parse_math2();
    if (!is_op(cur(), "~")) return first;
    auto e = node(Expr::Kind::Concat, start);
    e->items.push_back(std::move(first));
    while (skip_op("~")) e->items.push_back(parse_math2());
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op(cur(), "*") || is_op(cur(), "/") || is_op(cur(), "//") || is_op(cur(), "%")) {
      const Token& at = next();
      e = binary(Expr::Kind::Binary, at, std::move(e), parse_pow(), at.value);
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op(cur(), "**")) {
      const Token& at = next();
      e = binary(Expr::Kind::Binary, at, std::move(e), parse_unary(true), "**");
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    const Nest nest(*this);
    ExprPtr e;
    if (is_op(cur(), "-") || is_op(cur(), "+")) {
      const Token& at = next();
      e = node(at.value == "-" ? Expr::Kind::Neg : Expr::Kind::Pos, at);
      e->items.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.type) {
      case TokenType::Name: {
        next();
        auto e = node(Expr::Kind::Const, t);
        if (t.value == "true" || t.value == "True") {
          e->value = Value(true);
        } else if (t.value == "false" || t.value == "False") {
          e->value = Value(false);
        } else if (t.value == "none" || t.value == "None") {
          e->value = Value::none();
        } else {
          e->kind = Expr::Kind::Name;
          e->name = t.value;
        }
        return e;
      }
      case TokenType::String: {
        auto e = node(Expr::Kind::Const, t);
        std::string s;
        while (cur().type == TokenType::String) s += next().value;  // "a" "b" is "ab"
        e->value = Value(std::move(s));
        return e;
      }
      case TokenType::Int:
      case TokenType::Float: {
        auto e = node(Expr::Kind::Const, t);
        e->value = t.type == TokenType::Int ? Value(t.int_value) : Value(t.float_value);
        next();
        return e;
      }
      case TokenType::Op:
        if (t.value == "(") {
          next();
          ExprPtr e = parse_tuple(true, {}, true);
          expect_op(")");
          return e;
        }
        if (t.value == "[") return parse_list();
        if (t.value == "{") return parse_dict();
        break;
      default:
        break;
    }
    error(t, "unexpected {}", describe(t));
  }

  ExprPtr parse_list() {
    auto e = node(Expr::Kind::List, next());
    while (!is_op(cur(), "]")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op(cur(), "]")) break;
      e->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return e;
  }

  ExprPtr parse_dict() {
    auto e = node(Expr::Kind::Dict, next());
    while (!is_op(cur(), "}")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op(cur(), "}")) break;
      e->items.push_back(parse_expression(true));
      expect_op(":");
      e->items.push_back(parse_expression(true));
    }
    expect_op("}");
    return e;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(cur(), ".") || is_op(cur(), "[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op(cur(), "(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op(cur(), "|")) {
        e = parse_filter(std::move(e));
      } else if (is_name(cur(), "is")) {
        e = parse_test(std::move(e));
      } else if (is_op(cur(), "(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  // obj.name, obj.0, obj[key] or obj[a:b:c]; the node's position is where obj starts.
  ExprPtr parse_subscript(ExprPtr obj) {
    const int line = obj->line, column = obj->column;
    ExprPtr e = parse_subscript_at(std::move(obj));
    e->line = line;
    e->column = column;
    return e;
  }

  ExprPtr parse_subscript_at(ExprPtr obj) {
    const Token& t = next();
    if (t.value == ".") {
      const Token& a = cur();
      if (a.type == TokenType::Name) {
        auto e = node(Expr::Kind::Attr, t);
        e->name = next().value;
        e->items.push_back(std::move(obj));
        return e;
      }
      if (a.type != TokenType::Int)
        error(a, "expected a name or number after '.', found {}", describe(a));
      auto e = node(Expr::Kind::Item, t);
      auto k = node(Expr::Kind::Const, a);
      k->value = Value(next().int_value);
      e->items.push_back(std::move(obj));
      e->items.push_back(std::move(k));
      return e;
    }
    // '[': one subscript or slice (several separated by commas make a tuple key).
    auto e = node(Expr::Kind::Item, t);
    std::vector<ExprPtr> args;
    while (!is_op(cur(), "]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.empty()) error(t, "expected a subscript expression");
    e->items.push_back(std::move(obj));
    if (args.size() == 1) {
      e->items.push_back(std::move(args[0]));
    } else {
      auto tup = node(Expr::Kind::Tuple, t);
      tup->items = std::move(args);
      e->items.push_back(std::move(tup));
    }
    return e;
  }

  ExprPtr parse_subscribed() {
    const Token& start = cur();
    ExprPtr first;
    if (!is_op(cur(), ":")) {
      first = parse_expression(true);
      if (!is_op(cur(), ":")) return first;
    }
    next();  // ':'
    auto s = node(Expr::Kind::Slice, start);
    s->items.push_back(std::move(first));
    auto part = [&]() -> ExprPtr {
      if (is_op(cur(), "]") || is_op(cur(), ",") || is_op(cur(), ":")) return nullptr;
      return parse_expression(true);
    };
    s->items.push_back(part());
    if (skip_op(":")) {
      s->items.push_back(part());
    } else {
      s->items.push_back(nullptr);
    }
    return s;
  }

  void parse_call_args(Expr& e) {
    const Token& open = cur();
    expect_op("(");
    bool need_comma = false;
    while (!is_op(cur(), ")")) {
      if (need_comma) {
        expect_op(",");
        if (is_op(cur(), ")")) break;  // a trailing comma
      }
      if (is_op(cur(), "*") || is_op(cur(), "**"))
        error(cur(), "*args and **kwargs in calls are not supported");
      if (cur().type == TokenType::Name && is_op(look(), "=")) {
        std::string key = next().value;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) error(open, "positional argument follows keyword argument");
        e.items.push_back(parse_expression(true));
      }
      need_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = node(Expr::Kind::Call, cur());
    e->line = callee->line;  // errors of a call point at what is called
    e->column = callee->column;
    e->items.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter(ExprPtr operand) {
    next();  // '|'
    const Token& t = cur();
    auto e = node(Expr::Kind::Filter, t);
    e->name = expect_name();
    if (!is_filter(e->name)) error(t, "no filter named '{}'", e->name);
    e->items.push_back(std::move(operand));
    if (is_op(cur(), "(")) parse_call_args(*e);
    return e;
  }

  ExprPtr parse_test(ExprPtr operand) {
    auto e = node(Expr::Kind::Test, next());  // 'is'
    e->negated = skip_name("not");
    const Token& t = cur();
    e->name = expect_name();
    if (!is_test(e->name)) error(t, "no test named '{}'", e->name);
    e->items.push_back(std::move(operand));
    const Token& n = cur();
    if (is_op(n, "(")) {
      parse_call_args(*e);
    } else if ((n.type == TokenType::Name || n.type == TokenType::String ||
                n.type == TokenType::Int || n.type == TokenType::Float || is_op(n, "[") ||
                is_op(n, "{")) &&
               !is_name(n, "else") && !is_name(n, "or") && !is_name(n, "and")) {
      // One argument without parentheses: `x is divisibleby 3`, `x is sameas y`.
      if (is_name(n, "is")) error(n, "tests cannot be chained with 'is'");
      e->items.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int loop_depth_ = 0;
  int depth_ = 0;
  std::vector<const Names*> expecting_;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace cpinfer::jinja
