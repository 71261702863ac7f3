// Large buffers backed by transparent huge pages where the kernel allows them.
//
// A prefill of T tokens needs activation buffers of T x (hidden, q/k/v, FFN) floats: about
// 1.2 GB at T = 16384 on the qwen2.5-0.5b shape. Touched for the first time, 4 KiB pages cost
// one page fault each (300k faults for 1.2 GB), and on a virtual machine a fault can cost
// several microseconds: seconds of a long prompt's first step. Huge pages (2 MiB) take 512x
// fewer faults. Linux gives them to anonymous memory only when asked (MADV_HUGEPAGE) unless
// transparent_hugepage is "always"; the advice is a hint, so 4 KiB pages are the fallback.
#pragma once
#include <cstddef>

namespace cpinfer {

// `bytes` of zeroed memory, 64-byte aligned (2 MiB aligned outside sanitizer builds), with the
// huge-page advice. Null when the system has no memory to give. Sanitizer builds take the
// C heap instead (rounded to 64 bytes only), so overflows hit the allocator's redzones.
void* huge_pages_alloc(size_t bytes);
// The bytes huge_pages_alloc(bytes) actually gives (all usable): bytes rounded up to 2 MiB
// (to 64 under sanitizers).
size_t huge_pages_usable(size_t bytes);
// Releases memory from huge_pages_alloc(bytes) (the same `bytes`, or any size with the same
// huge_pages_usable); null is a no-op.
void huge_pages_free(void* p, size_t bytes);

// A grow-only scratch array of trivially copyable T in huge-page memory: the decoder's
// per-step workspaces, sized by the largest step seen. reserve() never shrinks; after a
// growth the contents are zero (the old ones are not kept: scratch, not storage).
template <typename T>
class ScratchArray {
 public:
  ScratchArray() = default;
  ScratchArray(const ScratchArray&) = delete;
  ScratchArray& operator=(const ScratchArray&) = delete;
  ~ScratchArray() { huge_pages_free(data_, capacity_ * sizeof(T)); }

  // Room for at least n elements (capacity() may come out larger: the rest of the last huge
  // page). Throws std::bad_alloc when the memory is not there.
  void reserve(size_t n);
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  T* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace cpinfer
