// Replays fuzz inputs without libFuzzer: runs the target's LLVMFuzzerTestOneInput over every
// file under the directories (or files) given on the command line, in sorted order, skipping
// README* files. A crash, sanitizer report or uncaught exception fails the process; the
// file being run is printed first so that a failure names it. Used by ctest
// (fuzz_replay.<target>) over tests/fuzz/corpus/<target> and tests/fuzz/regressions/<target>.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Optional, as in libFuzzer: one-time set-up before the first input.
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path p(argv[i]);
    if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file() && e.path().filename().string().rfind("README", 0) != 0)
          files.push_back(e.path());
    } else {
      std::fprintf(stderr, "replay: '%s' does not exist\n", argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  for (const fs::path& f : files) {
    std::fprintf(stderr, "replay: %s\n", f.c_str());
    std::ifstream in(f, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A copy in its own allocation, so ASan sees reads past the end as libFuzzer does.
    std::vector<uint8_t> buf(bytes.begin(), bytes.end());
    LLVMFuzzerTestOneInput(buf.empty() ? nullptr : buf.data(), buf.size());
  }
  std::printf("replay: %zu inputs ran without a crash\n", files.size());
  return 0;
}
