// Comm over OpenMPI. The only file that includes mpi.h.
//
// - MPI is initialised lazily by Comm::world(), and only when mpirun/mpiexec started the
//   process (or someone already initialised it): the single-rank CLI pays no MPI start-up.
// - Every communicator uses MPI_ERRORS_RETURN and every return code is checked, so an MPI
//   error is an Error: "MPI_Allreduce failed on group tp (rank 3 of world 8): <reason>".
// - Groups of size 1 (including a world of 1) never call MPI: collectives are copies.
#include "dist/comm.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "dist/launcher.h"
#include "dist/parallel_layout.h"

namespace cpinfer {

std::string_view group_name(Group g) {
  switch (g) {
    case Group::World: return "world";
    case Group::Tp: return "tp";
    case Group::Pcp: return "pcp";
    case Group::Dcp: return "dcp";
  }
  return "?";
}

namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::BF16:
    case DType::F16: return MPI_UINT16_T;  // moved as bits; sums go through f32
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::U8:
    case DType::BOOL: return MPI_UINT8_T;
    case DType::I8: return MPI_INT8_T;
    case DType::Q8_0: break;  // a block format: never sent element by element
  }
  fail("Comm: unknown dtype {}", int(t));
}

std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", rc);
  return std::string(buf, size_t(len));
}

bool mpi_active() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

// F32 all-reduces of at least this many bytes run as a ring on the engine's own buffers
// (Comm::Impl::ring_all_reduce_f32); smaller ones (decode steps) through MPI_Allreduce,
// whose small-message algorithms have the lower latency.
constexpr size_t kRingAllReduceBytes = size_t(1) << 20;

int as_int(size_t count, std::string_view op) {
  CPI_CHECK(count <= size_t(INT_MAX), "Comm::{}: count {} exceeds the MPI limit of {} elements",
            op, count, INT_MAX);
  return int(count);
}

}  // namespace

struct Comm::Impl {
  struct GroupComm {
    MPI_Comm comm = MPI_COMM_NULL;  // null for groups of size 1
    int rank = 0, size = 1;
    std::vector<int> members;
    bool ready = false;
    bool spans_hosts = false;  // some member shares no memory with this rank (another node)
  };

  bool mpi = false;              // collectives of groups > 1 go through MPI
  bool we_initialised = false;   // so we finalise
  bool serialized = true;        // MPI_THREAD_SERIALIZED or more (or no MPI)
  int world_rank = 0, world_size = 1;
  GroupComm groups[4];
  std::vector<float> f32_send, f32_recv;  // BF16 sums in f32 (grown, never shrunk)

  GroupComm& group(Group g) {
    GroupComm& gc = groups[int(g)];
    CPI_CHECK(gc.ready,
              "Comm: group {} is not set up (world of {} ranks): call Comm::set_layout first",
              group_name(g), world_size);
    return gc;
  }

