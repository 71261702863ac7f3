// Process memory figures for reports.
#pragma once
#include <cstdint>

namespace cpinfer {

// Peak resident set size of this process so far, in bytes (getrusage ru_maxrss).
int64_t peak_rss_bytes();

// Resident set size of this process now, in bytes (/proc/self/statm; 0 if unreadable).
int64_t current_rss_bytes();

// The C heap (glibc malloc, all arenas): bytes in chunks the program holds (small chunks plus
// mmap-ed large ones), and free bytes malloc keeps in its arenas instead of returning them.
// Beside RSS these tell live data growing apart from the allocator holding on to freed
// memory. Example: RSS +100 MB with in_use flat and free +100 MB is retention, not a leak.
struct HeapStats {
  int64_t in_use_bytes = 0;
  int64_t free_bytes = 0;
};
// False where the C library cannot tell (not glibc 2.33 or later, or a sanitizer build).
bool heap_stats(HeapStats* out);

}  // namespace cpinfer
