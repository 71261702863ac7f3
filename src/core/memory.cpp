#include "core/memory.h"

#include <sys/resource.h>

namespace cpinfer {

int64_t peak_rss_bytes() {
  struct rusage u {};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return -1;
  return int64_t(u.ru_maxrss) * 1024;  // Linux reports kilobytes
}

}  // namespace cpinfer
