#include "chat/jinja_render.h"

#include "chat/jinja_builtins.h"
#include "chat/jinja_ops.h"
#include "chat/jinja_parser.h"
#include "core/error.h"

namespace cpinfer::jinja {
namespace {

// An Error that already names its place in the template, so outer frames pass it on.
class LocatedError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void locate(const Error& e, int line, int column) {
  throw LocatedError(
      fmt::format("chat template error at line {}, column {}: {}", line, column, e.what()));
}

struct Scope;
using ScopePtr = std::shared_ptr<Scope>;

struct Scope {
  ScopePtr parent;
  Dict vars;

  const Value* find(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent.get())
      for (const auto& [k, v] : s->vars)
        if (k == name) return &v;
    return nullptr;
  }

  void set(const std::string& name, Value v) {
    for (auto& kv : vars)
      if (kv.first == name) {
        kv.second = std::move(v);
        return;
      }
    vars.emplace_back(name, std::move(v));
  }
};

ScopePtr child(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

enum class Flow { Normal, Break, Continue };

constexpr int kMaxMacroDepth = 200;
constexpr int kMaxEvalDepth = 1000;

class Renderer {
 public:
  std::string run(const Body& body, const Value& context) {
    CPI_CHECK(context.is_dict(), "a template renders with a dict of variables, not {}",
              context.type_name());
    auto root = std::make_shared<Scope>();
    root->vars = make_globals();
    for (const auto& [k, v] : context.as_dict()) root->set(k, v);
    std::string out;
    exec(body, root, out);
    return out;
  }

 private:
  Flow exec(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const StmtPtr& s : body) {
      const Flow f = exec_stmt(*s, scope, out);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec_stmt(const Stmt& s, const ScopePtr& scope, std::string& out) {
    try {
      switch (s.kind) {
        case Stmt::Kind::Text:
          out += s.text;
          break;
        case Stmt::Kind::Output:
          out += eval(*s.expr, scope).str();
          break;
        case Stmt::Kind::If:
          for (const auto& [cond, body] : s.branches)
            if (eval(*cond, scope).truthy()) return exec(body, scope, out);
          return exec(s.else_body, scope, out);
        case Stmt::Kind::For:
          exec_for(s, scope, out);
          break;
        case Stmt::Kind::Set:
          exec_set(s, scope);
          break;
        case Stmt::Kind::SetBlock: {
          std::string text;
          exec(s.body, child(scope), text);
          scope->set(s.targets[0], Value(std::move(text)));
          break;
        }
        case Stmt::Kind::Macro:
          define_macro(s, scope);
          break;
        case Stmt::Kind::Break:
          return Flow::Break;
        case Stmt::Kind::Continue:
          return Flow::Continue;
        case Stmt::Kind::Block:
          return exec(s.body, scope, out);
      }
    } catch (const LocatedError&) {
      throw;
    } catch (const Error& e) {
      locate(e, s.line, s.column);
    }
    return Flow::Normal;
  }

  // `for a, b in pairs` takes each item apart like Python's tuple unpacking.
  static void bind_targets(Scope& scope, const std::vector<std::string>& targets,
                           const Value& item) {
    if (targets.size() == 1) {
      scope.set(targets[0], item);
      return;
    }
    const List parts = iterate(item);
    CPI_CHECK(parts.size() <= targets.size(), "too many values to unpack (expected {})",
              targets.size());
    CPI_CHECK(parts.size() >= targets.size(), "not enough values to unpack (expected {}, got {})",
              targets.size(), parts.size());
    for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], parts[i]);
  }

  static Value loop_object(const List& items, size_t i) {
    const int64_t n = int64_t(items.size()), k = int64_t(i);
    Dict loop = {{"index", Value(k + 1)},    {"index0", Value(k)},
                 {"revindex", Value(n - k)}, {"revindex0", Value(n - k - 1)},
                 {"first", Value(k == 0)},   {"last", Value(k == n - 1)},
                 {"length", Value(n)},       {"depth", Value(1)},
                 {"depth0", Value(0)}};
    if (i > 0) loop.emplace_back("previtem", items[i - 1]);
    if (k + 1 < n) loop.emplace_back("nextitem", items[i + 1]);
    loop.emplace_back("cycle", Value::function("cycle", [k](const CallArgs& a) {
                        CPI_CHECK(!a.args.empty(), "no items for cycling given");
                        return a.args[size_t(k) % a.args.size()];
                      }));
    return Value::dict(std::move(loop));
  }

  void exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
    List items = iterate(eval(*s.expr, scope));
    if (s.filter) {  // `for x in xs if cond`: loop.* counts only the items kept
      List kept;
      for (const Value& item : items) {
        const ScopePtr probe = child(scope);
        bind_targets(*probe, s.targets, item);
        if (eval(*s.filter, probe).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      const ScopePtr iteration = child(scope);
      iteration->set("loop", loop_object(items, i));
      bind_targets(*iteration, s.targets, items[i]);
      if (exec(s.body, iteration, out) == Flow::Break) break;
    }
    if (items.empty()) exec(s.else_body, child(scope), out);
  }

  void exec_set(const Stmt& s, const ScopePtr& scope) {
    Value v = eval(*s.expr, scope);
    if (!s.ns_attr) {
      bind_targets(*scope, s.targets, v);
      return;
    }
    const Value* ns = scope->find(s.targets[0]);
    CPI_CHECK(ns, "'{}' is undefined", s.targets[0]);
    CPI_CHECK(ns->is_namespace(), "cannot assign attribute on non-namespace object '{}' ({})",
              s.targets[0], ns->type_name());
    Dict& attrs = ns->as_namespace().attrs;
    for (auto& kv : attrs)
      if (kv.first == s.targets[1]) {
        kv.second = std::move(v);
        return;
      }
    attrs.emplace_back(s.targets[1], std::move(v));
  }

  void define_macro(const Stmt& s, const ScopePtr& scope) {
    // The macro keeps its defining scope weakly: the scope holds the macro, so a strong
    // reference would be a cycle.
    std::weak_ptr<Scope> def = scope;
    scope->set(s.name, Value::function(s.name, [this, &s, def](const CallArgs& a) {
                 return call_macro(s, def, a);
               }));
  }

  Value call_macro(const Stmt& m, const std::weak_ptr<Scope>& def, const CallArgs& a) {
    const ScopePtr parent = def.lock();
    CPI_CHECK(parent, "macro '{}' called after the scope it was defined in ended", m.name);
    CPI_CHECK(macro_depth_ < kMaxMacroDepth, "macro '{}': recursion deeper than {} calls", m.name,
              kMaxMacroDepth);
    CPI_CHECK(a.args.size() <= m.params.size(), "macro '{}' takes not more than {} argument(s)",
              m.name, m.params.size());
    for (const auto& [k, v] : a.kwargs) {
      size_t i = 0;
      while (i < m.params.size() && m.params[i].first != k) ++i;
      CPI_CHECK(i < m.params.size(), "macro '{}' takes no keyword argument '{}'", m.name, k);
      CPI_CHECK(i >= a.args.size(), "macro '{}' got multiple values for argument '{}'", m.name, k);
    }
    const ScopePtr scope = child(parent);
    for (size_t i = 0; i < m.params.size(); ++i) {
      const auto& [name, dflt] = m.params[i];
      if (i < a.args.size()) {
        scope->set(name, a.args[i]);
      } else if (const Value* v = a.kwarg(name)) {
        scope->set(name, *v);
      } else if (dflt) {
        scope->set(name, eval(*dflt, scope));
      } else {
        scope->set(name, Value::undefined(fmt::format("parameter '{}' was not provided", name)));
      }
    }
    struct Depth {
      int& d;
      explicit Depth(int& x) : d(x) { ++d; }
      ~Depth() { --d; }
    } depth(macro_depth_);
    std::string out;
    exec(m.body, scope, out);
    return Value(std::move(out));
  }

  CallArgs eval_args(const Expr& e, size_t first, const ScopePtr& scope) {
    CallArgs a;
    for (size_t i = first; i < e.items.size(); ++i) a.args.push_back(eval(*e.items[i], scope));
    for (const auto& [k, v] : e.kwargs) a.kwargs.emplace_back(k, eval(*v, scope));
    return a;
  }

  static Value call_value(const Value& fn, const CallArgs& args) {
    if (fn.is_undefined()) undefined_error(fn);
    CPI_CHECK(fn.is_function(), "'{}' object is not callable", fn.type_name());
    return fn.as_function().call(args);
  }

  Value eval(const Expr& e, const ScopePtr& scope) {
    // Left-deep chains (a + b + c ..., x|f|g ..., a.b.c ...) parse in loops but evaluate
    // recursively: bound the depth so that a huge chain is an error, not a stack overflow.
    struct Depth {
      int& d;
      explicit Depth(int& x) : d(x) { ++d; }
      ~Depth() { --d; }
    } depth(eval_depth_);
    try {
      CPI_CHECK(eval_depth_ <= kMaxEvalDepth, "expression nested more than {} levels deep",
                kMaxEvalDepth);
      return eval_node(e, scope);
    } catch (const LocatedError&) {
      throw;
    } catch (const Error& err) {
      locate(err, e.line, e.column);
    }
  }

  Value eval_node(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::Const:
        return e.value;
      case Expr::Kind::Name: {
        if (const Value* v = scope->find(e.name)) return *v;
        return Value::undefined(fmt::format("'{}' is undefined", e.name));
      }
      case Expr::Kind::List:
      case Expr::Kind::Tuple: {
        List items;
        for (const ExprPtr& x : e.items) items.push_back(eval(*x, scope));
        return e.kind == Expr::Kind::List ? Value::list(std::move(items))
                                          : Value::tuple(std::move(items));
      }
      case Expr::Kind::Dict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          const Value k = eval(*e.items[i], scope);
          CPI_CHECK(k.is_string(), "dict keys in chat templates must be strings, not {}",
                    k.type_name());
          Value v = eval(*e.items[i + 1], scope);
          auto it =
              std::find_if(d.begin(), d.end(), [&](auto& kv) { return kv.first == k.as_string(); });
          if (it != d.end())
            it->second = std::move(v);
          else
            d.emplace_back(k.as_string(), std::move(v));
        }
        return Value::dict(std::move(d));
      }
      case Expr::Kind::Attr:
        return get_attr(eval(*e.items[0], scope), e.name);
      case Expr::Kind::Item: {
        const Value obj = eval(*e.items[0], scope);
        const Expr& key = *e.items[1];
        if (key.kind != Expr::Kind::Slice) return get_item(obj, eval(key, scope));
        auto part = [&](size_t i) {
          return key.items[i] ? eval(*key.items[i], scope) : Value::none();
        };
        return get_slice(obj, part(0), part(1), part(2));
      }
      case Expr::Kind::Slice:
        fail("a slice can only be used inside [ ]");
      case Expr::Kind::Call: {
        const Expr& callee = *e.items[0];
        if (callee.kind == Expr::Kind::Attr) {  // obj.method(...) without a bound method
          const Value obj = eval(*callee.items[0], scope);
          if (obj.is_undefined()) undefined_error(obj);
          const bool method = !obj.is_namespace() && has_method(obj, callee.name);
          const Value fn = method ? Value() : get_attr(obj, callee.name);
          const CallArgs args = eval_args(e, 1, scope);
          return method ? call_method(obj, callee.name, args) : call_value(fn, args);
        }
        const Value fn = eval(callee, scope);
        return call_value(fn, eval_args(e, 1, scope));
      }
      case Expr::Kind::Filter: {
        const Value operand = eval(*e.items[0], scope);
        return apply_filter(e.name, operand, eval_args(e, 1, scope));
      }
      case Expr::Kind::Test: {
        const Value operand = eval(*e.items[0], scope);
        return Value(apply_test(e.name, operand, eval_args(e, 1, scope)) != e.negated);
      }
      case Expr::Kind::Neg:
        return neg(eval(*e.items[0], scope));
      case Expr::Kind::Pos: {
        const Value v = eval(*e.items[0], scope);
        if (v.is_undefined()) undefined_error(v);
        CPI_CHECK(v.is_number(), "bad operand type for unary +: '{}'", v.type_name());
        return v.is_bool() ? Value(v.as_int()) : v;
      }
      case Expr::Kind::Not:
        return Value(!eval(*e.items[0], scope).truthy());
      case Expr::Kind::And: {
        Value a = eval(*e.items[0], scope);
        return a.truthy() ? eval(*e.items[1], scope) : a;
      }
      case Expr::Kind::Or: {
        Value a = eval(*e.items[0], scope);
        return a.truthy() ? a : eval(*e.items[1], scope);
      }
      case Expr::Kind::Binary:
        return binary_op(e.name, eval(*e.items[0], scope), eval(*e.items[1], scope));
      case Expr::Kind::Concat: {
        std::string s;
        for (const ExprPtr& x : e.items) s += eval(*x, scope).str();
        return Value(std::move(s));
      }
      case Expr::Kind::Compare: {
        Value left = eval(*e.items[0], scope);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.items[i + 1], scope);
          if (!compare_op(e.ops[i], left, right)) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::Kind::Cond:
        if (eval(*e.items[0], scope).truthy()) return eval(*e.items[1], scope);
        if (e.items[2]) return eval(*e.items[2], scope);
        return Value::undefined(
            "the inline if-expression evaluated to false and no else "
            "section was defined");
    }
    fail("internal error: unknown expression kind");
  }

  static bool compare_op(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equals(a, b);
    if (op == "!=") return !equals(a, b);
    if (op == "in") return contains(b, a);
    if (op == "not in") return !contains(b, a);
    if (a.is_undefined()) undefined_error(a);
    if (b.is_undefined()) undefined_error(b);
    const int c = compare(a, b, op);
    if (op == "<") return c < 0;
    if (op == "<=") return c <= 0;
    if (op == ">") return c > 0;
    return c >= 0;
  }

  int macro_depth_ = 0;
  int eval_depth_ = 0;
};

}  // namespace

Template::Template(std::string_view source)
    : body_(std::make_shared<const Body>(parse_template(source))) {}

std::string Template::render(const Value& context) const { return Renderer().run(*body_, context); }

}  // namespace cpinfer::jinja
