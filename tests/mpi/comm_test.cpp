// Comm under a real mpiexec: every collective on every group (world, tp, pcp, dcp) with
// F32 / BF16 / I32 / I64, checked against values computed locally from known per-rank data;
// group membership equals ParallelLayout's lists; MPI errors become Errors naming the group.
//
// Usage: mpiexec -np N comm_test [--tp T] [--pcp P] [--dcp D] [--hq Q] [--hkv K]
// (default tp = N, 16 q heads, 1 KV head). All ranks run the same tests in the same order;
// rank 0 prints the gtest report, other ranks print only their failures, and the exit code
// is the same on every rank (non-zero if any rank failed).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "dist/comm.h"
#include "dist/parallel_layout.h"

namespace cpinfer {
namespace {

LayoutSpec g_spec;
int64_t g_hq = 16, g_hkv = 1;

const Group kGroups[] = {Group::World, Group::Tp, Group::Pcp, Group::Dcp};

// Known data: element i of rank g. Exact in every type, and so are sums over <= 8 ranks.
template <typename T> struct Data;
template <> struct Data<float> {
  static constexpr DType dtype = DType::F32;
  static float make(int g, size_t i) { return float(g + 1) * 0.25f + float(i % 7); }
  static float from(double v) { return float(v); }
  static double to(float v) { return v; }
};
template <> struct Data<bf16> {
  static constexpr DType dtype = DType::BF16;
  static bf16 make(int g, size_t i) { return bf16(float(g + 1 + int(i % 5))); }
  static bf16 from(double v) { return bf16(float(v)); }
  static double to(bf16 v) { return float(v); }
};
template <> struct Data<int32_t> {
  static constexpr DType dtype = DType::I32;
  static int32_t make(int g, size_t i) { return (g + 1) * 100000 + int32_t(i % 1000) - 500; }
  static int32_t from(double v) { return int32_t(v); }
  static double to(int32_t v) { return v; }
};
template <> struct Data<int64_t> {
  static constexpr DType dtype = DType::I64;
  // Beyond 32 bits, so a 32-bit reduction would be caught.
  static int64_t make(int g, size_t i) { return (int64_t(g + 1) << 33) + int64_t(i); }
  static int64_t from(double v) { return int64_t(v); }
  static double to(int64_t v) { return double(v); }
};

template <typename T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <typename T>
std::string show(const T& v) {
  return fmt::format("{}", Data<T>::to(v));
}

Comm& comm() { return Comm::world(); }
int me() { return comm().rank(Group::World); }

template <typename T>
void check_all_reduce(Group g, size_t count) {
  SCOPED_TRACE(fmt::format("group {} count {}", group_name(g), count));
  std::vector<T> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = Data<T>::make(me(), i);
  comm().all_reduce_sum(buf.data(), count, Data<T>::dtype, g);
  int bad = 0;
  for (size_t i = 0; i < count && bad < 5; ++i) {
    double sum = 0;
    for (int m : comm().members(g)) sum += Data<T>::to(Data<T>::make(m, i));
    const T want = Data<T>::from(sum);
    if (!same_bits(buf[i], want)) {
      ADD_FAILURE() << "element " << i << ": " << show(buf[i]) << " != " << show(want);
      ++bad;
    }
  }
}

template <typename T>
void check_all_gather(Group g, size_t count, bool in_place) {
  SCOPED_TRACE(fmt::format("group {} count {} in_place {}", group_name(g), count, in_place));
  const int n = comm().size(g), r = comm().rank(g);
  std::vector<T> send(count), recv(count * n);
  for (size_t i = 0; i < count; ++i) send[i] = Data<T>::make(me(), i);
  if (in_place) {
    std::copy(send.begin(), send.end(), recv.begin() + ptrdiff_t(r * count));
    comm().all_gather(recv.data() + r * count, recv.data(), count, Data<T>::dtype, g);
  } else {
    comm().all_gather(send.data(), recv.data(), count, Data<T>::dtype, g);
  }
  const std::vector<int>& members = comm().members(g);
  for (int s = 0; s < n; ++s)
    for (size_t i = 0; i < count; ++i)
      ASSERT_TRUE(same_bits(recv[s * count + i], Data<T>::make(members[s], i)))
          << "chunk " << s << " element " << i;
}

template <typename T>
void check_all_gather_v(Group g) {
  SCOPED_TRACE(fmt::format("group {}", group_name(g)));
  const int n = comm().size(g), r = comm().rank(g);
  // Rank s sends (3 s + 2) % 5 elements (rank 1 sends 0) to displacement sum + s (gaps).
  std::vector<int> counts(n), displs(n);
  int total = 0;
  for (int s = 0; s < n; ++s) {
    counts[s] = (3 * s + 2) % 5 * 37;
    displs[s] = total + s;
    total += counts[s] + s;
  }
  std::vector<T> send(counts[r]);
  for (size_t i = 0; i < send.size(); ++i) send[i] = Data<T>::make(me(), i);
  const T sentinel = Data<T>::from(-1);
  std::vector<T> recv(size_t(total) + 1, sentinel);
  comm().all_gather_v(send.data(), send.size(), recv.data(), counts, displs, Data<T>::dtype, g);
  const std::vector<int>& members = comm().members(g);
  for (int s = 0; s < n; ++s) {
    for (int i = 0; i < counts[s]; ++i)
      ASSERT_TRUE(same_bits(recv[displs[s] + i], Data<T>::make(members[s], size_t(i))))
          << "from rank " << s << " element " << i;
    if (s > 0) ASSERT_TRUE(same_bits(recv[displs[s] - 1], sentinel)) << "gap before " << s;
  }
}

template <typename T>
void check_reduce_scatter(Group g, size_t count) {
  SCOPED_TRACE(fmt::format("group {} count {}", group_name(g), count));
  const int n = comm().size(g), r = comm().rank(g);
  std::vector<T> send(count * n), recv(count);
  for (size_t i = 0; i < send.size(); ++i) send[i] = Data<T>::make(me(), i);
  comm().reduce_scatter_sum(send.data(), recv.data(), count, Data<T>::dtype, g);
  for (size_t j = 0; j < count; ++j) {
    double sum = 0;
    for (int m : comm().members(g)) sum += Data<T>::to(Data<T>::make(m, r * count + j));
    ASSERT_TRUE(same_bits(recv[j], Data<T>::from(sum)))
        << "element " << j << ": " << show(recv[j]) << " != " << show(Data<T>::from(sum));
  }
}

template <typename T>
void check_all_to_all(Group g, size_t count) {
  SCOPED_TRACE(fmt::format("group {} count {}", group_name(g), count));
  const int n = comm().size(g), r = comm().rank(g);
  // Chunk for destination d, element j: make(me, d * count + j).
  std::vector<T> send(count * n), recv(count * n);
  for (size_t i = 0; i < send.size(); ++i) send[i] = Data<T>::make(me(), i);
  comm().all_to_all(send.data(), recv.data(), count, Data<T>::dtype, g);
  const std::vector<int>& members = comm().members(g);
  for (int s = 0; s < n; ++s)
    for (size_t j = 0; j < count; ++j)
      ASSERT_TRUE(same_bits(recv[s * count + j], Data<T>::make(members[s], r * count + j)))
          << "from rank " << s << " element " << j;
}

template <typename T>
void check_all_to_all_v(Group g) {
  SCOPED_TRACE(fmt::format("group {}", group_name(g)));
  const int n = comm().size(g), r = comm().rank(g);
  // Rank s sends (s + d) % 3 * 11 elements to d (zero for some pairs), packed in order;
  // element j of that message is make(s, 1000 * d + j).
  auto cnt = [](int s, int d) { return (s + d) % 3 * 11; };
  std::vector<int> sc(n), sd(n), rc(n), rd(n);
  int st = 0, rt = 0;
  for (int d = 0; d < n; ++d) {
    sc[d] = cnt(r, d), sd[d] = st, st += sc[d];
    rc[d] = cnt(d, r), rd[d] = rt, rt += rc[d];
  }
  std::vector<T> send(st), recv(rt);
  for (int d = 0; d < n; ++d)
    for (int j = 0; j < sc[d]; ++j) send[sd[d] + j] = Data<T>::make(me(), 1000 * d + j);
  comm().all_to_all_v(send.data(), sc, sd, recv.data(), rc, rd, Data<T>::dtype, g);
  const std::vector<int>& members = comm().members(g);
  for (int s = 0; s < n; ++s)
    for (int j = 0; j < rc[s]; ++j)
      ASSERT_TRUE(same_bits(recv[rd[s] + j], Data<T>::make(members[s], 1000 * r + j)))
          << "from rank " << s << " element " << j;
}

TEST(Comm, GroupsMatchTheLayout) {
  ParallelLayout layout(g_spec, g_hq, g_hkv, me());
  EXPECT_EQ(comm().size(), layout.world_size());
  EXPECT_EQ(comm().members(Group::Tp), layout.tp_group());
  EXPECT_EQ(comm().members(Group::Pcp), layout.pcp_group());
  EXPECT_EQ(comm().members(Group::Dcp), layout.dcp_group());
  EXPECT_EQ(comm().rank(Group::Tp), layout.tp_rank());
  EXPECT_EQ(comm().rank(Group::Pcp), layout.pcp_rank());
  EXPECT_EQ(comm().rank(Group::Dcp), layout.dcp_rank());
  EXPECT_EQ(comm().size(Group::Tp), g_spec.tp);
  EXPECT_EQ(comm().size(Group::Pcp), g_spec.pcp);
  EXPECT_EQ(comm().size(Group::Dcp), g_spec.dcp);
  // Membership as MPI sees it: every rank gathers its world rank over each group.
  for (Group g : kGroups) {
    int32_t mine = me();
    std::vector<int32_t> got(comm().size(g));
    comm().all_gather(&mine, got.data(), 1, DType::I32, g);
    EXPECT_EQ(std::vector<int>(got.begin(), got.end()), comm().members(g)) << group_name(g);
  }
}

TEST(Comm, AllReduceSum) {
  for (Group g : kGroups) {
    for (size_t count : {size_t(1), size_t(1000), size_t(70001)}) {
      check_all_reduce<float>(g, count);
      check_all_reduce<bf16>(g, count);
      check_all_reduce<int32_t>(g, count);
      check_all_reduce<int64_t>(g, count);
    }
    // f32 past 1 MiB runs the ring on Comm's own buffers (odd count: uneven chunks).
    check_all_reduce<float>(g, 300007);
  }
}

TEST(Comm, AllReduceGivesBitwiseIdenticalResultsOnEveryRank) {
  // Rounding depends on the summation order; every member must still get the same bits,
  // or TP replicas of the hidden state would drift apart.
  std::mt19937 rng(1234 + me());
  std::normal_distribution<float> dist;
  for (Group g : kGroups) {
    for (size_t count : {size_t(17), size_t(4096), size_t(300000)}) {
      std::vector<float> x(count);
      for (float& v : x) v = dist(rng) * 100.0f;
      comm().all_reduce_sum(x.data(), count, DType::F32, g);
      std::vector<float> all(count * comm().size(g));
      comm().all_gather(x.data(), all.data(), count, DType::F32, g);
      for (int s = 0; s < comm().size(g); ++s)
        ASSERT_EQ(std::memcmp(all.data() + s * count, x.data(), count * 4), 0)
            << group_name(g) << " count " << count << ": rank " << s << " differs";
    }
  }
}

TEST(Comm, AllGather) {
  for (Group g : kGroups) {
    for (size_t count : {size_t(1), size_t(513), size_t(40000)}) {
      for (bool in_place : {false, true}) {
        check_all_gather<float>(g, count, in_place);
        check_all_gather<bf16>(g, count, in_place);
        check_all_gather<int32_t>(g, count, in_place);
        check_all_gather<int64_t>(g, count, in_place);
      }
    }
  }
}

TEST(Comm, AllGatherV) {
  for (Group g : kGroups) {
    check_all_gather_v<float>(g);
    check_all_gather_v<bf16>(g);
    check_all_gather_v<int32_t>(g);
    check_all_gather_v<int64_t>(g);
  }
}

TEST(Comm, ReduceScatterSum) {
  for (Group g : kGroups) {
    for (size_t count : {size_t(1), size_t(129), size_t(20000)}) {
      check_reduce_scatter<float>(g, count);
      check_reduce_scatter<bf16>(g, count);
      check_reduce_scatter<int32_t>(g, count);
      check_reduce_scatter<int64_t>(g, count);
    }
  }
}

TEST(Comm, Broadcast) {
  for (Group g : kGroups) {
    for (int root = 0; root < comm().size(g); ++root) {
      for (size_t bytes : {size_t(0), size_t(7), size_t(3 << 20)}) {
        std::vector<uint8_t> buf(bytes);
        const int src = comm().members(g)[root];
        auto byte = [&](size_t i) { return uint8_t((i * 131 + size_t(src) * 7) & 0xff); };
        for (size_t i = 0; i < bytes; ++i) buf[i] = root == comm().rank(g) ? byte(i) : 0;
        comm().broadcast(buf.data(), bytes, root, g);
        for (size_t i = 0; i < bytes; ++i)
          ASSERT_EQ(buf[i], byte(i)) << group_name(g) << " root " << root << " byte " << i;
      }
    }
  }
}

// The patient broadcast delivers what broadcast() does, on every group and root, and a rank
// that waits long for it sleeps instead of polling: the root holds back 300 ms, and each
// waiting rank's own CPU time over the wait (this thread's, getrusage RUSAGE_THREAD) stays
// under a third of it. A waiting rank that polls without pause (plain MPI_Bcast, or a
// spin_us as long as the wait) uses all of the 300 ms it gets.
TEST(Comm, PatientBroadcastDeliversAndSleepsWhileWaiting) {
  for (Group g : kGroups) {
    for (int root = 0; root < comm().size(g); ++root) {
      for (size_t bytes : {size_t(0), size_t(8), size_t(100000)}) {
        std::vector<uint8_t> buf(bytes);
        const int src = comm().members(g)[root];
        auto byte = [&](size_t i) { return uint8_t((i * 37 + size_t(src) * 11 + 1) & 0xff); };
        for (size_t i = 0; i < bytes; ++i) buf[i] = root == comm().rank(g) ? byte(i) : 0;
        comm().broadcast_patient(buf.data(), bytes, root, g, 100);
        for (size_t i = 0; i < bytes; ++i)
          ASSERT_EQ(buf[i], byte(i)) << group_name(g) << " root " << root << " byte " << i;
      }
    }
  }
  if (comm().size() == 1) return;
  auto thread_cpu_s = [] {
    rusage u{};
    getrusage(RUSAGE_THREAD, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  comm().barrier(Group::World);
  int64_t value = comm().rank() == 0 ? 42 : 0;
  const double cpu0 = thread_cpu_s();
  const auto t0 = std::chrono::steady_clock::now();
  if (comm().rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  comm().broadcast_patient(&value, sizeof(value), 0, Group::World, 2000);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double used = thread_cpu_s() - cpu0;
  EXPECT_EQ(value, 42);
  if (comm().rank() != 0) {
    EXPECT_GE(waited, 0.25);
    EXPECT_LT(used, waited / 3) << "rank " << comm().rank() << " used " << used << " s of CPU in a "
                                << waited << " s wait";
  }
}

TEST(Comm, AllToAll) {
  for (Group g : kGroups) {
    for (size_t count : {size_t(1), size_t(1000)}) {
      check_all_to_all<float>(g, count);
      check_all_to_all<bf16>(g, count);
      check_all_to_all<int32_t>(g, count);
      check_all_to_all<int64_t>(g, count);
    }
  }
}

TEST(Comm, AllToAllV) {
  for (Group g : kGroups) {
    check_all_to_all_v<float>(g);
    check_all_to_all_v<bf16>(g);
    check_all_to_all_v<int32_t>(g);
    check_all_to_all_v<int64_t>(g);
  }
}

TEST(Comm, BarrierAndStats) {
  comm().reset_stats();
  for (Group g : kGroups) comm().barrier(g);
  float x[4] = {1, 2, 3, 4};
  comm().all_reduce_sum(x, 4, DType::F32, Group::Tp);
  EXPECT_EQ(comm().stats().calls, 5u);
  EXPECT_EQ(comm().stats().bytes, 16u);
  EXPECT_EQ(comm().stats(Group::Tp).calls, 2u);
  EXPECT_EQ(comm().stats(Group::Tp).bytes, 16u);
  EXPECT_EQ(comm().stats(Group::Pcp).calls, 1u);
  EXPECT_GE(comm().stats().seconds, 0.0);
}

TEST(Comm, MpiErrorBecomesErrorNamingTheGroup) {
  for (Group g : kGroups) {
    const int n = comm().size(g);
    char byte = 0;
    std::string msg;
    try {
      comm().broadcast(&byte, 1, n, g);  // root n is outside the group
    } catch (const Error& e) {
      msg = e.what();
    }
    if (n > 1) {
      // Raised by MPI (parameter check), reported with the call, group and rank.
      EXPECT_NE(msg.find(fmt::format("MPI_Bcast failed on group {} (rank {} of world {}): ",
                                     group_name(g), me(), comm().size())),
                std::string::npos)
          << msg;
    } else {
      EXPECT_NE(msg.find(fmt::format("root {} is outside the group of size 1", n)),
                std::string::npos)
          << msg;
    }
    EXPECT_NE(msg.find(std::string(group_name(g))), std::string::npos) << msg;
    comm().barrier(g);  // the communicator still works after the error
  }
}

TEST(Comm, BadArgumentsAreErrors) {
  uint16_t h[2] = {0, 0};
  try {
    comm().all_reduce_sum(h, 2, DType::F16, Group::World);
    if (comm().size() == 1) SUCCEED();  // a world of one does not look at the data
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dtype F16 is not supported"), std::string::npos);
  }
  std::vector<int> counts(comm().size(Group::Tp) + 1, 1), displs(counts.size(), 0);
  float x = 0, y[16];
  try {
    comm().all_gather_v(&x, 1, y, counts, displs, DType::F32, Group::Tp);
    ADD_FAILURE() << "no error for a wrong number of counts";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("counts and"), std::string::npos) << e.what();
  }
}

// Rank 0 keeps gtest's report; other ranks print only failures, prefixed with their rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_,
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }

 private:
  int rank_;
};

int parse_flag(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace
}  // namespace cpinfer

int main(int argc, char** argv) {
  using namespace cpinfer;
  ::testing::InitGoogleTest(&argc, argv);
  Comm& c = Comm::world();
  g_spec.tp = parse_flag(argc, argv, "--tp", c.size());
  g_spec.pcp = parse_flag(argc, argv, "--pcp", 1);
  g_spec.dcp = parse_flag(argc, argv, "--dcp", 1);
  g_hq = parse_flag(argc, argv, "--hq", 16);
  g_hkv = parse_flag(argc, argv, "--hkv", 1);
  try {
    c.set_layout(ParallelLayout(g_spec, g_hq, g_hkv, c.rank()));
  } catch (const Error& e) {
    c.abort_job(e.what(), 2);
  }
  if (c.rank() == 0) {
    std::printf("comm_test: world %d, tp %d pcp %d dcp %d\n", c.size(), g_spec.tp, g_spec.pcp,
                g_spec.dcp);
  } else {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(c.rank()));
  }
  int32_t failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  c.all_reduce_sum(&failed, 1, DType::I32, Group::World);  // same exit code on every rank
  return failed ? 1 : 0;
}
