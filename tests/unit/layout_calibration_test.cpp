// The planner's calibration timing: rounds interleaved across the calls, and each result the
// median of its rounds, so that one slow round (a slow moment of the machine) moves nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "model/layout_calibration.h"

namespace cpinfer {
namespace {

// The order of the calls, consecutive repeats collapsed: round r of every call before round
// r + 1 of any.
TEST(LayoutCalibration, RoundsInterleaveTheCalls) {
  std::string order;
  auto mark = [&order](char c) {
    if (order.empty() || order.back() != c) order += c;
  };
  const std::vector<double> s = time_interleaved_rounds(
      {{0.003, [&] { mark('a'); }}, {0.003, [&] { mark('b'); }}, {0.003, [&] { mark('c'); }}},
      3);
  EXPECT_EQ(order, "abcabcabc");
  ASSERT_EQ(s.size(), 3u);
  for (double x : s) EXPECT_GE(x, 0.0);
}

// Call a sleeps 50 ms in its second round (one slow moment) and 1 ms otherwise: its result is
// the median of its rounds, ~1 ms, where the mean of the rounds (~17 ms) or the slow round
// itself would be far above the 10 ms bound (wide, for wake-up delays on a busy machine).
// Call b (instant) marks the round boundaries: a's round index grows each time a follows b.
TEST(LayoutCalibration, OneSlowRoundDoesNotMoveTheMedian) {
  int a_round = 0;
  bool last_was_b = false;
  const auto sleep_ms = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  const std::vector<double> s = time_interleaved_rounds(
      {{0.03,
        [&] {
          if (last_was_b) ++a_round;
          last_was_b = false;
          sleep_ms(a_round == 1 ? 50 : 1);
        }},
       {0.003, [&] { last_was_b = true; }}},
      3);
  EXPECT_EQ(a_round, 2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_GE(s[0], 0.001);
  EXPECT_LT(s[0], 0.010) << "the slow round moved a's rate";
  EXPECT_LT(s[1], 0.010);
}

}  // namespace
}  // namespace cpinfer
