// Process memory figures for reports.
#pragma once
#include <cstdint>

namespace cpinfer {

// Peak resident set size of this process so far, in bytes (getrusage ru_maxrss).
int64_t peak_rss_bytes();

// Resident set size of this process now, in bytes (/proc/self/statm; 0 if unreadable).
int64_t current_rss_bytes();

}  // namespace cpinfer
