#include "core/log.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace cpinfer {

namespace {
LogLevel initial_level() {
  const char* e = std::getenv("CPINFER_LOG");
  if (!e) return LogLevel::Info;
  if (!std::strcmp(e, "debug")) return LogLevel::Debug;
  if (!std::strcmp(e, "warn")) return LogLevel::Warn;
  if (!std::strcmp(e, "error")) return LogLevel::Error;
  if (!std::strcmp(e, "off")) return LogLevel::Off;
  return LogLevel::Info;
}
std::atomic<int> g_level{int(initial_level())};
std::mutex g_log_mutex;
}  // namespace

LogLevel log_level() { return LogLevel(g_level.load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { g_level.store(int(level)); }

void log_write(LogLevel level, const std::string& msg) {
  static const char* names[] = {"debug", "info", "warn", "error"};
  std::lock_guard<std::mutex> lock(g_log_mutex);
  std::fprintf(stderr, "[cpinfer %s] %s\n", names[int(level)], msg.c_str());
}

}  // namespace cpinfer
