#include "model/layout_cost.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "cp/cp_layout.h"
#include "dist/parallel_layout.h"
#include "model/model_cost.h"

namespace cpinfer {

namespace {

bool valid_heads(const ModelConfig& c, int64_t tp, int64_t pcp, int64_t dcp) {
  if (c.intermediate_size % tp != 0) return false;
  LayoutSpec s;
  s.tp = int(tp);
  s.pcp = int(pcp);
  s.dcp = int(dcp);
  try {
    validate_layout(s, c.num_q_heads, c.num_kv_heads);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Time of one collective over a group: the bytes rank 0 receives at the group's bandwidth,
// plus one latency per algorithm step.
struct Link {
  double bytes_per_s, latency_s;
  double time(double bytes, int64_t steps) const {
    return bytes / bytes_per_s + double(steps) * latency_s;
  }
};

// Seconds for `cores` cores to run `rows` rows through `bytes` of weights holding
// `macs_per_row` multiply-adds: at the rate calibrated for that many rows, or (not
// calibrated) the larger of reading the weights at the one-row rate and the FLOPs at the
// GEMM rate. Example: 100 MB of bf16 weights (50 M MACs per row), 8 rows, 2 cores, one-row
// rate 10 GB/s, GEMM 50 GFLOP/s per core: max(100e6 / 20e9, 8 x 2 x 50e6 / 100e9) = 8 ms.
double weight_pass_s(double bytes, double macs_per_row, int64_t rows, double cores,
                     double one_row_gbps, const std::map<int64_t, double>& at_rows,
                     double gemm_gflops) {
  if (rows > 1) {
    if (auto it = at_rows.find(rows); it != at_rows.end())
      return bytes / (cores * it->second * 1e9);
    return std::max(bytes / (cores * one_row_gbps * 1e9),
                    2.0 * double(rows) * macs_per_row / (cores * gemm_gflops * 1e9));
  }
  return bytes / (cores * one_row_gbps * 1e9);
}

}  // namespace

int64_t decode_layer_rows(const LayoutChoice& l, int64_t concurrency) {
  return (concurrency + l.pcp - 1) / l.pcp;
}

std::vector<LayoutChoice> candidate_layouts(const ModelConfig& c, const MachineSpec& m,
                                            int64_t block_size) {
  CPI_CHECK(m.hosts >= 1 && m.cores_per_host >= 1, "plan: {} hosts of {} cores", m.hosts,
            m.cores_per_host);
  const int64_t cores = m.hosts * m.cores_per_host;
  const int64_t max_ranks = m.oversubscribe && m.hosts == 1 ? 2 * cores : cores;
  std::vector<LayoutChoice> out;
  for (int64_t tp = 1; tp <= std::min(c.num_q_heads, max_ranks); ++tp) {
    if (c.num_q_heads % tp != 0) continue;
    for (int64_t pcp = 1; tp * pcp <= max_ranks; ++pcp) {
      const int64_t ranks = tp * pcp;
      if (ranks % m.hosts != 0) continue;
      const int64_t per_host = ranks / m.hosts;
      if (per_host % tp != 0 && m.hosts > 1) continue;  // a TP group inside one host
      if (per_host <= m.cores_per_host) {
        if (m.cores_per_host % per_host != 0) continue;  // every core used, evenly
      } else if (!m.oversubscribe) {
        continue;
      }
      const int64_t threads = std::max<int64_t>(1, m.cores_per_host / per_host);
      for (int64_t dcp = 1; dcp <= tp; ++dcp) {
        if (tp % dcp != 0 || !valid_heads(c, tp, pcp, dcp)) continue;
        const bool sharded = pcp * dcp > 1;
        for (int64_t il : {int64_t(1), block_size}) {
          if (!sharded && il != 1) continue;
          if (sharded && il == 1 && block_size == 1) continue;
          out.push_back({tp, pcp, dcp, il, threads});
          if (block_size == 1) break;
        }
      }
    }
  }
  return out;
}

LayoutEstimate estimate_layout(const ModelConfig& c, const LayoutChoice& l,
                               const MachineSpec& m, int64_t n, int64_t kv_bytes,
                               int64_t concurrency) {
  CPI_CHECK(n >= 1, "plan: --context-len must be >= 1, found {}", n);
  CPI_CHECK(concurrency >= 1, "plan: --concurrency must be >= 1, found {}", concurrency);
  const int64_t B = concurrency;
  LayoutEstimate e;
  e.layout = l;
  e.concurrency = B;
  e.ranks = l.tp * l.pcp;
  e.ranks_per_host = std::max<int64_t>(1, e.ranks / m.hosts);
  const int64_t P = l.pcp, L = c.num_layers, H = c.hidden_size, D = c.head_dim;
  const int64_t hkv = std::max<int64_t>(1, c.num_kv_heads / l.tp);
  // Cores a rank really has: its threads, or a share of a core when oversubscribed.
  const double cores_per_rank =
      std::min<double>(double(l.threads_per_rank),
                       double(m.cores_per_host) / double(e.ranks_per_host));
  // Links: a group crosses hosts when its ranks do (world rank g sits on host g / per_host).
  const bool multi_host = m.hosts > 1;
  const Link local{m.local_gbps * 1e9, m.local_latency_s};
  const Link remote{m.link_gbps / 8 * 1e9 / double(e.ranks_per_host), m.link_latency_s};
  const Link& tp_link = local;  // TP groups stay inside a host
  const Link& pcp_link = multi_host && P > 1 ? remote : local;
  const Link& world_link = multi_host ? remote : local;
  const Link& logits_link = P > 1 ? world_link : tp_link;

  // ---- Prefill (one step of n tokens).
  const int64_t rows = P > 1 ? 2 * ((n + 2 * P - 1) / (2 * P)) : n;  // rank 0's tokens
  const double linear_flops = 2.0 * double(rows) * double(linear_macs_per_token(c)) / double(l.tp);
  const double pairs = double(n) * double(n + 1) / 2;
  const double attn_flops = 4.0 * double(D) * pairs * double(c.num_q_heads) * double(L) /
                            double(l.tp * P);
  // The LM head over the prompt's last row (cut over every rank, as in decode) at its GEMV's
  // rate.
  const double wb = double(weight_bytes_of(c));
  const double head_bytes = double(c.vocab_size) * double(H) * wb / double(l.tp * P);
  const double weight_gbps =
      m.weight_read_gbps_per_core > 0 ? m.weight_read_gbps_per_core : m.read_gbps_per_core;
  const double head_gbps =
      m.lm_head_read_gbps_per_core > 0 ? m.lm_head_read_gbps_per_core : weight_gbps;
  e.prefill_compute_s = linear_flops / (cores_per_rank * m.gemm_gflops_per_core * 1e9) +
                        attn_flops / (cores_per_rank * m.attn_gflops_per_core * 1e9) +
                        head_bytes / (cores_per_rank * head_gbps * 1e9);
  const CommModelLayout cml{l.tp, l.pcp, l.dcp, kv_bytes};
  const TrafficVolume pv = prefill_comm_bytes(c, cml, n);
  auto at = [](const TrafficVolume& v, Traffic t) { return v[size_t(t)]; };
  if (P > 1) {
    e.prefill_comm_s += pcp_link.time(at(pv, Traffic::KvGather), L * (P - 1));
    e.prefill_comm_s += pcp_link.time(at(pv, Traffic::HiddenGather), P - 1);
  }
  if (l.tp > 1) e.prefill_comm_s += tp_link.time(at(pv, Traffic::TpAllReduce), 2 * L * 2 * (l.tp - 1));
  if (e.ranks > 1) e.prefill_comm_s += logits_link.time(at(pv, Traffic::LogitsGather), e.ranks - 1);
  e.ttft_s = e.prefill_compute_s + e.prefill_comm_s;
  e.comm_bytes_per_step = total_bytes(pv);

  // ---- Memory: weights of a TP shard, KV of rank 0's share (the largest).
  const double embed = double(c.vocab_size) * double(H) * wb;
  const double lm_head = c.tie_word_embeddings ? 0.0 : embed;
  e.weight_bytes_per_rank = (double(linear_macs_per_token(c)) * wb + embed + lm_head) / double(l.tp);
  CpLayout cp;
  cp.pcp = l.pcp;
  cp.dcp = l.dcp;
  cp.interleave = l.interleave;
  const double kv_token_local = 2.0 * double(L) * double(hkv) * double(D) * double(kv_bytes);
  const double kv_per_seq = double(cp.local_len(n, 0)) * kv_token_local;
  e.kv_bytes_per_rank = double(B) * kv_per_seq;
  e.memory_bytes_per_host = double(e.ranks_per_host) * (e.weight_bytes_per_rank + e.kv_bytes_per_rank);
  e.fits = m.memory_bytes_per_host <= 0 || e.memory_bytes_per_host <= 0.9 * m.memory_bytes_per_host;
  if (m.memory_bytes_per_host > 0) {
    // The fits rule solved for B: ranks_per_host x (weights + B x kv_per_seq) <= 0.9 x memory.
    const double room = 0.9 * m.memory_bytes_per_host / double(e.ranks_per_host) -
                        e.weight_bytes_per_rank;
    e.max_concurrency = room <= 0 ? 0 : int64_t(std::floor(room / kv_per_seq));
  }

  // ---- Decode (one step of B tokens, each after n cached).
  // The layers' TP shard of the weights for rank 0's ceil(B / P) rows, the LM head (cut over
  // every rank) for all B rows, each at its rate for that many rows; the rank's KV of every
  // sequence at the streaming read rate.
  const double layer_bytes = double(linear_macs_per_token(c)) * wb / double(l.tp);
  const double layer_macs = double(linear_macs_per_token(c)) / double(l.tp);
  const double head_macs = double(c.vocab_size) * double(H) / double(l.tp * P);
  // Fewer decodes than PCP ranks (B < P, one row each on its home rank): on one host only
  // the home ranks' threads stream the layers, B x tp x threads of them (a home PCP rank is a
  // whole TP group; DCP splits within it), while the other ranks wait. Each busy thread gets
  // a whole core when there are enough (even where the ranks oversubscribe the host: the
  // waiting ones yield theirs), and the busy cores share the bus: each reads at the all-busy
  // rate scaled by the busy share, at most at the rate of one thread alone.
  // Examples, one host of 2 cores, B = 1: pcp 2 x 1 thread: one busy thread on one core, at
  // min(alone, 2 x all-busy); pcp 4 x 1 thread (oversubscribed, half a core per rank while
  // all are busy): the home rank's thread still has a whole core for the layers.
  double layer_gbps = weight_gbps, layer_cores = cores_per_rank;
  if (B < P && m.hosts == 1 && m.weight_read_gbps_alone > 0) {
    const double busy = double(B * l.tp * l.threads_per_rank);
    const double cores = double(m.cores_per_host);
    layer_cores = double(l.threads_per_rank) * std::min(1.0, cores / busy);
    layer_gbps = std::max(weight_gbps, std::min(m.weight_read_gbps_alone,
                                                weight_gbps * cores / std::min(cores, busy)));
  }
  e.decode_read_s =
      weight_pass_s(layer_bytes, layer_macs, decode_layer_rows(l, B), layer_cores, layer_gbps,
                    m.weight_read_gbps_at_rows, m.gemm_gflops_per_core) +
      weight_pass_s(head_bytes, head_macs, B, cores_per_rank, head_gbps,
                    m.lm_head_read_gbps_at_rows, m.gemm_gflops_per_core) +
      e.kv_bytes_per_rank / (cores_per_rank * m.read_gbps_per_core * 1e9);
  const TrafficVolume dv = decode_comm_bytes(c, cml, B);
  if (l.dcp > 1) {
    e.decode_comm_s += tp_link.time(at(dv, Traffic::QueryGather), L * (l.dcp - 1));
    e.decode_comm_s += tp_link.time(at(dv, Traffic::DcpCombine), L * (l.dcp - 1));
  }
  if (P > 1) e.decode_comm_s += pcp_link.time(at(dv, Traffic::PcpCombine), L * (P - 1));
  if (l.tp > 1) e.decode_comm_s += tp_link.time(at(dv, Traffic::TpAllReduce), 2 * L * 2 * (l.tp - 1));
  if (e.ranks > 1) e.decode_comm_s += logits_link.time(at(dv, Traffic::LogitsGather), e.ranks - 1);
  e.itl_s = e.decode_read_s + e.decode_comm_s;
  e.decode_tokens_per_s = double(B) / e.itl_s;
  e.comm_bytes_decode_step = total_bytes(dv);
  return e;
}

}  // namespace cpinfer
