#include "cp/pcp_partition.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace cpinfer {

namespace {

// Stable argsort of `keys`: restore[i] = the row of the i-th smallest key.
std::vector<int64_t> stable_argsort(const std::vector<int64_t>& keys) {
  std::vector<int64_t> idx(keys.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int64_t a, int64_t b) { return keys[size_t(a)] < keys[size_t(b)]; });
  return idx;
}

// Relative (padded) positions rank r holds of a request split in 2P chunks of c:
// head chunk r then tail chunk 2P-1-r. P 2, c 2: rank 0 -> 0,1,6,7; rank 1 -> 2,3,4,5.
void local_positions(int64_t P, int64_t r, int64_t c, std::vector<int64_t>* out) {
  for (int64_t i = 0; i < c; ++i) out->push_back(r * c + i);
  for (int64_t i = 0; i < c; ++i) out->push_back((2 * P - 1 - r) * c + i);
}

}  // namespace

void partition_pcp(const std::vector<PcpRequest>& reqs, int64_t P, int64_t r, PcpPartition* out) {
  CPI_CHECK(P >= 1 && r >= 0 && r < P, "PCP rank {} is outside [0, {})", r, P);
  PcpPartition& part = *out;
  part.pcp = P;
  part.rank = r;
  for (auto* v : {&part.padded_len, &part.chunk, &part.local_count, &part.local_offset,
                  &part.local_src, &part.local_pos, &part.restore, &part.padded_start,
                  &part.real_restore})
    v->clear();
  part.local_is_pad.clear();
  int64_t offset = 0, padded_cursor = 0, gathered_per_rank = 0;
  for (const PcpRequest& q : reqs) {
    CPI_CHECK(q.num_new_tokens >= 1, "a request must add at least one token");
    part.local_offset.push_back(offset);
    if (q.is_decode) {
      CPI_CHECK(q.num_new_tokens == 1, "a decode request adds exactly one token, not {}",
                q.num_new_tokens);
      part.padded_len.push_back(1);
      part.chunk.push_back(0);
      part.local_count.push_back(1);
      part.padded_start.push_back(-1);
      part.local_src.push_back(0);
      part.local_pos.push_back(0);
      part.local_is_pad.push_back(0);
      offset += 1;
      continue;
    }
    const int64_t n = q.num_new_tokens;
    const int64_t padded = (n + 2 * P - 1) / (2 * P) * (2 * P), c = padded / (2 * P);
    part.padded_len.push_back(padded);
    part.chunk.push_back(c);
    part.local_count.push_back(2 * c);
    part.padded_start.push_back(padded_cursor);
    for (int64_t half = 0; half < 2; ++half)  // head chunk r, then tail chunk 2P-1-r
      for (int64_t i = 0; i < c; ++i) {
        const int64_t p = (half == 0 ? r : 2 * P - 1 - r) * c + i;
        const bool pad = p >= n;  // pads are the last `padded - n` positions
        part.local_src.push_back(pad ? -1 : p);
        part.local_pos.push_back(p);
        part.local_is_pad.push_back(pad ? 1 : 0);
      }
    offset += 2 * c;
    padded_cursor += padded;
    gathered_per_rank += 2 * c;
  }
  // Gathered rows come rank by rank, G = gathered_per_rank each; a request's rows sit at the
  // same offset g0 inside every rank's block (head chunk first). Padded position j of the
  // request lies in chunk k = j / c, held by rank k (k < P, as its head) or 2P-1-k (tail):
  // gathered row = rank * G + g0 + (k < P ? 0 : c) + j % c. P 2, one request of 8 (c 2,
  // G 4): j 0..7 -> rows 0,1, 4,5, 6,7, 2,3.
  part.gathered_tokens = P * gathered_per_rank;
  int64_t g0 = 0;
  for (size_t q = 0; q < reqs.size(); ++q) {
    if (reqs[q].is_decode) continue;
    const int64_t c = part.chunk[q];
    for (int64_t j = 0; j < 2 * P * c; ++j) {
      const int64_t k = j / c, rank = k < P ? k : 2 * P - 1 - k;
      part.restore.push_back(rank * gathered_per_rank + g0 + (k < P ? 0 : c) + j % c);
    }
    g0 += 2 * c;
  }
  // Pad-free gather. Rank k's real rows of a request of n tokens: its head chunk k holds
  // clamp(n - k c, 0, c), its tail chunk 2P-1-k clamp(n - (2P-1-k) c, 0, c). Example, P 2,
  // n 5 (c 2): rank 0 holds 0,1 | - -, rank 1 holds 2,3 | 4 -, so real_count [2, 3] and
  // real_restore [0 1 | 2 3 4 | -1 -1 -1] (rank 1's block starts at row 2).
  auto real_in = [](int64_t n, int64_t chunk, int64_t c) {
    return std::clamp<int64_t>(n - chunk * c, 0, c);
  };
  part.real_count.assign(size_t(P), 0);
  for (size_t q = 0; q < reqs.size(); ++q) {
    if (reqs[q].is_decode) continue;
    const int64_t n = reqs[q].num_new_tokens, c = part.chunk[q];
    for (int64_t k = 0; k < P; ++k)
      part.real_count[size_t(k)] += real_in(n, k, c) + real_in(n, 2 * P - 1 - k, c);
  }
  // cursor[k]: rank k's next row in the gather (its block starts after ranks 0..k-1).
  std::vector<int64_t>& cursor = part.real_cursor_;
  cursor.assign(size_t(P), 0);
  for (int64_t k = 1; k < P; ++k) cursor[size_t(k)] = cursor[size_t(k - 1)] + part.real_count[size_t(k - 1)];
  for (size_t q = 0; q < reqs.size(); ++q) {
    if (reqs[q].is_decode) continue;
    const int64_t n = reqs[q].num_new_tokens, c = part.chunk[q];
    for (int64_t j = 0; j < 2 * P * c; ++j) {
      const int64_t k = j / c, rank = k < P ? k : 2 * P - 1 - k;
      // The tail chunk's real rows follow the head chunk's on the same rank.
      const int64_t before = k < P ? 0 : real_in(n, rank, c);
      part.real_restore.push_back(j < n ? cursor[size_t(rank)] + before + j % c : -1);
    }
    for (int64_t k = 0; k < P; ++k)
      cursor[size_t(k)] += real_in(n, k, c) + real_in(n, 2 * P - 1 - k, c);
  }
}