  // Sum of x[count] over the group, on every member (bitwise the same everywhere), as a ring
  // of point-to-point steps through f32_recv (grown once, then reused). Why not
  // MPI_Allreduce: for large buffers OpenMPI takes fresh temporary memory on every call, and
  // where page faults are expensive that made a 58.7 MB all-reduce 48x slower than a 14.7 MB
  // one per byte (0.41 against 4.9 GB/s on 2 ranks; docs/benchmarks.md, layout planner).
  // The buffer is cut into p chunks, chunk c = [c count / p, (c + 1) count / p).
  //   reduce-scatter, step s < p - 1: send chunk (r - s) mod p to rank r + 1, receive chunk
  //     (r - s - 1) mod p from rank r - 1 and add it in. Then rank r holds the whole sum of
  //     chunk (r + 1) mod p.
  //   all-gather, step s < p - 1: send chunk (r + 1 - s) mod p on, receive chunk (r - s) mod p
  //     over the local one: every rank ends with the sums computed by their owners.
  // Example, p 3, rank 0: reduce-scatter sends chunks 0, 2 and adds 2, 1 (owns the sum of 1);
  // all-gather sends 1, 0 and receives 0, 2.
  void ring_all_reduce_f32(float* x, size_t count, const GroupComm& gc, Group g) {
    const int p = gc.size, r = gc.rank;
    const int next = (r + 1) % p, prev = (r + p - 1) % p;
    auto lo = [&](int c) { return count * size_t(c) / size_t(p); };
    auto len = [&](int c) { return lo(c + 1) - lo(c); };
    auto mod = [&](int c) { return ((c % p) + p) % p; };
    const size_t most = count / size_t(p) + 1;  // the largest chunk
    if (f32_recv.size() < most) f32_recv.resize(most);
    for (int s = 0; s < p - 1; ++s) {
      const int cs = mod(r - s), cr = mod(r - s - 1);
      check(MPI_Sendrecv(x + lo(cs), as_int(len(cs), "all_reduce_sum"), MPI_FLOAT, next, 0,
                         f32_recv.data(), as_int(len(cr), "all_reduce_sum"), MPI_FLOAT, prev,
                         0, gc.comm, MPI_STATUS_IGNORE),
            "MPI_Sendrecv", g);
      float* dst = x + lo(cr);
      const float* src = f32_recv.data();
      for (size_t i = 0, e = len(cr); i < e; ++i) dst[i] += src[i];
    }
    for (int s = 0; s < p - 1; ++s) {
      const int cs = mod(r + 1 - s), cr = mod(r - s);
      check(MPI_Sendrecv(x + lo(cs), as_int(len(cs), "all_reduce_sum"), MPI_FLOAT, next, 1,
                         x + lo(cr), as_int(len(cr), "all_reduce_sum"), MPI_FLOAT, prev, 1,
                         gc.comm, MPI_STATUS_IGNORE),
            "MPI_Sendrecv", g);
    }
  }

  // Throws the Error the header promises when rc is not MPI_SUCCESS.
  void check(int rc, const char* call, Group g) const {
    if (rc == MPI_SUCCESS) return;
    fail("{} failed on group {} (rank {} of world {}): {}", call, group_name(g), world_rank,
         world_size, mpi_error_string(rc));
  }

  void free_group(Group g) {
    GroupComm& gc = groups[int(g)];
    if (gc.comm != MPI_COMM_NULL && mpi_active()) MPI_Comm_free(&gc.comm);
    gc = {};
  }

  ~Impl() {
    if (!mpi_active()) return;
    for (Group g : {Group::Dcp, Group::Pcp, Group::Tp, Group::World}) free_group(g);
    if (we_initialised) MPI_Finalize();
  }
};

// Times one collective and adds it to the totals and the group's stats.
struct Comm::Timed {
  Comm* c;
  Group g;
  size_t bytes;
  size_t recv_bytes;  // 0 in a group of one (nothing crosses a link)
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~Timed() {
    const double dt =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (CommStats* s : {&c->stats_, &c->group_stats_[int(g)], &c->traffic_stats_[int(c->traffic_)]}) {
      s->seconds += dt;
      s->calls += 1;
      s->bytes += bytes;
      s->recv_bytes += recv_bytes;
    }
  }
};

std::string_view traffic_name(Traffic t) {
  switch (t) {
    case Traffic::Control: return "control";
    case Traffic::KvGather: return "kv_gather";
    case Traffic::QueryGather: return "query_gather";
    case Traffic::DcpCombine: return "dcp_combine";
    case Traffic::PcpCombine: return "pcp_combine";
    case Traffic::HiddenGather: return "hidden_gather";
    case Traffic::LogitsGather: return "logits_gather";
    case Traffic::TpAllReduce: return "tp_all_reduce";
  }
  return "?";
}

Comm& Comm::world() {
  static Comm comm;
  return comm;
}

