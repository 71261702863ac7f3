// Errors a user can act on: what went wrong, which value, what is allowed.
// Library code throws cpinfer::Error; the CLI prints it and exits non-zero.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace cpinfer {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

template <typename... Args>
[[noreturn]] inline void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace cpinfer

// CPI_CHECK(cond, "format {}", args...): throws cpinfer::Error with the message when cond is false.
#define CPI_CHECK(cond, ...)                    \
  do {                                          \
    if (!(cond)) ::cpinfer::fail(__VA_ARGS__);  \
  } while (0)

// CPI_ASSERT(cond): an internal invariant (a bug if it fires, never bad input).
#define CPI_ASSERT(cond)                                                                      \
  do {                                                                                        \
    if (!(cond))                                                                              \
      ::cpinfer::fail("internal error: {} failed at {}:{}", #cond, __FILE__, __LINE__);       \
  } while (0)
