#include "attention/page_pool.h"

#include "core/error.h"

namespace cpinfer {

PagePool::PagePool(int32_t num_pages) {
  CPI_CHECK(num_pages >= 0, "page pool size {} is negative", num_pages);
  ref_counts_.assign(size_t(num_pages), 0);
  free_pos_.assign(size_t(num_pages), -1);
  free_.reserve(size_t(num_pages));
  for (int32_t p = num_pages - 1; p >= 0; --p) {
    free_pos_[size_t(p)] = int32_t(free_.size());
    free_.push_back(p);
  }
}

void PagePool::check_page(int32_t page) const {
  CPI_CHECK(page >= 0 && page < num_pages(), "page {} is outside the pool [0, {})", page,
            num_pages());
}

std::vector<int32_t> PagePool::allocate(int32_t n) {
  std::vector<int32_t> out;
  allocate_into(n, &out);
  return out;
}

void PagePool::allocate_into(int32_t n, std::vector<int32_t>* pages) {
  CPI_CHECK(n >= 0 && n <= num_free(), "cannot allocate {} KV pages: {} of {} are free", n,
            num_free(), num_pages());
  // At most one allocation: the page list grows to what it needs (or doubles), not log2(n)
  // times for a long prompt's pages.
  if (pages->capacity() < pages->size() + size_t(n))
    pages->reserve(std::max(pages->size() + size_t(n), 2 * pages->capacity()));
  for (int32_t i = 0; i < n; ++i) {
    pages->push_back(free_.back());
    free_.pop_back();
    free_pos_[size_t(pages->back())] = -1;
    ref_counts_[size_t(pages->back())] = 1;
  }
}

void PagePool::take(int32_t page) {
  check_page(page);
  const int32_t at = free_pos_[size_t(page)];
  CPI_CHECK(at >= 0, "page {} is not free (ref count {})", page, ref_counts_[size_t(page)]);
  // Swap with the top of the stack, then pop: O(1). Free list [7 3 5], take 3 -> [7 5].
  const int32_t top = free_.back();
  free_[size_t(at)] = top;
  free_pos_[size_t(top)] = at;
  free_.pop_back();
  free_pos_[size_t(page)] = -1;
  ref_counts_[size_t(page)] = 1;
}

void PagePool::add_ref(int32_t page) {
  check_page(page);
  CPI_CHECK(ref_counts_[size_t(page)] > 0, "page {} is free; cannot add a reference", page);
  ++ref_counts_[size_t(page)];
}

void PagePool::release(int32_t page) {
  check_page(page);
  CPI_CHECK(ref_counts_[size_t(page)] > 0, "page {} released more often than referenced", page);
  if (--ref_counts_[size_t(page)] == 0) {
    free_pos_[size_t(page)] = int32_t(free_.size());
    free_.push_back(page);
  }
}

void PagePool::release(const std::vector<int32_t>& pages) {
  for (int32_t p : pages) release(p);
}

int32_t PagePool::ref_count(int32_t page) const {
  check_page(page);
  return ref_counts_[size_t(page)];
}

}  // namespace cpinfer
