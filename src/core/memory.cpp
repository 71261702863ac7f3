#include "core/memory.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

namespace cpinfer {

int64_t peak_rss_bytes() {
  struct rusage u {};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return -1;
  return int64_t(u.ru_maxrss) * 1024;  // Linux reports kilobytes
}

int64_t current_rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  return n == 2 ? int64_t(resident) * int64_t(::sysconf(_SC_PAGESIZE)) : 0;
}

// Under a sanitizer, malloc is the sanitizer's allocator and glibc's figures would describe
// an unused heap: no figures then.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CPINFER_GLIBC_HEAP_STATS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CPINFER_GLIBC_HEAP_STATS 0
#endif
#endif
#if !defined(CPINFER_GLIBC_HEAP_STATS) && defined(__GLIBC__) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#define CPINFER_GLIBC_HEAP_STATS 1
#endif

bool heap_stats(HeapStats* out) {
#if CPINFER_GLIBC_HEAP_STATS
  const struct mallinfo2 m = ::mallinfo2();  // sums over every arena
  out->in_use_bytes = int64_t(m.uordblks + m.hblkhd);
  out->free_bytes = int64_t(m.fordblks);
  return true;
#else
  (void)out;
  return false;
#endif
}

}  // namespace cpinfer
