// Core utilities: bf16/f16 conversions, the thread pool, CPU feature selection.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/huge_pages.h"
#include "core/json_parse.h"
#include "core/memory.h"
#include "core/thread_pool.h"

namespace cpinfer {
namespace {

TEST(Dtype, Bf16RoundsToNearestEven) {
  EXPECT_EQ(bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(float(bf16::from_bits(0x3f80)), 1.0f);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(bf16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  EXPECT_EQ(bf16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(float(bf16(NAN))));
  EXPECT_EQ(float(bf16(-INFINITY)), -INFINITY);
}

TEST(Dtype, F16MatchesDefinitionOnEveryBitPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    f16 h = f16::from_bits(uint16_t(b));
    int e = (b >> 10) & 31, m = b & 1023;
    double want = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    if (b & 0x8000) want = -want;
    float got = float(h);
    if (e == 31) {
      EXPECT_TRUE(m ? std::isnan(got) : std::isinf(got)) << b;
      continue;
    }
    ASSERT_EQ(double(got), want) << b;
    // Round trip: every finite half converts back to the same bits.
    ASSERT_EQ(f16(got).bits, uint16_t(b)) << b;
  }
  EXPECT_EQ(f16(65520.0f).bits, 0x7c00);  // rounds to infinity
  EXPECT_EQ(f16(65519.0f).bits, 0x7bff);
}

TEST(Dtype, NamesRoundTrip) {
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::I64}) {
    DType back;
    ASSERT_TRUE(dtype_from_name(dtype_name(t), &back));
    EXPECT_EQ(back, t);
  }
  DType x;
  EXPECT_FALSE(dtype_from_name("F8_E4M3X", &x));
}

// The heap figures follow what the program holds: 48 MB in one large block (malloc maps it)
// and 24 MB in 96k small blocks (arena chunks) raise in_use by at least that much, and
// freeing them lowers it again; RSS sees the touched pages.
// Error messages show JSON values short and never throw while rendering them.
TEST(JsonExcerpt, ShortValuesWholeLongOnesCutBytesNotUtf8Replaced) {
  EXPECT_EQ(json_excerpt(nlohmann::json(42)), "42");
  EXPECT_EQ(json_excerpt(nlohmann::json::parse(R"({"a":[1,2]})")), R"({"a":[1,2]})");
  const std::string sixty(58, 'x');  // "xxx...x" with its quotes: exactly 60 characters
  EXPECT_EQ(json_excerpt(nlohmann::json(sixty)), "\"" + sixty + "\"");
  const std::string long_text(100, 'y');
  EXPECT_EQ(json_excerpt(nlohmann::json(long_text)), "\"" + std::string(56, 'y') + "...");
  EXPECT_EQ(json_excerpt(nlohmann::json(long_text), 80).size(), 80u);
  // A string holding bytes that are not UTF-8 (json::dump() alone would throw).
  EXPECT_EQ(json_excerpt(nlohmann::json(std::string("a\xff"))), "\"a\xEF\xBF\xBD\"");
}

TEST(Memory, HeapStatsFollowAllocations) {
  HeapStats before;
  if (!heap_stats(&before)) GTEST_SKIP() << "the C library reports no heap statistics";
  const int64_t rss0 = current_rss_bytes();
  constexpr size_t kBig = 48u << 20, kSmall = 256, kCount = 96 * 1024;
  char* volatile big = static_cast<char*>(std::malloc(kBig));
  ASSERT_NE(big, nullptr);
  std::memset(big, 1, kBig);
  std::vector<char*> small(kCount);
  for (auto& p : small) {
    p = static_cast<char*>(std::malloc(kSmall));
    ASSERT_NE(p, nullptr);
    std::memset(p, 2, kSmall);
  }
  HeapStats held;
  ASSERT_TRUE(heap_stats(&held));
  EXPECT_GE(held.in_use_bytes - before.in_use_bytes, int64_t(kBig + kSmall * kCount));
  EXPECT_GE(current_rss_bytes() - rss0, int64_t(kBig));
  std::free(big);
  for (char* p : small) std::free(p);
  HeapStats after;
  ASSERT_TRUE(heap_stats(&after));
  EXPECT_LE(after.in_use_bytes, held.in_use_bytes - int64_t(kBig + kSmall * kCount));
  EXPECT_GE(after.free_bytes, 0);
}

// huge_pages_alloc: zeroed, aligned, every usable byte writable, and the memory goes back to
// the system on free (RSS falls; checked outside sanitizer builds, whose allocators keep freed
// memory in quarantine).
TEST(HugePages, ZeroedAlignedWritableAndReturned) {
  EXPECT_EQ(huge_pages_alloc(0), nullptr);
  huge_pages_free(nullptr, 123);  // a no-op
  const size_t bytes = (size_t(3) << 20) + 5;
  const size_t usable = huge_pages_usable(bytes);
  EXPECT_GE(usable, bytes);
  EXPECT_EQ(huge_pages_usable(usable), usable);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_EQ(usable, size_t(4) << 20);  // rounded up to whole 2 MiB pages
#endif
  const int64_t rss0 = current_rss_bytes();
  auto* p = static_cast<unsigned char*>(huge_pages_alloc(bytes));
  ASSERT_NE(p, nullptr);
  const uintptr_t align = reinterpret_cast<uintptr_t>(p) % (size_t(2) << 20);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_EQ(align, 0u) << "not on a 2 MiB boundary: no huge page could back it";
#else
  EXPECT_EQ(align % 64, 0u);
#endif
  size_t nonzero = 0;
  for (size_t i = 0; i < usable; ++i) nonzero += p[i] != 0;
  EXPECT_EQ(nonzero, 0u);
  std::memset(p, 0xab, usable);  // the rounded size is ours to use
  EXPECT_EQ(p[usable - 1], 0xab);
  const int64_t rss_held = current_rss_bytes();
  EXPECT_GE(rss_held - rss0, int64_t(bytes) / 2);
  huge_pages_free(p, bytes);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // munmap-ed: the pages leave at once (a sanitizer's allocator keeps freed memory a while).
  EXPECT_LE(current_rss_bytes(), rss_held - int64_t(bytes) / 2);
#endif
}

// ScratchArray: grows only; a growth gives fresh zeroed memory (old contents not kept), a
// smaller reserve keeps the same memory and contents.
TEST(HugePages, ScratchArrayGrowsOnlyAndIsZeroAfterGrowth) {
  ScratchArray<float> a;
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.capacity(), 0u);
  a.reserve(1000);
  ASSERT_NE(a.data(), nullptr);
  ASSERT_GE(a.capacity(), 1000u);
  for (size_t i = 0; i < a.capacity(); ++i) ASSERT_EQ(a.data()[i], 0.f) << i;
  for (size_t i = 0; i < a.capacity(); ++i) a.data()[i] = float(i);
  float* const first = a.data();
  const size_t cap = a.capacity();
  a.reserve(10);
  a.reserve(cap);
  EXPECT_EQ(a.data(), first);
  EXPECT_EQ(a.capacity(), cap);
  EXPECT_EQ(a.data()[cap - 1], float(cap - 1));
  a.reserve(cap + 1);
  ASSERT_GE(a.capacity(), cap + 1);
  size_t nonzero = 0;
  for (size_t i = 0; i < a.capacity(); ++i) nonzero += a.data()[i] != 0.f;
  EXPECT_EQ(nonzero, 0u);
}

