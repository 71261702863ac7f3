#include "core/progress.h"

#include <unistd.h>

#include <cstdio>

namespace cpinfer {

ProgressBar::ProgressBar(std::string label, uint64_t total)
    : label_(std::move(label)), total_(total ? total : 1), enabled_(::isatty(STDERR_FILENO) == 1) {
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::advance(uint64_t delta) {
  done_ += delta;
  draw(false);
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  done_ = total_;
  draw(true);
  std::fputc('\n', stderr);
}

void ProgressBar::draw(bool force) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  double frac = double(done_ < total_ ? done_ : total_) / double(total_);
  int filled = int(frac * kWidth);
  double secs = std::chrono::duration<double>(now - start_).count();
  std::string bar(size_t(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r%s [%s] %3d%% %.1fs", label_.c_str(), bar.c_str(), int(frac * 100), secs);
  std::fflush(stderr);
}

}  // namespace cpinfer
