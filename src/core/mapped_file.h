// Read-only memory map of a whole file (RAII). Weights are read through it so that
// each rank only touches the pages of its own shard.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace cpinfer {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);  // throws Error naming the path
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void reset();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Drops this process's pages of [p, p + bytes) of a read-only file mapping (the whole pages
// inside the range; the partial pages at its ends stay): they leave the resident set and
// would be read from the file again if touched. For weights replaced by a converted copy.
void release_mapped_pages(const void* p, size_t bytes);

}  // namespace cpinfer