TEST(ThreadPool, RunsEveryTaskOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int rep = 0; rep < 20; ++rep)
        pool.run(n, [&](int64_t t, int thread) {
          ASSERT_GE(thread, 0);
          ASSERT_LT(thread, threads);
          hits[size_t(t)]++;
        });
      for (auto& h : hits) ASSERT_EQ(h.load(), 20);
    }
  }
}

TEST(ThreadPool, ParallelForCoversRangeWithoutOverlap) {
  ThreadPool pool(2);
  for (int64_t n : {1, 2, 3, 17, 4097}) {
    std::vector<int> seen(static_cast<size_t>(n), 0);
    pool.parallel_for(n, 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) seen[size_t(i)]++;
    });
    EXPECT_EQ(std::accumulate(seen.begin(), seen.end(), 0), n);
    for (int s : seen) ASSERT_EQ(s, 1);
  }
}

TEST(CpuFeatures, GenericAlwaysSupportedAndSelectable) {
  auto isas = supported_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::Generic);
  Isa saved = active_isa();
  for (Isa i : isas) {
    set_active_isa(i);
    EXPECT_EQ(active_isa(), i);
  }
  set_active_isa(saved);
  if (!isa_supported(Isa::Avx512)) EXPECT_THROW(set_active_isa(Isa::Avx512), Error);
}

}  // namespace
}  // namespace cpinfer
