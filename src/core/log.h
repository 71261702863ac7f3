// Minimal levelled logging to stderr. CPINFER_LOG=debug|info|warn|error|off (default info).
#pragma once
#include <fmt/format.h>

#include <cstdio>

namespace cpinfer {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };
LogLevel log_level();
void set_log_level(LogLevel level);
void log_write(LogLevel level, const std::string& msg);

template <typename... Args>
void log_at(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (level < log_level()) return;
  log_write(level, fmt::format(f, std::forward<Args>(args)...));
}
#define CPI_LOG_DEBUG(...) ::cpinfer::log_at(::cpinfer::LogLevel::Debug, __VA_ARGS__)
#define CPI_LOG_INFO(...) ::cpinfer::log_at(::cpinfer::LogLevel::Info, __VA_ARGS__)
#define CPI_LOG_WARN(...) ::cpinfer::log_at(::cpinfer::LogLevel::Warn, __VA_ARGS__)
#define CPI_LOG_ERROR(...) ::cpinfer::log_at(::cpinfer::LogLevel::Error, __VA_ARGS__)

}  // namespace cpinfer
