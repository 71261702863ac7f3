// A pool of KV-cache pages: a free list plus a reference count per page (a page shared by
// sequences with a common prefix, or kept by the prefix cache, holds more than one).
#pragma once
#include <cstdint>
#include <vector>

namespace cpinfer {

class PagePool {
 public:
  explicit PagePool(int32_t num_pages);

  int32_t num_pages() const { return int32_t(ref_counts_.size()); }
  int32_t num_free() const { return int32_t(free_.size()); }
  // Takes n pages (ref count 1 each); throws Error if fewer than n are free (the
  // caller should have checked num_free()).
  std::vector<int32_t> allocate(int32_t n);
  // The same, appending the pages to *pages (a sequence's page list grows without a
  // temporary vector).
  void allocate_into(int32_t n, std::vector<int32_t>* pages);
  // Takes one particular free page (ref count 1): a worker rank takes the page rank 0's
  // block manager chose for it. Throws Error if the page is not free.
  void take(int32_t page);
  void add_ref(int32_t page);
  // Drops one reference; the page returns to the free list at zero.
  void release(int32_t page);
  void release(const std::vector<int32_t>& pages);
  int32_t ref_count(int32_t page) const;

 private:
  void check_page(int32_t page) const;
  std::vector<int32_t> ref_counts_;
  std::vector<int32_t> free_;  // used as a stack: low page ids are handed out first
  std::vector<int32_t> free_pos_;  // [num_pages] index of a free page in free_, -1 if used
};

}  // namespace cpinfer
