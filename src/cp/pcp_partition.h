// Prefill context parallelism: how a batch's new tokens are split over the PCP group
// (docs/context-parallel.md §4, DualChunkSwap). Each prefill request of n tokens is padded to a
// multiple of 2P and cut into 2P chunks of c tokens; PCP rank r takes the head chunk r and
// the tail chunk 2P-1-r. Decode requests (one new token) are not split, and they take no
// part in the K/V gather (the step planner gives each decode one home PCP rank).
#pragma once
#include <cstdint>
#include <vector>

namespace cpinfer {

struct PcpRequest {
  int64_t num_new_tokens = 0;  // tokens this step
  bool is_decode = false;      // a decode request: not split, not in the K/V gather
};

// The partition of one step as seen by PCP rank r (all vectors are per request unless
// said otherwise; "gathered" = the all-gather of every rank's local prefill tokens in
// rank order).
struct PcpPartition {
  int64_t pcp = 1, rank = 0;
  // Per request.
  std::vector<int64_t> padded_len;    // prefill: ceil(n / 2P) * 2P; decode: 1
  std::vector<int64_t> chunk;         // prefill: c = padded / 2P; decode: 0
  std::vector<int64_t> local_count;   // tokens this rank runs: 2c (prefill) or 1 (decode)
  std::vector<int64_t> local_offset;  // start of the request's local tokens (exclusive scan)
  // Per local token (sum of local_count entries), in local order.
  std::vector<int64_t> local_src;     // index into the request's own new tokens (0..n-1),
                                      // or -1 for a pad
  std::vector<int64_t> local_pos;     // position relative to the request's first new token
                                      // (pads: the padded relative position)
  std::vector<uint8_t> local_is_pad;
  // Prefill K/V gather over the PCP group: every rank contributes its local prefill
  // tokens (decode tokens excluded); `restore[i]` is the gathered-row index of the i-th
  // token in padded global order (prefill requests back to back, each padded).
  int64_t gathered_tokens = 0;        // P * (sum of local prefill tokens of one rank)
  std::vector<int64_t> restore;       // [gathered_tokens]
  std::vector<int64_t> padded_start;  // per request: start in padded global order (prefill
                                      // requests only; -1 for decode)
  // The pad-free gather the engine runs: every rank contributes only its real prefill
  // tokens, in local order. real_count[k]: rows PCP rank k sends; real_restore[i]: the row of
  // padded-global token i in that gather, or -1 for a pad. Pads are the last positions of
  // a request, so inside each chunk the real rows are a prefix.
  std::vector<int64_t> real_count;    // [P]
  std::vector<int64_t> real_restore;  // [gathered_tokens]
  std::vector<int64_t> real_cursor_;  // scratch of partition_pcp
};

// Builds rank r's partition for a batch. Requests keep their order; a prefill request
// with num_new_tokens == 1 is still a prefill (padded to 2P).
PcpPartition partition_pcp(const std::vector<PcpRequest>& requests, int64_t pcp, int64_t rank);
// The same into *out, reusing its vectors (no allocation once they have grown).
void partition_pcp(const std::vector<PcpRequest>& requests, int64_t pcp, int64_t rank,
                   PcpPartition* out);

// The reference design's restore index (§4 test vector), in which decode requests are
// gathered too: each decode request contributes P copies (one per rank) at the front of
// its slot in padded global order. Exposed so the spec's vector can be checked exactly.
std::vector<int64_t> restore_index_with_decodes(const std::vector<PcpRequest>& requests,
                                                int64_t pcp);

}  // namespace cpinfer
