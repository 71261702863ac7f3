// Replaces the global operator new of a test executable to count heap allocations, for
// tests that prove a path allocates nothing. Include it in exactly one source file of the
// executable (tests/unit/*_test.cpp are one file each); read g_news before and after.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

inline std::atomic<int64_t> g_news{0};

void* operator new(size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The nothrow form too (std::stable_sort's buffer): under ASan its own would pair with the
// delete below and report an alloc-dealloc mismatch.
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
