// Security helpers of the server: the constant-time API key comparison and the JSON
// nesting scan that refuses deeply nested bodies before they are parsed.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/json_depth.h"
#include "core/constant_time.h"

namespace cpinfer {
namespace {

TEST(ConstantTimeEqual, Answers) {
  EXPECT_TRUE(constant_time_equal("Bearer secret", "Bearer secret"));
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_FALSE(constant_time_equal("Bearer secreT", "Bearer secret"));
  EXPECT_FALSE(constant_time_equal("Xearer secret", "Bearer secret"));
  EXPECT_FALSE(constant_time_equal("Bearer secre", "Bearer secret"));    // a prefix
  EXPECT_FALSE(constant_time_equal("Bearer secretx", "Bearer secret"));  // longer
  EXPECT_FALSE(constant_time_equal("", "Bearer secret"));
  EXPECT_FALSE(constant_time_equal("x", ""));
  // The secret repeated: equal bytes cyclically, but not the same length.
  EXPECT_FALSE(constant_time_equal("abab", "ab"));
  EXPECT_FALSE(constant_time_equal(std::string("a\0b", 3), "a"));
  const std::string nul("k\0ey", 4);
  EXPECT_TRUE(constant_time_equal(nul, nul));
}

// Where the first difference lies does not change the time (no early exit): a mismatch in
// the first byte and one in the last take about as long over a 1 MiB input. Loose bounds (10x),
// as timings on a shared machine are noisy; an early exit would differ by ~1000x.
TEST(ConstantTimeEqual, TimeDoesNotDependOnWhereItDiffers) {
  const std::string secret(1 << 20, 'k');
  std::string first = secret, last = secret;
  first.front() = 'x';
  last.back() = 'x';
  auto best_of = [&](const std::string& given) {
    double best = 1e9;
    for (int r = 0; r < 7; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      bool eq = constant_time_equal(given, secret);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_FALSE(eq);
      best = std::min(best, s);
    }
    return best;
  };
  const double t_first = best_of(first), t_last = best_of(last);
  EXPECT_GT(t_first, t_last / 10) << "first " << t_first << " s, last " << t_last << " s";
  EXPECT_LT(t_first, t_last * 10) << "first " << t_first << " s, last " << t_last << " s";
}

TEST(JsonNestingDepth, Counts) {
  EXPECT_EQ(json_nesting_depth("1"), 0u);
  EXPECT_EQ(json_nesting_depth("{}"), 1u);
  EXPECT_EQ(json_nesting_depth(R"({"a": [1, {"b": []}], "c": {}})"), 4u);
  // Brackets inside strings (escaped quotes too) do not count.
  EXPECT_EQ(json_nesting_depth(R"({"a": "[[[[\"[[[", "b": "\\"})"), 1u);
  EXPECT_EQ(json_nesting_depth(R"(["\\\"[["])"), 1u);
  // Unbalanced text still gives a number; the parser reports what is wrong.
  EXPECT_EQ(json_nesting_depth("]]]]["), 1u);
}

TEST(JsonNestingDepth, StopsPastTheLimit) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(json_nesting_depth(deep), 100000u);
  EXPECT_EQ(json_nesting_depth(deep, kMaxJsonDepth), kMaxJsonDepth + 1);
  const std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_EQ(json_nesting_depth(ok, kMaxJsonDepth), kMaxJsonDepth);
}

}  // namespace
}  // namespace cpinfer
