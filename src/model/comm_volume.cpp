#include "model/comm_volume.h"

#include <algorithm>

#include "core/error.h"
#include "model/weights.h"

namespace cpinfer {

namespace {

struct Local {
  int64_t hq, hkv;  // q and KV heads of one TP rank
};

Local local_heads(const ModelConfig& c, const CommModelLayout& l) {
  CPI_CHECK(l.tp >= 1 && l.pcp >= 1 && l.dcp >= 1 && c.num_q_heads % l.tp == 0,
            "comm volume: invalid layout tp {} pcp {} dcp {}", l.tp, l.pcp, l.dcp);
  // tp <= Hkv: Hkv / tp heads per rank; tp > Hkv: one replicated head per rank.
  return {c.num_q_heads / l.tp, std::max<int64_t>(1, c.num_kv_heads / l.tp)};
}

// Ring all-reduce of `bytes` over g ranks: 2 (g - 1) / g of the buffer (Comm rounds down).
double all_reduce(int64_t g, int64_t bytes) { return double(2 * (g - 1) * bytes / g); }

// Vocabulary-parallel LM head: rank 0 computes even_split(even_split(V, tp, 0), pcp, 0) of
// the vocabulary for each logit row and receives the rest.
double logits_gather(const ModelConfig& c, const CommModelLayout& l, int64_t rows) {
  if (l.tp * l.pcp == 1) return 0;
  const int64_t shard = even_split(c.vocab_size, l.tp, 0).second;
  const int64_t mine = even_split(shard, l.pcp, 0).second;
  return double(rows * (c.vocab_size - mine) * 4);
}

void tp_all_reduces(const ModelConfig& c, const CommModelLayout& l, int64_t rows,
                    TrafficVolume& v) {
  // After the o and the down projection of every layer: [rows, H] f32.
  if (l.tp > 1)
    v[size_t(Traffic::TpAllReduce)] =
        double(2 * c.num_layers) * all_reduce(l.tp, rows * c.hidden_size * 4);
}

}  // namespace

TrafficVolume prefill_comm_bytes(const ModelConfig& c, const CommModelLayout& l, int64_t n) {
  CPI_CHECK(n >= 1, "comm volume: a prefill of {} tokens", n);
  const Local h = local_heads(c, l);
  const int64_t P = l.pcp, D = c.head_dim;
  TrafficVolume v{};
  int64_t rows = n;  // tokens rank 0 runs
  if (P > 1) {
    // Split in 2P chunks of c tokens (n padded to 2P c); rank 0 holds chunks 0 and 2P-1, pads
    // (positions >= n) are not gathered. It receives every other real row's K and V.
    const int64_t ch = (n + 2 * P - 1) / (2 * P);
    rows = 2 * ch;
    const int64_t own = std::clamp<int64_t>(n, 0, ch) +
                        std::clamp<int64_t>(n - (2 * P - 1) * ch, 0, ch);
    v[size_t(Traffic::KvGather)] =
        double(c.num_layers * (n - own) * 2 * h.hkv * D * l.kv_bytes);
    // The last token's final hidden row, from the PCP rank holding it (chunk (n-1) / c).
    const int64_t k = (n - 1) / ch, holder = k < P ? k : 2 * P - 1 - k;
    v[size_t(Traffic::HiddenGather)] = holder == 0 ? 0.0 : double(c.hidden_size * 4);
  }
  v[size_t(Traffic::LogitsGather)] = logits_gather(c, l, 1);
  tp_all_reduces(c, l, rows, v);
  return v;
}

TrafficVolume decode_comm_bytes(const ModelConfig& c, const CommModelLayout& l, int64_t B) {
  CPI_CHECK(B >= 1, "comm volume: a step of {} decodes", B);
  const Local h = local_heads(c, l);
  const int64_t D = c.head_dim, L = c.num_layers, P = l.pcp;
  // Rank 0's decodes (d % P == 0): ceil(B / P) under PCP, all B without.
  const int64_t mine = P > 1 ? (B + P - 1) / P : B;
  TrafficVolume v{};
  if (l.dcp > 1) {
    // Per layer: the DCP group's q heads of every decode (all-gather), then one all-to-all of
    // partial states: this rank's heads' O (D floats) and LSE (1) from every other DCP rank.
    v[size_t(Traffic::QueryGather)] = double(L * (l.dcp - 1) * B * h.hq * D * 4);
    v[size_t(Traffic::DcpCombine)] = double(L * (l.dcp - 1) * B * h.hq * (D + 1) * 4);
  }
  if (P > 1) {
    // Per layer: the q, k and v rows of the decodes other PCP ranks run (all-gather), then
    // one all-to-all of (O, LSE) from every other PCP rank, in blocks of the largest rank's
    // decode count (rank 0's: ceil(B / P)). Then the other ranks' decodes' final hidden rows.
    v[size_t(Traffic::QueryGather)] += double(L * (B - mine) * (h.hq + 2 * h.hkv) * D * 4);
    v[size_t(Traffic::PcpCombine)] = double(L * (P - 1) * mine * h.hq * (D + 1) * 4);
    v[size_t(Traffic::HiddenGather)] = double((B - mine) * c.hidden_size * 4);
  }
  v[size_t(Traffic::LogitsGather)] = logits_gather(c, l, B);
  tp_all_reduces(c, l, mine, v);
  return v;
}

double total_bytes(const TrafficVolume& v) {
  double t = 0;
  for (double x : v) t += x;
  return t;
}

}  // namespace cpinfer
