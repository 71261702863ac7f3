// The one communicator interface (no other layer includes mpi.h). Collectives over
// OpenMPI on the world and on the layout's groups; MPI errors become cpinfer::Error
// naming the operation, the group and the rank.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace cpinfer {

class ParallelLayout;

enum class Group { World, Tp, Pcp, Dcp };
std::string_view group_name(Group g);

// Per-collective timing, so benchmarks can report time spent communicating.
//   bytes     the larger of this rank's send and receive buffers, per call
//   recv_bytes  the bytes of other ranks' data this rank receives, as the textbook
//             algorithm moves them (docs/context-parallel.md §11): all-gather (n - 1) * count,
//             all-gather-v the other ranks' counts, reduce-scatter (n - 1) * count,
//             all-reduce 2 (n - 1) count / n (ring), all-to-all(-v) what the others send it,
//             broadcast the buffer on a non-root rank; 0 in a group of one. In bytes.
struct CommStats {
  double seconds = 0;
  uint64_t calls = 0;
  uint64_t bytes = 0;
  uint64_t recv_bytes = 0;
};

// What a collective is for, so its volume can be reported (and checked) per kind.
enum class Traffic {
  Control,       // step plans, agreement checks, set-up
  KvGather,      // PCP all-gather of the new tokens' K/V
  QueryGather,   // DCP Q all-gather, PCP all-gather of chunk queries
  DcpCombine,    // DCP exchange of partial attention states
  PcpCombine,    // PCP exchange of partial attention states
  HiddenGather,  // PCP gather of the final hidden rows that give logits
  LogitsGather,  // vocabulary-parallel LM head: gather of the logits
  TpAllReduce,   // tensor-parallel all-reduce after the o and down projections
};
constexpr int kNumTraffic = 8;
std::string_view traffic_name(Traffic t);

class Comm {
 public:
  // MPI_Init_thread (SERIALIZED, at least FUNNELED) if not yet initialised, and the world
  // communicator. A single process started without mpirun is a world of size 1 and never
  // initialises MPI. MPI_Finalize runs at exit (static destruction).
  static Comm& world();
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  // Splits the world into the layout's TP / PCP / DCP groups (collective: every rank
  // calls it with the same spec).
  void set_layout(const ParallelLayout& layout);

  int rank(Group g = Group::World) const;
  int size(Group g = Group::World) const;
  // Global (world) ranks of this rank's group, in group-rank order.
  const std::vector<int>& members(Group g) const;
  // True when MPI is initialised (started by mpirun/mpiexec, even as a world of one).
  bool uses_mpi() const;
  // True when a second thread may make this rank's MPI calls while the first makes none
  // (the library provides MPI_THREAD_SERIALIZED or more; always true without MPI).
  bool allows_helper_thread() const;
  // True when the group has members on another host (no shared memory with this rank, as
  // MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) sees it); false for a group of one.
  bool spans_hosts(Group g) const;

  // Groups of size 1 never call MPI: collectives are copies (or nothing). Counts are elements
  // of `dtype`; every MPI error becomes an Error naming the call, the group and the rank.
  // Every rank of the group must make the same calls in the same order, one thread at a time
  // (MPI_THREAD_SERIALIZED). Send and receive buffers must not overlap unless said so.

  // In-place all-reduce (sum). dtype F32, BF16 (summed in f32, rounded once), F64, I32, I64.
  // Every member gets the same bits (checked by tests/mpi/comm_test.cpp).
  void all_reduce_sum(void* buf, size_t count, DType dtype, Group g);
  // recv[size * count] <- every rank's send[count], in group-rank order. send may be this
  // rank's own chunk of recv (recv + rank * count): then it is gathered in place.
  void all_gather(const void* send, void* recv, size_t count, DType dtype, Group g);
  // Variable counts: recv gets counts[r] elements from rank r, at displs[r].
  void all_gather_v(const void* send, size_t count, void* recv, const std::vector<int>& counts,
                    const std::vector<int>& displs, DType dtype, Group g);
  // send[size * count] summed over ranks; rank r keeps chunk r (count elements) in recv.
  void reduce_scatter_sum(const void* send, void* recv, size_t count, DType dtype, Group g);
  void broadcast(void* buf, size_t bytes, int root, Group g);
  // A broadcast that the non-root ranks may wait on for long (a worker waiting for the next
  // step while the server is idle). MPI's blocking wait polls without pause, so an idle job
  // would keep one core busy per waiting rank. Here the waiting ranks poll a nonblocking
  // broadcast: without pause for the first `spin_us` microseconds (a step that follows
  // another at once costs nothing more), then sleeping between polls, 50 us at first and
  // doubling up to 1 ms (an idle job wakes within ~1 ms of its next step). Every rank of the
  // group must use this call, not broadcast(), for the same operation (MPI never matches a
  // nonblocking collective with a blocking one). bytes < 2^31.
  void broadcast_patient(void* buf, size_t bytes, int root, Group g, int spin_us);
  void all_to_all(const void* send, void* recv, size_t count, DType dtype, Group g);
  void all_to_all_v(const void* send, const std::vector<int>& send_counts,
                    const std::vector<int>& send_displs, void* recv,
                    const std::vector<int>& recv_counts, const std::vector<int>& recv_displs,
                    DType dtype, Group g);
  void barrier(Group g);

  // Ends every rank of the job with a message naming this rank (used on fatal errors):
  // prints "cpinfer: rank N: <message>" to stderr, then MPI_Abort (exit without MPI).
  [[noreturn]] void abort_job(const std::string& message, int code = 1);
  // The same, printing `line` as it is.
  [[noreturn]] void abort_job_raw(const std::string& line, int code = 1);

  // Totals over every collective, and per group. bytes: the larger of this rank's send and
  // receive buffers, per call.
  const CommStats& stats() const { return stats_; }
  const CommStats& stats(Group g) const { return group_stats_[int(g)]; }
  const CommStats& stats(Traffic t) const { return traffic_stats_[int(t)]; }
  void reset_stats() {
    stats_ = {};
    for (auto& s : group_stats_) s = {};
    for (auto& s : traffic_stats_) s = {};
  }
  // Collectives are counted under the current traffic kind (Control unless a TrafficScope
  // says otherwise).
  Traffic traffic() const { return traffic_; }
  void set_traffic(Traffic t) { traffic_ = t; }

 private:
  Comm();
  struct Impl;
  struct Timed;
  std::unique_ptr<Impl> impl_;
  CommStats stats_;
  CommStats group_stats_[4];
  CommStats traffic_stats_[kNumTraffic];
  Traffic traffic_ = Traffic::Control;
};

// Counts the collectives of a scope under one traffic kind (comm may be null).
class TrafficScope {
 public:
  TrafficScope(Comm* comm, Traffic t) : comm_(comm) {
    if (comm_) prev_ = comm_->traffic(), comm_->set_traffic(t);
  }
  ~TrafficScope() {
    if (comm_) comm_->set_traffic(prev_);
  }
  TrafficScope(const TrafficScope&) = delete;
  TrafficScope& operator=(const TrafficScope&) = delete;

 private:
  Comm* comm_;
  Traffic prev_ = Traffic::Control;
};

}  // namespace cpinfer
