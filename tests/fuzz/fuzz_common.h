// Shared helpers of the fuzz targets (tests/fuzz/fuzz_*.cpp). Each target defines
// LLVMFuzzerTestOneInput; built with clang + libFuzzer (CPINFER_FUZZ=ON) or, in every
// normal build, with replay_main.cpp, which runs it over the checked-in corpora.
//
// A target's contract: input the code rejects must end in a thrown cpinfer::Error (or
// ApiError for request bodies) with a message; anything else escaping is a finding (libFuzzer
// reports the uncaught exception as a crash), as are sanitizer reports, hangs, huge
// allocations and the targets' own property checks (FUZZ_CHECK).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#ifndef CPINFER_SOURCE_DIR
#error "CPINFER_SOURCE_DIR must be defined (tests/fuzz/CMakeLists.txt does)"
#endif

namespace cpinfer::fuzz {

// A property the code must keep for every input; on failure print and abort (a crash).
#define FUZZ_CHECK(cond, ...)                                                   \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                        \
      std::fprintf(stderr, "\n");                                               \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

inline std::string source_path(const char* rel) { return std::string(CPINFER_SOURCE_DIR) + "/" + rel; }

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits the input at its first NUL byte: {before, after} (after empty if there is none).
inline std::pair<std::string_view, std::string_view> split_nul(std::string_view in) {
  size_t p = in.find('\0');
  if (p == std::string_view::npos) return {in, {}};
  return {in.substr(0, p), in.substr(p + 1)};
}

}  // namespace cpinfer::fuzz
