#include "engine/step_plan.h"

#include <cstring>

#include "core/error.h"

namespace cpinfer {

namespace {
template <typename T>
void put(std::vector<uint8_t>& out, const T* p, size_t n) {
  // resize + memcpy, not insert(end, b, e): GCC 12 warns falsely (-Wstringop-overflow) on
  // the inlined insert of a 4-byte range.
  const size_t at = out.size(), bytes = n * sizeof(T);
  out.resize(at + bytes);
  if (bytes > 0) std::memcpy(out.data() + at, p, bytes);
}
template <typename T>
void get(const std::vector<uint8_t>& in, size_t& pos, T* p, size_t n) {
  CPI_CHECK(pos + n * sizeof(T) <= in.size(), "step plan is truncated ({} bytes)", in.size());
  if (n > 0) std::memcpy(p, in.data() + pos, n * sizeof(T));  // p may be null when n == 0
  pos += n * sizeof(T);
}
}  // namespace

std::vector<uint8_t> StepPlan::serialize() const {
  std::vector<uint8_t> out;
  int32_t k = int32_t(kind), m = pages_from_ops;
  int64_t no = int64_t(page_ops.size()), ns = int64_t(seqs.size()), nt = int64_t(tokens.size());
  put(out, &k, 1);
  put(out, &m, 1);
  put(out, &no, 1);
  put(out, &ns, 1);
  put(out, &nt, 1);
  put(out, page_ops.data(), page_ops.size());
  put(out, seqs.data(), seqs.size());
  put(out, tokens.data(), tokens.size());
  return out;
}

StepPlan StepPlan::deserialize(const std::vector<uint8_t>& in) {
  StepPlan p;
  size_t pos = 0;
  int32_t k = 0, m = 0;
  int64_t no = 0, ns = 0, nt = 0;
  get(in, pos, &k, 1);
  get(in, pos, &m, 1);
  get(in, pos, &no, 1);
  get(in, pos, &ns, 1);
  get(in, pos, &nt, 1);
  CPI_CHECK(k >= 0 && k <= 3 && (m == 0 || m == 1) && no >= 0 && ns >= 0 && nt >= 0 &&
                no <= int64_t(in.size()) && ns <= int64_t(in.size()) && nt <= int64_t(in.size()),
            "step plan header is corrupt");
  p.kind = Kind(k);
  p.pages_from_ops = m;
  p.page_ops.resize(size_t(no));
  p.seqs.resize(size_t(ns));
  get(in, pos, p.page_ops.data(), p.page_ops.size());
  p.tokens.resize(size_t(nt));
  get(in, pos, p.seqs.data(), p.seqs.size());
  get(in, pos, p.tokens.data(), p.tokens.size());
  CPI_CHECK(pos == in.size(), "step plan has {} trailing bytes", in.size() - pos);
  int64_t sum = 0;
  for (const Seq& s : p.seqs) {
    CPI_CHECK(s.begin >= 0 && s.num_tokens >= 0 && int32_t(s.row_use) >= 0 &&
                  int32_t(s.row_use) <= int32_t(RowUse::None),
              "step plan sequence {} is corrupt", s.id);
    sum += s.num_tokens;
  }
  for (const PageOp& o : p.page_ops)
    CPI_CHECK(o.kind >= PageOp::Take && o.kind <= PageOp::ReleaseSeq && o.cp_rank >= -1,
              "step plan page operation is corrupt");
  CPI_CHECK(p.kind != Kind::Forward || sum == nt, "step plan token counts disagree");
  return p;
}

}  // namespace cpinfer
