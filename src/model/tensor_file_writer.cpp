#include "model/tensor_file_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>

#include "core/error.h"
#include "core/progress.h"
#include "core/thread_pool.h"

namespace cpinfer {

namespace {

// Owns the temporary output file until it is renamed into place; removes it on error.
struct OutFile {
  std::string tmp;
  int fd = -1;
  uint8_t* map = nullptr;
  size_t size = 0;
  bool done = false;
  ~OutFile() {
    if (map) ::munmap(map, size);
    if (fd >= 0) ::close(fd);
    if (!done) ::unlink(tmp.c_str());
  }
};

}  // namespace

uint64_t tensor_bytes(const std::string& path, const TensorToWrite& t) {
  uint64_t numel = 1;
  for (int64_t d : t.shape) {
    CPI_CHECK(d >= 0, "writing '{}': tensor '{}' has a negative dimension in shape [{}]", path,
              t.name, fmt::join(t.shape, ", "));
    numel *= uint64_t(d);
  }
  if (t.dtype != DType::Q8_0) return numel * dtype_size(t.dtype);
  CPI_CHECK(!t.shape.empty() && t.shape.back() % kQ8BlockElems == 0, "writing '{}': Q8_0 tensor "
            "'{}' of shape [{}] has rows that are not whole blocks of {}", path, t.name,
            fmt::join(t.shape, ", "), kQ8BlockElems);
  return uint64_t(dtype_bytes(DType::Q8_0, int64_t(numel)));
}

void write_tensor_file(const std::string& path, const std::string& header,
                       const std::vector<TensorToWrite>& tensors,
                       const std::vector<uint64_t>& offsets, uint64_t total, int threads) {
  const size_t n = tensors.size();
  CPI_ASSERT(offsets.size() == n && header.size() <= total);
  std::vector<uint64_t> nbytes(n);
  uint64_t data_size = 0;
  for (size_t i = 0; i < n; ++i) {
    nbytes[i] = tensor_bytes(path, tensors[i]);
    CPI_ASSERT(offsets[i] + nbytes[i] <= total);
    data_size += nbytes[i];
  }

  OutFile out;
  out.tmp = path + ".tmp";
  out.fd = ::open(out.tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  CPI_CHECK(out.fd >= 0, "cannot create '{}': {}", out.tmp, std::strerror(errno));
  CPI_CHECK(::ftruncate(out.fd, off_t(total)) == 0, "cannot size '{}' to {} bytes: {}", out.tmp,
            total, std::strerror(errno));
  // Reserve the blocks now: running out of space later would be a SIGBUS in the map.
  // (fallocate, unlike posix_fallocate, does not emulate itself by writing zeros.)
  if (::fallocate(out.fd, 0, 0, off_t(total)) != 0 && errno == ENOSPC)
    fail("not enough disk space to write '{}' ({} bytes)", path, total);
  void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, out.fd, 0);
  CPI_CHECK(p != MAP_FAILED, "cannot mmap '{}' ({} bytes) for writing: {}", out.tmp, total,
            std::strerror(errno));
  out.map = static_cast<uint8_t*>(p);
  out.size = total;
  std::memcpy(out.map, header.data(), header.size());

  // Tasks: a whole tensor (fill) or a chunk of elements (fill_range; Q8_0 chunks are whole
  // blocks); biggest first so the dynamic hand-out balances well.
  struct Task { size_t tensor; int64_t begin, end; uint64_t bytes; };
  constexpr int64_t kChunkBytes = 4 << 20;
  std::vector<Task> tasks;
  for (size_t i = 0; i < n; ++i) {
    if (nbytes[i] == 0) continue;
    const TensorToWrite& t = tensors[i];
    const bool q8 = t.dtype == DType::Q8_0;
    const int64_t numel = q8 ? int64_t(nbytes[i]) / kQ8BlockBytes * kQ8BlockElems
                             : int64_t(nbytes[i] / dtype_size(t.dtype));
    if (!t.fill_range) {
      tasks.push_back({i, 0, numel, nbytes[i]});
      continue;
    }
    const int64_t chunk = q8 ? std::max<int64_t>(1, kChunkBytes / kQ8BlockBytes) * kQ8BlockElems
                             : std::max<int64_t>(1, kChunkBytes / int64_t(dtype_size(t.dtype)));
    for (int64_t b = 0; b < numel; b += chunk) {
      int64_t e = std::min(numel, b + chunk);
      tasks.push_back({i, b, e, uint64_t(dtype_bytes(t.dtype, e - b))});
    }
  }
  std::stable_sort(tasks.begin(), tasks.end(),
                   [](const Task& a, const Task& b) { return a.bytes > b.bytes; });

  ProgressBar bar("writing " + std::filesystem::path(path).filename().string(), data_size);
  std::mutex mu;
  std::exception_ptr error;
  ThreadPool pool(std::max(1, threads));
  pool.run(int64_t(tasks.size()), [&](int64_t k, int) {
    const Task& task = tasks[size_t(k)];
    const TensorToWrite& t = tensors[task.tensor];
    try {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (error) return;
      }
      uint8_t* dst = out.map + offsets[task.tensor];
      if (t.fill_range) t.fill_range(dst, task.begin, task.end);
      else t.fill(dst);
      std::lock_guard<std::mutex> lock(mu);
      bar.advance(task.bytes);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
  });
  bar.finish();
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      fail("writing '{}': {}", path, e.what());
    }
  }

  // Wait for the data to reach the disk so that I/O errors surface here, naming the file.
  CPI_CHECK(::msync(out.map, total, MS_SYNC) == 0, "cannot write '{}': {}", out.tmp,
            std::strerror(errno));
  ::munmap(out.map, total);
  out.map = nullptr;
  CPI_CHECK(::close(out.fd) == 0, "cannot close '{}': {}", out.tmp, std::strerror(errno));
  out.fd = -1;
  CPI_CHECK(::rename(out.tmp.c_str(), path.c_str()) == 0, "cannot rename '{}' to '{}': {}",
            out.tmp, path, std::strerror(errno));
  out.done = true;
}

}  // namespace cpinfer