PcpPartition partition_pcp(const std::vector<PcpRequest>& reqs, int64_t P, int64_t r) {
  PcpPartition part;
  partition_pcp(reqs, P, r, &part);
  return part;
}

std::vector<int64_t> restore_index_with_decodes(const std::vector<PcpRequest>& reqs, int64_t P) {
  std::vector<std::vector<int64_t>> positions_of_rank(static_cast<size_t>(P));
  int64_t cursor = 0;
  for (const PcpRequest& q : reqs) {
    if (q.is_decode) {
      // P copies, rank k's copy at cursor + k.
      for (int64_t k = 0; k < P; ++k) positions_of_rank[size_t(k)].push_back(cursor + k);
      cursor += P;
      continue;
    }
    const int64_t padded = (q.num_new_tokens + 2 * P - 1) / (2 * P) * (2 * P);
    const int64_t c = padded / (2 * P);
    for (int64_t k = 0; k < P; ++k) {
      std::vector<int64_t> rel;
      local_positions(P, k, c, &rel);
      for (int64_t p : rel) positions_of_rank[size_t(k)].push_back(cursor + p);
    }
    cursor += padded;
  }
  std::vector<int64_t> keys;
  for (const auto& v : positions_of_rank) keys.insert(keys.end(), v.begin(), v.end());
  return stable_argsort(keys);
}

}  // namespace cpinfer
