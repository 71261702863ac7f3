#include "attention/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/huge_pages.h"

namespace cpinfer {

int64_t KvCacheShape::bytes() const {
  return 2 * num_layers * num_pages * page_size * num_kv_heads * head_dim *
         int64_t(dtype_size(dtype));
}

KvCache::Storage::~Storage() { huge_pages_free(data, bytes); }

bool KvCache::Storage::allocate(size_t n) {
  bytes = n;
  if (n == 0) return true;
  data = static_cast<uint8_t*>(huge_pages_alloc(n));
  if (!data) return false;
  // Touch every page now (the memory comes zeroed): a cache too large for the machine fails
  // at start-up rather than in the middle of serving, and no prefill pays its page faults.
  std::memset(data, 0, n);
  return true;
}

KvCache::KvCache(const KvCacheShape& shape) : shape_(shape) {
  CPI_CHECK(shape.dtype == DType::F32 || shape.dtype == DType::BF16,
            "KV cache dtype {} is not supported (f32 or bf16)", dtype_name(shape.dtype));
  CPI_CHECK(shape.page_size >= 1 && shape.page_size <= 256, "block size {} is outside [1, 256]",
            shape.page_size);
  CPI_CHECK(shape.num_layers > 0 && shape.num_kv_heads > 0 && shape.head_dim > 0 &&
                shape.num_pages >= 0,
            "invalid KV cache shape");
  layer_elems_ = shape.num_pages * shape.page_size * shape.num_kv_heads * shape.head_dim;
  size_t bytes = size_t(layer_elems_ * shape.num_layers) * dtype_size(shape.dtype);
  if (!k_.allocate(bytes) || !v_.allocate(bytes)) {
    fail("cannot allocate {:.2f} GiB of KV cache ({} pages of {} tokens); lower the KV cache size",
         2.0 * double(bytes) / (1 << 30), shape.num_pages, shape.page_size);
  }
}

PagedKv KvCache::layer(int64_t layer) const {
  CPI_ASSERT(layer >= 0 && layer < shape_.num_layers);
  size_t off = size_t(layer * layer_elems_) * dtype_size(shape_.dtype);
  return PagedKv{k_.data + off, v_.data + off, shape_.dtype, shape_.page_size,
                 shape_.num_kv_heads, shape_.head_dim};
}

void KvCache::append(int64_t layer, const float* k, const float* v, int64_t ld,
                     const int64_t* slots, int64_t n) {
  const int64_t row = shape_.num_kv_heads * shape_.head_dim;  // elements per token
  const int64_t max_slot = shape_.num_pages * shape_.page_size;
  PagedKv kv = this->layer(layer);
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = slots[i];
    if (s < 0) continue;
    CPI_ASSERT(s < max_slot);
    const float* ks = k + i * ld;
    const float* vs = v + i * ld;
    if (shape_.dtype == DType::F32) {
      std::memcpy((float*)kv.k + s * row, ks, size_t(row) * 4);
      std::memcpy((float*)kv.v + s * row, vs, size_t(row) * 4);
    } else {
      bf16* kd = (bf16*)kv.k + s * row;
      bf16* vd = (bf16*)kv.v + s * row;
      for (int64_t j = 0; j < row; ++j) {
        kd[j] = bf16(ks[j]);
        vd[j] = bf16(vs[j]);
      }
    }
  }
}

void KvCache::copy_rows(int32_t src, int32_t dst, int64_t rows) {
  CPI_CHECK(src >= 0 && src < shape_.num_pages && dst >= 0 && dst < shape_.num_pages &&
                rows >= 0 && rows <= shape_.page_size,
            "KV page copy {} -> {} of {} rows is outside the cache ({} pages of {})", src, dst,
            rows, shape_.num_pages, shape_.page_size);
  if (src == dst || rows == 0) return;
  // Page p of one layer starts at element p * page_size * row; its first `rows` slots are
  // contiguous (NHD layout).
  const int64_t row = shape_.num_kv_heads * shape_.head_dim;
  const size_t es = dtype_size(shape_.dtype);
  const size_t bytes = size_t(rows * row) * es;
  for (int64_t l = 0; l < shape_.num_layers; ++l) {
    PagedKv kv = layer(l);
    const size_t s_off = size_t(int64_t(src) * shape_.page_size * row) * es;
    const size_t d_off = size_t(int64_t(dst) * shape_.page_size * row) * es;
    std::memcpy((uint8_t*)kv.k + d_off, (const uint8_t*)kv.k + s_off, bytes);
    std::memcpy((uint8_t*)kv.v + d_off, (const uint8_t*)kv.v + s_off, bytes);
  }
}

}  // namespace cpinfer
