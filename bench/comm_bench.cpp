// Collective latency through Comm (the engine's own path, stats included), run under mpiexec:
//
//   mpiexec -np 4 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
//       build/bench/comm_bench --hidden 512,896 --tokens 1,16,512,2048
//   mpiexec ... comm_bench --bytes 1048576 --ops all_gather
//
// Message sizes: tokens x hidden x 4 bytes (an f32 hidden state), or --bytes. all_reduce
// sums a buffer of that size (the TP all-reduce after o_proj / down_proj); all_gather takes
// that many bytes from every rank (so the result is ranks times larger, the PCP gather).
// Each repetition: barrier, `iters` back-to-back calls, time per call = the slowest rank's
// mean. Rank 0 prints the median and the 10th/90th percentiles over repetitions, in
// microseconds, as a markdown table. Plain main (no Google Benchmark: every rank must run
// the same number of iterations).
//
// --ops idle measures what waiting ranks cost the working ones: rank 0 runs a fixed
// single-thread loop while the other ranks either sleep or wait in MPI_Barrier. With more
// ranks than cores, a ratio near 1 means waiting ranks yield their core (mpi_yield_when_idle).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "dist/comm.h"

namespace {

using namespace cpinfer;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A fixed amount of single-thread work (about 0.1-0.3 s).
double spin_work() {
  volatile double x = 0;
  for (long i = 0; i < 60'000'000L; ++i) x = x + double(i) * 1e-9;
  return x;
}

// Rank 0 works while the others sleep (for 1.3x its last solo time, broadcast), then while
// they wait in a barrier; best of 3 each.
void idle_cost(Comm& comm) {
  double solo = 1.0, sleeping = 1e9, waiting = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    comm.barrier(Group::World);
    double t0 = now();
    if (comm.rank() == 0) spin_work();
    else std::this_thread::sleep_for(std::chrono::duration<double>(1.3 * solo));
    if (comm.rank() == 0) solo = now() - t0;
    sleeping = std::min(sleeping, solo);
    comm.broadcast(&solo, sizeof(solo), 0, Group::World);
    comm.barrier(Group::World);
    t0 = now();
    if (comm.rank() == 0) spin_work();
    comm.barrier(Group::World);
    waiting = std::min(waiting, now() - t0);
  }
  if (comm.rank() == 0) {
    std::printf("idle cost, %d ranks on %d CPUs: rank 0 works %.0f ms while the others sleep, "
                "%.0f ms while they wait in MPI_Barrier (x%.2f)\n",
                comm.size(), int(std::thread::hardware_concurrency()), sleeping * 1e3,
                waiting * 1e3, waiting / sleeping);
  }
}

struct Case {
  std::string label;
  size_t bytes;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"comm_bench: Comm collective latency (run under mpiexec)"};
  std::vector<int> hidden = {512, 896}, tokens = {1, 16, 512, 2048};
  std::vector<size_t> bytes_list;
  std::vector<std::string> ops = {"all_reduce", "all_gather"};
  std::string dtype_name = "f32";
  int reps = 15;
  double target_s = 0.02;
  app.add_option("--hidden", hidden, "hidden sizes (message = tokens x hidden x 4 bytes)")
      ->delimiter(',');
  app.add_option("--tokens", tokens, "token counts")->delimiter(',');
  app.add_option("--bytes", bytes_list, "explicit message sizes in bytes (replace the grid)")
      ->delimiter(',');
  app.add_option("--ops", ops, "all_reduce, all_gather, reduce_scatter, broadcast; or idle")
      ->delimiter(',')
      ->check(CLI::IsMember({"all_reduce", "all_gather", "reduce_scatter", "broadcast", "idle"}));
  app.add_option("--dtype", dtype_name, "f32 or bf16 (bf16 halves the bytes moved)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--reps", reps, "repetitions (median reported)");
  app.add_option("--target-seconds", target_s, "approximate time per repetition");
  CLI11_PARSE(app, argc, argv);

  Comm& comm = Comm::world();
  const int n = comm.size(), rank = comm.rank();
  const DType dtype = dtype_name == "bf16" ? DType::BF16 : DType::F32;
  const size_t esz = dtype_size(dtype);

  if (ops == std::vector<std::string>{"idle"}) {
    idle_cost(comm);
    return 0;
  }
  std::vector<Case> cases;
  if (!bytes_list.empty()) {
    for (size_t b : bytes_list) cases.push_back({std::to_string(b) + " B", b});
  } else {
    for (int h : hidden)
      for (int t : tokens)
        cases.push_back({std::to_string(t) + " x " + std::to_string(h), size_t(t) * h * 4});
  }
  if (rank == 0) {
    std::printf("comm_bench: %d ranks, dtype %s, median [p10, p90] us per call (slowest rank)\n",
                n, dtype_name.c_str());
    std::printf("| op | ranks | tokens x hidden | bytes/rank | median us | p10 | p90 | GB/s |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
  }
  try {
    for (const std::string& op : ops) {
      for (const Case& c : cases) {
        const size_t count = c.bytes / 4;  // elements of f32 (or as many bf16 elements)
        std::vector<uint8_t> send(count * esz * n + 64, 1), recv(count * esz * n + 64, 0);
        // Zero-filled bf16/f32 sums stay finite.
        auto once = [&] {
          if (op == "all_reduce") comm.all_reduce_sum(send.data(), count, dtype, Group::World);
          else if (op == "all_gather")
            comm.all_gather(send.data(), recv.data(), count, dtype, Group::World);
          else if (op == "reduce_scatter")
            comm.reduce_scatter_sum(send.data(), recv.data(), count / n, dtype, Group::World);
          else if (op == "broadcast") comm.broadcast(send.data(), count * esz, 0, Group::World);
          else fail("unknown op '{}'", op);
        };
        std::fill(send.begin(), send.end(), 0);
        // Calibrate iterations on rank 0's timing, shared so that all ranks agree.
        once();
        comm.barrier(Group::World);
        double t0 = now();
        once();
        int32_t iters = int32_t(std::clamp(target_s / std::max(now() - t0, 1e-7), 3.0, 2000.0));
        comm.broadcast(&iters, sizeof(iters), 0, Group::World);
        std::vector<double> per_call;
        for (int r = 0; r < reps; ++r) {
          comm.barrier(Group::World);
          t0 = now();
          for (int i = 0; i < iters; ++i) once();
          double mine = (now() - t0) / iters;
          std::vector<double> all(n);
          comm.all_gather(&mine, all.data(), 1, DType::F64, Group::World);
          per_call.push_back(*std::max_element(all.begin(), all.end()));
        }
        std::sort(per_call.begin(), per_call.end());
        const double med = per_call[per_call.size() / 2];
        const double p10 = per_call[per_call.size() / 10];
        const double p90 = per_call[per_call.size() * 9 / 10];
        const double moved = double(count * esz) * (op == "all_gather" ? n : 1);
        if (rank == 0) {
          std::printf("| %s | %d | %s | %zu | %.1f | %.1f | %.1f | %.2f |\n", op.c_str(), n,
                      c.label.c_str(), count * esz, med * 1e6, p10 * 1e6, p90 * 1e6,
                      moved / med / 1e9);
          std::fflush(stdout);
        }
      }
    }
  } catch (const Error& e) {
    comm.abort_job(e.what());
  }
  return 0;
}
