// The launcher: flag parsing and the mpirun command (gtest, run without mpiexec), and a
// driver for tests/cli/mpi_launcher_test.sh that runs a body through run_distributed:
//
//   launcher_test                         gtest cases (no MPI)
//   launcher_test --mode run -tp T -pcp P [--threads-per-rank N] [--fail-rank R]
//                 [--fail-how throw|return] [--expect-threads N]
//
// In run mode every rank checks the world and its groups, all-reduces, and prints
// "rank R of W ok threads N"; the failing rank throws (or returns 3) while the others wait in
// a barrier that would never complete: the job must still end, with the failure named.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "dist/comm.h"
#include "dist/launcher.h"
#include "dist/parallel_layout.h"

namespace cpinfer {
namespace {

TEST(Launcher, NormalizeRewritesShortLayoutFlags) {
  const std::vector<std::string> in = {"cpinfer", "generate", "-tp", "4", "-pcp=2", "-dcp",
                                       "2", "-t", "-tpx", "--", "-tp"};
  const std::vector<std::string> want = {"cpinfer", "generate",
                                         "--tensor-parallel-size", "4",
                                         "--prefill-context-parallel-size=2",
                                         "--decode-context-parallel-size", "2", "-t", "-tpx",
                                         "--", "-tp"};
  EXPECT_EQ(normalize_layout_flags(in), want);
  // argv[0] is never rewritten.
  EXPECT_EQ(normalize_layout_flags({"-tp"}), std::vector<std::string>{"-tp"});
}

TEST(Launcher, LayoutFlagsParseWithVllmNames) {
  CLI::App app;
  LayoutSpec spec;
  int threads = 0;
  add_layout_flags(&app, &spec, &threads);
  std::vector<std::string> args = normalize_layout_flags(
      {"prog", "-tp", "4", "-pcp=2", "-dcp", "2", "--dcp-kv-cache-interleave-size", "8",
       "--block-size", "32", "--threads-per-rank", "3"});
  std::vector<char*> ptrs;
  for (std::string& a : args) ptrs.push_back(a.data());
  app.parse(int(ptrs.size()), ptrs.data());
  EXPECT_EQ(spec.tp, 4);
  EXPECT_EQ(spec.pcp, 2);
  EXPECT_EQ(spec.dcp, 2);
  EXPECT_EQ(spec.interleave, 8);
  EXPECT_EQ(spec.page_size, 32);
  EXPECT_EQ(threads, 3);

  CLI::App app2;
  LayoutSpec spec2;
  add_layout_flags(&app2, &spec2, &threads);
  std::vector<std::string> args2 = {"prog", "--tensor-parallel-size", "2",
                                    "--prefill-context-parallel-size", "4",
                                    "--decode-context-parallel-size", "2",
                                    "--cp-kv-cache-interleave-size", "16"};
  ptrs.clear();
  for (std::string& a : args2) ptrs.push_back(a.data());
  app2.parse(int(ptrs.size()), ptrs.data());
  EXPECT_EQ(spec2.tp, 2);
  EXPECT_EQ(spec2.pcp, 4);
  EXPECT_EQ(spec2.dcp, 2);
  EXPECT_EQ(spec2.interleave, 16);
  EXPECT_EQ(spec2.page_size, 16);  // default
}

TEST(Launcher, MpirunCommand) {
  // The transports are the launcher's choice only without the user's OMPI_MCA_btl.
  const char* user_btl = std::getenv("OMPI_MCA_btl");
  const std::string saved_btl = user_btl ? user_btl : "";
  ::unsetenv("OMPI_MCA_btl");
  const int cpus = available_cpus();
  const int n = cpus + 2;  // always oversubscribed
  auto cmd = mpirun_command("/usr/bin/mpirun", "/x/cpinfer", {"cpinfer", "generate", "-tp", "2"},
                            n, 0);
  auto has = [&](const std::vector<std::string>& seq) {
    return std::search(cmd.begin(), cmd.end(), seq.begin(), seq.end()) != cmd.end();
  };
  EXPECT_EQ(cmd.front(), "/usr/bin/mpirun");
  EXPECT_TRUE(has({"-np", std::to_string(n)}));
  EXPECT_TRUE(has({"--bind-to", "none"}));
  EXPECT_TRUE(has({"--oversubscribe"}));
  EXPECT_TRUE(has({"--mca", "mpi_yield_when_idle", "1"}));
  // One host: shared memory only (no TCP transport listening on every interface) ...
  EXPECT_TRUE(has({"--mca", "btl", "self,vader"}));
  EXPECT_TRUE(has({"-x", "CPINFER_THREADS_PER_RANK=1"}));
  EXPECT_TRUE(has({"/x/cpinfer", "generate", "-tp", "2"}));
  EXPECT_EQ(cmd.back(), "2");
  // One rank per CPU: not oversubscribed, threads = cpus / ranks, waiting ranks spin.
  cmd = mpirun_command("mpirun", "/x/cpinfer", {"cpinfer"}, 1, 0);
  EXPECT_FALSE(has({"--oversubscribe"}));
  EXPECT_FALSE(has({"mpi_yield_when_idle"}));
  EXPECT_TRUE(has({"-x", fmt::format("CPINFER_THREADS_PER_RANK={}", cpus)}));
  cmd = mpirun_command("mpirun", "/x/cpinfer", {"cpinfer"}, 1, 7);
  EXPECT_TRUE(has({"-x", "CPINFER_THREADS_PER_RANK=7"}));
  // More threads than CPUs in all (ranks x threads per rank): waiting ranks yield.
  EXPECT_EQ(has({"--mca", "mpi_yield_when_idle", "1"}), 7 > cpus);
  cmd = mpirun_command("mpirun", "/x/cpinfer", {"cpinfer"}, 1, cpus + 1);
  EXPECT_TRUE(has({"--mca", "mpi_yield_when_idle", "1"}));
  // ... unless the user chose the transports.
  ::setenv("OMPI_MCA_btl", "tcp,self", 1);
  cmd = mpirun_command("mpirun", "/x/cpinfer", {"cpinfer"}, 2, 1);
  EXPECT_FALSE(has({"--mca", "btl", "self,vader"}));
  if (user_btl) ::setenv("OMPI_MCA_btl", saved_btl.c_str(), 1);
  else ::unsetenv("OMPI_MCA_btl");
}

TEST(Launcher, ThreadsPerRank) {
  EXPECT_EQ(resolve_threads_per_rank(5), 5);
  ::setenv(kThreadsPerRankEnv, "3", 1);
  EXPECT_EQ(resolve_threads_per_rank(0), 3);
  EXPECT_EQ(resolve_threads_per_rank(2), 2);
  ::setenv(kThreadsPerRankEnv, "junk", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1000000", 1);
  EXPECT_EQ(resolve_threads_per_rank(0), 1);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  ::unsetenv(kThreadsPerRankEnv);
  EXPECT_EQ(resolve_threads_per_rank(0), available_cpus());
}

TEST(Launcher, LaunchedByMpiFollowsTheEnvironment) {
  const bool before = launched_by_mpi();
  EXPECT_EQ(before, std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr ||
                        std::getenv("PMIX_RANK") != nullptr ||
                        std::getenv("PMI_RANK") != nullptr || std::getenv("PMI_SIZE") != nullptr);
  if (before) return;
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  EXPECT_TRUE(launched_by_mpi());
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_FALSE(launched_by_mpi());
}

TEST(Launcher, RunDistributedWorldOfOneRunsInProcess) {
  if (launched_by_mpi()) GTEST_SKIP() << "run without mpiexec";
  int calls = 0;
  EXPECT_EQ(run_distributed({"prog"}, LayoutSpec{}, 0, [&] { return ++calls + 6; }), 7);
  EXPECT_EQ(calls, 1);
  LayoutSpec bad;
  bad.pcp = 0;
  EXPECT_THROW(run_distributed({"prog"}, bad, 0, [] { return 0; }), Error);
}

// ---- run mode ----------------------------------------------------------------------------

int run_mode(int argc, char** argv) {
  std::vector<std::string> args = normalize_layout_flags({argv, argv + argc});
  CLI::App app{"launcher_test run mode"};
  LayoutSpec spec;
  int threads = 0, fail_rank = -1, expect_threads = 0;
  std::string mode, fail_how = "throw";
  app.add_option("--mode", mode);
  app.add_option("--fail-rank", fail_rank);
  app.add_option("--fail-how", fail_how);
  app.add_option("--expect-threads", expect_threads);
  add_layout_flags(&app, &spec, &threads);
  std::vector<char*> ptrs;
  for (std::string& a : args) ptrs.push_back(a.data());
  try {
    app.parse(int(ptrs.size()), ptrs.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run_distributed({argv, argv + argc}, spec, threads, [&]() -> int {
      Comm& c = Comm::world();
      const int world = c.size(), rank = c.rank();
      CPI_CHECK(world == spec.tp * spec.pcp, "world {} != tp * pcp", world);
      c.set_layout(ParallelLayout(spec, 16, 1, rank));
      int64_t sum = rank;
      c.all_reduce_sum(&sum, 1, DType::I64, Group::World);
      CPI_CHECK(sum == int64_t(world) * (world - 1) / 2, "all-reduce gave {}", sum);
      if (rank == fail_rank) {
        if (fail_how == "return") return 3;
        fail("injected failure on purpose");
      }
      if (fail_rank >= 0) c.barrier(Group::World);  // never completes: the failing rank is gone
      const int pool = global_pool().size();
      std::printf("rank %d of %d ok threads %d mpi %d\n", rank, world, pool, int(c.uses_mpi()));
      std::fflush(stdout);
      if (expect_threads > 0 && pool != expect_threads) {
        std::fprintf(stderr, "rank %d: %d threads, expected %d\n", rank, pool, expect_threads);
        return 4;
      }
      return 0;
    });
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}

}  // namespace
}  // namespace cpinfer

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--mode") return cpinfer::run_mode(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
