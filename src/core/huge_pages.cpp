#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace cpinfer {

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

constexpr size_t kHuge = size_t(2) << 20;

}  // namespace

size_t huge_pages_usable(size_t bytes) {
  const size_t unit = kSanitized ? 64 : kHuge;
  return (bytes + unit - 1) / unit * unit;
}

void* huge_pages_alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  if constexpr (kSanitized) {
    void* p = std::aligned_alloc(64, huge_pages_usable(bytes));
    if (p) std::memset(p, 0, huge_pages_usable(bytes));  // all of it is the caller's
    return p;
  }
  // mmap gives zeroed pages, faulted in on first touch. Map 2 MiB more than asked and unmap
  // the ends, so the range starts on a 2 MiB boundary (a huge page needs one). Example,
  // bytes 3 MiB: map 6 MiB at A; B = A rounded up to 2 MiB; unmap [A, B) and [B + 4 MiB,
  // A + 6 MiB); [B, B + 4 MiB) stays (the rounded size).
  const size_t size = huge_pages_usable(bytes);
  void* raw = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t a = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t b = (a + kHuge - 1) / kHuge * kHuge;
  if (b > a) munmap(raw, b - a);
  const uintptr_t end = a + size + kHuge;
  if (end > b + size) munmap(reinterpret_cast<void*>(b + size), end - (b + size));
  void* p = reinterpret_cast<void*>(b);
  madvise(p, size, MADV_HUGEPAGE);  // advice only: failure leaves 4 KiB pages
  return p;
}

void huge_pages_free(void* p, size_t bytes) {
  if (!p) return;
  if constexpr (kSanitized) {
    std::free(p);
    return;
  }
  munmap(p, huge_pages_usable(bytes));
}

template <typename T>
void ScratchArray<T>::reserve(size_t n) {
  if (n <= capacity_) return;
  void* p = huge_pages_alloc(n * sizeof(T));
  if (!p) throw std::bad_alloc();
  huge_pages_free(data_, capacity_ * sizeof(T));
  data_ = static_cast<T*>(p);
  capacity_ = huge_pages_usable(n * sizeof(T)) / sizeof(T);
}

template class ScratchArray<float>;

}  // namespace cpinfer