Comm::Comm() : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  int init = 0;
  MPI_Initialized(&init);
  if (init || launched_by_mpi()) {
    if (!init) {
      // The thread pool's workers never call MPI. SERIALIZED (which OpenMPI provides at no
      // cost) also allows the engine loop to run on a thread other than main; FUNNELED is
      // the minimum we accept.
      int provided = 0;
      const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      CPI_CHECK(rc == MPI_SUCCESS, "MPI_Init_thread failed with MPI error code {}", rc);
      m.we_initialised = true;
      CPI_CHECK(provided >= MPI_THREAD_FUNNELED,
                "MPI_Init_thread provided thread level {} < MPI_THREAD_FUNNELED", provided);
    }
    m.mpi = true;
    int level = 0;
    MPI_Query_thread(&level);
    m.serialized = level >= MPI_THREAD_SERIALIZED;
    m.check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
            "MPI_Comm_set_errhandler", Group::World);
    m.check(MPI_Comm_rank(MPI_COMM_WORLD, &m.world_rank), "MPI_Comm_rank", Group::World);
    m.check(MPI_Comm_size(MPI_COMM_WORLD, &m.world_size), "MPI_Comm_size", Group::World);
  }
  Impl::GroupComm& w = m.groups[int(Group::World)];
  w.rank = m.world_rank;
  w.size = m.world_size;
  for (int r = 0; r < m.world_size; ++r) w.members.push_back(r);
  w.ready = true;
  if (m.world_size > 1) {
    // Our own duplicate, so that our collectives never match a library's or a test's.
    m.check(MPI_Comm_dup(MPI_COMM_WORLD, &w.comm), "MPI_Comm_dup", Group::World);
    m.check(MPI_Comm_set_errhandler(w.comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
            Group::World);
  } else {
    // A world of one: every group is this rank alone, no set_layout needed.
    for (Group g : {Group::Tp, Group::Pcp, Group::Dcp}) m.groups[int(g)] = w;
  }
}

Comm::~Comm() = default;

bool Comm::uses_mpi() const { return impl_->mpi; }
bool Comm::allows_helper_thread() const { return impl_->serialized; }
bool Comm::spans_hosts(Group g) const { return impl_->group(g).spans_hosts; }
int Comm::rank(Group g) const { return impl_->group(g).rank; }
int Comm::size(Group g) const { return impl_->group(g).size; }
const std::vector<int>& Comm::members(Group g) const { return impl_->group(g).members; }

