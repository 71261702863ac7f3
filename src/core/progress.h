// A one-line progress bar on stderr, drawn only when stderr is a terminal.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace cpinfer {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total);  // total in arbitrary units (bytes, tensors)
  ~ProgressBar();
  void advance(uint64_t delta);
  void finish();

 private:
  void draw(bool force);
  std::string label_;
  uint64_t total_, done_ = 0;
  bool enabled_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace cpinfer
