// OutputText: streamed text with stop strings held back and cut, on the real Qwen tokenizer.
#include <gtest/gtest.h>

#include "engine/output_text.h"
#include "support/test_models.h"

namespace cpinfer {
namespace {

const Tokenizer& qwen() {
  static Tokenizer t = Tokenizer::from_file(testing::qwen_tokenizer_json());
  return t;
}

// Feeds the tokens of `text` one by one; returns what was emitted, and whether it stopped.
std::pair<std::string, bool> run(const std::string& text, std::vector<std::string> stop,
                                 std::vector<std::string>* pieces = nullptr) {
  OutputText out(qwen(), std::move(stop), true);
  std::string got;
  bool stopped = false;
  for (int32_t id : qwen().encode(text)) {
    std::string p = out.push(id, &stopped);
    if (pieces) pieces->push_back(p);
    got += p;
    if (stopped) return {got, true};
  }
  got += out.flush();
  return {got, false};
}

TEST(OutputText, NoStopStringsGivesTheWholeText) {
  const std::string t = "Hello, world! 你好 🙂 done.";
  EXPECT_EQ(run(t, {}).first, t);
}

TEST(OutputText, StopStringIsCutAndNotReturned) {
  auto [got, stopped] = run("The answer is 42.\n\nNext question", {"\n\n"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(got, "The answer is 42.");
}

TEST(OutputText, EarliestOfSeveralStops) {
  auto [got, stopped] = run("alpha beta gamma delta", {"delta", "beta"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(got, "alpha ");
}

TEST(OutputText, PossibleStopPrefixIsHeldBackThenReleased) {
  // "ab" could start "abc": it is held back until "x" shows it is not the stop string.
  std::vector<std::string> pieces;
  auto [got, stopped] = run("zzab abx abc tail", {"abc"}, &pieces);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(got, "zzab abx ");
  for (const std::string& p : pieces) EXPECT_EQ(p.find("abc"), std::string::npos);
}

TEST(OutputText, StopInsideOneTokenAndAcrossTokens) {
  EXPECT_EQ(run("say hello there", {"ell"}).first, "say h");
  EXPECT_EQ(run("one two three", {"o th"}).first, "one tw");
}

TEST(OutputText, MultibyteStopString) {
  auto [got, stopped] = run("前面的文字。停止在这里之后", {"停止"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(got, "前面的文字。");
}

TEST(OutputText, IdsPastTheTokenizerVocabularyHaveNoText) {
  OutputText out(qwen(), {}, true);
  bool stopped = false;
  EXPECT_EQ(out.push(int32_t(qwen().vocab_size()) + 5, &stopped), "");
  EXPECT_FALSE(stopped);
}

}  // namespace
}  // namespace cpinfer
