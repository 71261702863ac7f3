// expect_error(fn, parts): fn must throw cpinfer::Error, and its message must contain every
// one of `parts` (a test of an error message names what the user needs to read in it).
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

namespace cpinfer::testing {

inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
    return;
  }
  ADD_FAILURE() << "no Error thrown; expected one mentioning '" << parts.front() << "'";
}

}  // namespace cpinfer::testing