void Comm::set_layout(const ParallelLayout& layout) {
  Impl& m = *impl_;
  CPI_CHECK(layout.world_size() == m.world_size,
            "layout {} needs {} ranks but the MPI world has {} (start with mpirun -np {})",
            layout.describe(), layout.world_size(), m.world_size, layout.world_size());
  CPI_CHECK(layout.global_rank() == m.world_rank,
            "layout built for global rank {} but this process is world rank {}",
            layout.global_rank(), m.world_rank);
  const LayoutSpec& spec = layout.spec();
  // color selects the group, key orders it: group rank = position in the layout's list.
  struct Split { Group g; int color, key; std::vector<int> members; };
  const Split splits[] = {
      {Group::Tp, layout.pcp_rank(), layout.tp_rank(), layout.tp_group()},
      {Group::Pcp, layout.tp_rank(), layout.pcp_rank(), layout.pcp_group()},
      // DCP groups are blocks of dcp consecutive ranks (tp % dcp == 0: never across TP groups).
      {Group::Dcp, layout.global_rank() / spec.dcp, layout.dcp_rank(), layout.dcp_group()},
  };
  for (const Split& s : splits) {
    m.free_group(s.g);
    Impl::GroupComm& gc = m.groups[int(s.g)];
    gc.members = s.members;
    gc.size = int(s.members.size());
    gc.rank = s.key;
    // Every rank sees the same spec, so all of them skip (or make) the same splits.
    if (gc.size > 1) {
      const Impl::GroupComm& w = m.groups[int(Group::World)];
      m.check(MPI_Comm_split(w.comm, s.color, s.key, &gc.comm), "MPI_Comm_split", s.g);
      m.check(MPI_Comm_set_errhandler(gc.comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
              s.g);
      int rank = -1, size = -1;
      m.check(MPI_Comm_rank(gc.comm, &rank), "MPI_Comm_rank", s.g);
      m.check(MPI_Comm_size(gc.comm, &size), "MPI_Comm_size", s.g);
      // The communicator must hold exactly the layout's ranks, in its order.
      MPI_Group wg, sg;
      m.check(MPI_Comm_group(w.comm, &wg), "MPI_Comm_group", Group::World);
      m.check(MPI_Comm_group(gc.comm, &sg), "MPI_Comm_group", s.g);
      std::vector<int> local(size), global(size);
      for (int i = 0; i < size; ++i) local[i] = i;
      m.check(MPI_Group_translate_ranks(sg, size, local.data(), wg, global.data()),
              "MPI_Group_translate_ranks", s.g);
      MPI_Group_free(&sg);
      MPI_Group_free(&wg);
      CPI_ASSERT(rank == gc.rank && size == gc.size && global == gc.members);
      // The members that share memory with this rank (MPI's node, from the launcher's
      // host list); fewer than the group: the group crosses a network link.
      MPI_Comm node = MPI_COMM_NULL;
      m.check(MPI_Comm_split_type(gc.comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type", s.g);
      int node_size = 0;
      m.check(MPI_Comm_size(node, &node_size), "MPI_Comm_size", s.g);
      MPI_Comm_free(&node);
      gc.spans_hosts = node_size < gc.size;
    } else {
      gc.spans_hosts = false;
    }
    gc.ready = true;
  }
}

void Comm::all_reduce_sum(void* buf, size_t count, DType dtype, Group g) {
  Impl& m = *impl_;
  Impl::GroupComm& gc = m.group(g);
  const size_t n_ranks = size_t(gc.size);
  // Ring: a reduce-scatter and an all-gather, each receiving (n - 1) / n of the buffer
  // (bf16 travels as f32, see below).
  const size_t wire = dtype == DType::BF16 ? 4 : dtype_size(dtype);
  Timed t{this, g, count * dtype_size(dtype), 2 * (n_ranks - 1) * count * wire / n_ranks};
  if (gc.size == 1 || count == 0) return;
  const int n = as_int(count, "all_reduce_sum");
  switch (dtype) {
    case DType::F32:
      if (count * sizeof(float) >= kRingAllReduceBytes) {
        m.ring_all_reduce_f32(static_cast<float*>(buf), count, gc, g);
        return;
      }
      [[fallthrough]];
    case DType::F64:
    case DType::I32:
    case DType::I64:
      m.check(MPI_Allreduce(MPI_IN_PLACE, buf, n, mpi_type(dtype), MPI_SUM, gc.comm),
              "MPI_Allreduce", g);
      return;
    case DType::BF16: {
      // Sum in f32 and round once (a bf16 MPI_Op would round at every step of the tree).
      if (m.f32_send.size() < count) m.f32_send.resize(count);
      bf16* p = static_cast<bf16*>(buf);
      for (size_t i = 0; i < count; ++i) m.f32_send[i] = float(p[i]);
      m.check(MPI_Allreduce(MPI_IN_PLACE, m.f32_send.data(), n, MPI_FLOAT, MPI_SUM, gc.comm),
              "MPI_Allreduce", g);
      for (size_t i = 0; i < count; ++i) p[i] = bf16(m.f32_send[i]);
      return;
    }
    default:
      fail("Comm::all_reduce_sum: dtype {} is not supported (F32, BF16, F64, I32, I64)",
           dtype_name(dtype));
  }
}

void Comm::all_gather(const void* send, void* recv, size_t count, DType dtype, Group g) {
  Impl& m = *impl_;
  Impl::GroupComm& gc = m.group(g);
  const size_t esz = dtype_size(dtype);
  Timed t{this, g, count * esz * gc.size, count * esz * size_t(gc.size - 1)};
  char* own = static_cast<char*>(recv) + size_t(gc.rank) * count * esz;
  if (gc.size == 1) {
    if (count && send != own) std::memmove(own, send, count * esz);
    return;
  }
  const int n = as_int(count, "all_gather");
  const MPI_Datatype ty = mpi_type(dtype);
  const void* src = send == own ? MPI_IN_PLACE : send;
  m.check(MPI_Allgather(src, n, ty, recv, n, ty, gc.comm), "MPI_Allgather", g);
}

void Comm::all_gather_v(const void* send, size_t count, void* recv,
                        const std::vector<int>& counts, const std::vector<int>& displs,
                        DType dtype, Group g) {
  Impl& m = *impl_;
  Impl::GroupComm& gc = m.group(g);
  CPI_CHECK(int(counts.size()) == gc.size && int(displs.size()) == gc.size,
            "Comm::all_gather_v on group {}: {} counts and {} displacements for {} ranks",
            group_name(g), counts.size(), displs.size(), gc.size);
  CPI_CHECK(size_t(counts[gc.rank]) == count,
            "Comm::all_gather_v on group {}: rank {} sends {} elements but counts[{}] = {}",
            group_name(g), gc.rank, count, gc.rank, counts[gc.rank]);
  const size_t esz = dtype_size(dtype);
  size_t total = 0;
  for (int c : counts) total += size_t(c);
  Timed t{this, g, total * esz, (total - count) * esz};
  if (gc.size == 1) {
    char* dst = static_cast<char*>(recv) + size_t(displs[0]) * esz;
    if (count && dst != send) std::memmove(dst, send, count * esz);
    return;
  }
  const MPI_Datatype ty = mpi_type(dtype);
  m.check(MPI_Allgatherv(send, as_int(count, "all_gather_v"), ty, recv, counts.data(),
                         displs.data(), ty, gc.comm),
          "MPI_Allgatherv", g);
}

void Comm::reduce_scatter_sum(const void* send, void* recv, size_t count, DType dtype, Group g) {
  Impl& m = *impl_;
  Impl::GroupComm& gc = m.group(g);
  const size_t esz = dtype_size(dtype);
  const size_t total = count * size_t(gc.size);
  const size_t wire = dtype == DType::BF16 ? 4 : esz;  // bf16 travels as f32, see below
  Timed t{this, g, total * esz, count * wire * size_t(gc.size - 1)};
  if (gc.size == 1) {
    if (count && send != recv) std::memmove(recv, send, count * esz);
    return;
  }
  const int n = as_int(count, "reduce_scatter_sum");
  as_int(total, "reduce_scatter_sum");
  switch (dtype) {
    case DType::F32:
    case DType::F64:
    case DType::I32:
    case DType::I64:
      m.check(MPI_Reduce_scatter_block(send, recv, n, mpi_type(dtype), MPI_SUM, gc.comm),
              "MPI_Reduce_scatter_block", g);
      return;
    case DType::BF16: {
      if (m.f32_send.size() < total) m.f32_send.resize(total);
      if (m.f32_recv.size() < count) m.f32_recv.resize(count);
      const bf16* s = static_cast<const bf16*>(send);
      for (size_t i = 0; i < total; ++i) m.f32_send[i] = float(s[i]);
      m.check(MPI_Reduce_scatter_block(m.f32_send.data(), m.f32_recv.data(), n, MPI_FLOAT,
                                       MPI_SUM, gc.comm),
              "MPI_Reduce_scatter_block", g);
      bf16* r = static_cast<bf16*>(recv);
      for (size_t i = 0; i < count; ++i) r[i] = bf16(m.f32_recv[i]);
      return;
    }
    default:
      fail("Comm::reduce_scatter_sum: dtype {} is not supported (F32, BF16, F64, I32, I64)",
           dtype_name(dtype));
  }
}

void Comm::broadcast(void* buf, size_t bytes, int root, Group g) {
  Impl& m = *impl_;
  Impl::GroupComm& gc = m.group(g);
  Timed t{this, g, bytes, gc.rank == root ? 0 : bytes};
  if (gc.size == 1) {
    CPI_CHECK(root == 0, "Comm::broadcast on group {}: root {} is outside the group of size 1",
              group_name(g), root);
    return;
  }
  // MPI counts are int: send huge buffers in chunks (every rank computes the same chunks).
  char* p = static_cast<char*>(buf);
  size_t done = 0;
  do {
    const size_t n = std::min<size_t>(bytes - done, size_t(1) << 30);
    m.check(MPI_Bcast(p + done, int(n), MPI_BYTE, root, gc.comm), "MPI_Bcast", g);
    done += n;
  } while (done < bytes);
}

void Comm::broadcast_patient(void* buf, size_t bytes, int root, Group g, int spin_us) {
  Impl& m = *impl_;
  Impl::GroupComm& gc = m.group(g);
  Timed t{this, g, bytes, gc.rank == root ? 0 : bytes};
  if (gc.size == 1) {
    CPI_CHECK(root == 0, "Comm::broadcast_patient on group {}: root {} is outside the group of "
              "size 1", group_name(g), root);
    return;
  }
  CPI_CHECK(bytes <= size_t(INT_MAX), "Comm::broadcast_patient: {} bytes is over 2^31 - 1",
            bytes);
  MPI_Request req;
  m.check(MPI_Ibcast(buf, int(bytes), MPI_BYTE, root, gc.comm, &req), "MPI_Ibcast", g);
  if (gc.rank == root) {
    m.check(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait (broadcast)", g);
    return;
  }
  using Clock = std::chrono::steady_clock;
  const auto spin_until = Clock::now() + std::chrono::microseconds(spin_us);
  auto nap = std::chrono::microseconds(50);
  for (;;) {
    int done = 0;
    m.check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test (broadcast)", g);
    if (done) return;
    if (Clock::now() < spin_until) continue;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(1000));
  }
}

void Comm::all_to_all(const void* send, void* recv, size_t count, DType dtype, Group g) {
  Impl& m = *impl_;
  Impl::GroupComm& gc = m.group(g);
  const size_t esz = dtype_size(dtype);
  Timed t{this, g, count * esz * gc.size, count * esz * size_t(gc.size - 1)};
  if (gc.size == 1) {
    if (count && send != recv) std::memmove(recv, send, count * esz);
    return;
  }
  const int n = as_int(count, "all_to_all");
  const MPI_Datatype ty = mpi_type(dtype);
  m.check(MPI_Alltoall(send, n, ty, recv, n, ty, gc.comm), "MPI_Alltoall", g);
}

void Comm::all_to_all_v(const void* send, const std::vector<int>& send_counts,
                        const std::vector<int>& send_displs, void* recv,
                        const std::vector<int>& recv_counts, const std::vector<int>& recv_displs,
                        DType dtype, Group g) {
  Impl& m = *impl_;
  Impl::GroupComm& gc = m.group(g);
  const size_t ranks = size_t(gc.size);
  CPI_CHECK(send_counts.size() == ranks && send_displs.size() == ranks &&
                recv_counts.size() == ranks && recv_displs.size() == ranks,
            "Comm::all_to_all_v on group {}: count/displacement lists of sizes {}, {}, {}, {} "
            "for {} ranks",
            group_name(g), send_counts.size(), send_displs.size(), recv_counts.size(),
            recv_displs.size(), ranks);
  const size_t esz = dtype_size(dtype);
  size_t sent = 0, received = 0;
  for (size_t r = 0; r < ranks; ++r) {
    sent += size_t(send_counts[r]);
    received += size_t(recv_counts[r]);
  }
  Timed t{this, g, std::max(sent, received) * esz,
          (received - size_t(recv_counts[size_t(gc.rank)])) * esz};
  if (gc.size == 1) {
    CPI_CHECK(send_counts[0] == recv_counts[0],
              "Comm::all_to_all_v on group {}: sends {} elements to itself but receives {}",
              group_name(g), send_counts[0], recv_counts[0]);
    const char* s = static_cast<const char*>(send) + size_t(send_displs[0]) * esz;
    char* r = static_cast<char*>(recv) + size_t(recv_displs[0]) * esz;
    if (send_counts[0] && s != r) std::memmove(r, s, size_t(send_counts[0]) * esz);
    return;
  }
  const MPI_Datatype ty = mpi_type(dtype);
  m.check(MPI_Alltoallv(send, send_counts.data(), send_displs.data(), ty, recv,
                        recv_counts.data(), recv_displs.data(), ty, gc.comm),
          "MPI_Alltoallv", g);
}

void Comm::barrier(Group g) {
  Impl& m = *impl_;
  Impl::GroupComm& gc = m.group(g);
  Timed t{this, g, 0, 0};
  if (gc.size == 1) return;
  m.check(MPI_Barrier(gc.comm), "MPI_Barrier", g);
}

void Comm::abort_job(const std::string& message, int code) {
  abort_job_raw(fmt::format("cpinfer: rank {}: {}", impl_->world_rank, message), code);
}

void Comm::abort_job_raw(const std::string& line, int code) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  if (mpi_active()) MPI_Abort(MPI_COMM_WORLD, code == 0 ? 1 : code);
  std::_Exit(code == 0 ? 1 : code);
}

}  // namespace cpinfer
