#include "core/memory.h"

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

}  // namespace cpinfer
