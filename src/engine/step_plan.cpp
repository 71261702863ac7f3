#include "engine/step_plan.h"

#include <cstring>

#include "core/error.h"

namespace cpinfer {

namespace {
template <typename T>
void put(std::vector<uint8_t>& out, const T* p, size_t n) {
  const auto* b = reinterpret_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n * sizeof(T));
}
template <typename T>
void get(const std::vector<uint8_t>& in, size_t& pos, T* p, size_t n) {
  CPI_CHECK(pos + n * sizeof(T) <= in.size(), "step plan is truncated ({} bytes)", in.size());
  std::memcpy(p, in.data() + pos, n * sizeof(T));
  pos += n * sizeof(T);
}
}  // namespace

std::vector<uint8_t> StepPlan::serialize() const {
  std::vector<uint8_t> out;
  int32_t k = int32_t(kind);
  int64_t ns = int64_t(seqs.size()), nt = int64_t(tokens.size());
  put(out, &k, 1);
  put(out, &ns, 1);
  put(out, &nt, 1);
  put(out, seqs.data(), seqs.size());
  put(out, tokens.data(), tokens.size());
  return out;
}

StepPlan StepPlan::deserialize(const std::vector<uint8_t>& in) {
  StepPlan p;
  size_t pos = 0;
  int32_t k = 0;
  int64_t ns = 0, nt = 0;
  get(in, pos, &k, 1);
  get(in, pos, &ns, 1);
  get(in, pos, &nt, 1);
  CPI_CHECK(k >= 0 && k <= 3 && ns >= 0 && nt >= 0 && ns <= int64_t(in.size()) &&
                nt <= int64_t(in.size()),
            "step plan header is corrupt");
  p.kind = Kind(k);
  p.seqs.resize(size_t(ns));
  p.tokens.resize(size_t(nt));
  get(in, pos, p.seqs.data(), p.seqs.size());
  get(in, pos, p.tokens.data(), p.tokens.size());
  CPI_CHECK(pos == in.size(), "step plan has {} trailing bytes", in.size() - pos);
  int64_t sum = 0;
  for (const Seq& s : p.seqs) sum += s.num_tokens;
  CPI_CHECK(p.kind != Kind::Forward || sum == nt, "step plan token counts disagree");
  return p;
}

}  // namespace cpinfer
