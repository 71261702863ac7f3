// Paged KV cache storage for all layers. Per layer, K and V are
// [num_pages, page_size, num_kv_heads, head_dim] (NHD), stored as f32 or bf16.
// A token's slot is page * page_size + offset; slot -1 means "not stored on this rank".
// The storage is 2 MiB aligned and advised for transparent huge pages: decode attention
// walks the whole cache every step, and with 4 KiB pages most of its loads miss the TLB.
#pragma once
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace cpinfer {

struct KvCacheShape {
  int64_t num_layers = 0;
  int64_t num_pages = 0;
  int64_t page_size = 16;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  DType dtype = DType::F32;  // F32 or BF16
  int64_t bytes() const;     // K and V of every layer
};

// One layer's pages as the attention kernels see them.
struct PagedKv {
  const void* k = nullptr;  // [num_pages, page_size, num_kv_heads, head_dim]
  const void* v = nullptr;
  DType dtype = DType::F32;
  int64_t page_size = 0, num_kv_heads = 0, head_dim = 0;
};

class KvCache {
 public:
  explicit KvCache(const KvCacheShape& shape);  // throws if the memory cannot be had
  const KvCacheShape& shape() const { return shape_; }
  PagedKv layer(int64_t layer) const;

  // Writes n tokens' K and V (f32, [n, num_kv_heads, head_dim] with row stride ld floats)
  // of one layer at slots[n]; slot -1 skips the token.
  void append(int64_t layer, const float* k, const float* v, int64_t ld, const int64_t* slots,
              int64_t n);
  // Copies the first `rows` token slots of page `src` to page `dst` (K and V, every layer):
  // a sequence that reuses a cached prefix ending inside a page gets its own copy of that
  // page's valid rows, and goes on writing the copy (copy on write).
  void copy_rows(int32_t src, int32_t dst, int64_t rows);

 private:
  // Zeroed bytes from huge_pages_alloc (huge pages where the kernel grants them), touched
  // once at allocation.
  struct Storage {
    uint8_t* data = nullptr;
    size_t bytes = 0;
    Storage() = default;
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    ~Storage();
    bool allocate(size_t n);
  };
  KvCacheShape shape_;
  int64_t layer_elems_ = 0;  // elements of K (or V) per layer
  Storage k_, v_;
};

}  // namespace cpinfer
