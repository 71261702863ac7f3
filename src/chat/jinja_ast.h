// The syntax tree of a parsed Jinja template: expressions and statements, each with the
// line and column it starts at (for error messages). Built once by the parser, then only
// read, by any number of renders at once.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace cpinfer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Const,    // value
    Name,     // name
    List,     // [items...]
    Tuple,    // (items...)
    Dict,     // {items[0]: items[1], items[2]: items[3], ...}
    Attr,     // items[0].name
    Item,     // items[0][items[1]]; items[1] may be a Slice
    Slice,    // items[0]:items[1]:items[2] (start, stop, step; each may be null)
    Call,     // items[0](items[1..], kwargs)
    Filter,   // items[0] | name(items[1..], kwargs)
    Test,     // items[0] is [not] name(items[1..], kwargs)
    Neg,      // -items[0]
    Pos,      // +items[0]
    Not,      // not items[0]
    And,      // items[0] and items[1]
    Or,       // items[0] or items[1]
    Binary,   // items[0] name items[1], name one of + - * / // % **
    Concat,   // items[0] ~ items[1] ~ ...
    Compare,  // items[0] ops[0] items[1] ops[1] items[2] ... (chained, as in Python)
    Cond,     // items[1] if items[0] else items[2] (items[2] null: undefined)
  };

  Kind kind;
  int line = 0, column = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Compare: "==", "!=", "<", "<=", ">", ">=", "in", "not in"
  bool negated = false;          // Test: `is not`
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    Text,      // text
    Output,    // {{ expr }}
    If,        // branches (condition, body) in order, then else_body
    For,       // for targets in expr [if filter]: body [else: else_body]
    Set,       // set targets = expr; set targets[0].targets[1] = expr when ns_attr
    SetBlock,  // set targets[0] %} body {% endset
    Macro,     // macro name(params) body
    Break,
    Continue,
    Block,  // a block that only groups its body: {% generation %} ... {% endgeneration %}
  };

  Kind kind;
  int line = 0, column = 0;
  std::string text;
  ExprPtr expr;
  std::vector<std::string> targets;
  bool ns_attr = false;
  ExprPtr filter;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro: name and default (or null)
};

}  // namespace cpinfer::jinja
