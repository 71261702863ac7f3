// Starting a multi-rank job: relaunching this binary under mpirun, the layout flags, and
// running a command body on every rank so that a failure anywhere ends the whole job.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "dist/parallel_layout.h"

namespace CLI { class App; }

namespace cpinfer {

// Environment variable that carries the thread count of each rank into a relaunched job.
inline constexpr const char* kThreadsPerRankEnv = "CPINFER_THREADS_PER_RANK";

// True when this process was started by mpirun/mpiexec (OpenMPI, PMIx or MPICH's PMI).
bool launched_by_mpi();

// CPUs this process may run on (its affinity mask; at least 1).
int available_cpus();

// The mpirun command line relaunch_under_mpirun runs (without the environment it sets):
// mpirun -q -np N --bind-to none [--oversubscribe] [--mca mpi_yield_when_idle 1]
//        -x CPINFER_THREADS_PER_RANK=T <exe> <argv[1:]>.
// threads_per_rank <= 0 means max(1, available_cpus() / N).
std::vector<std::string> mpirun_command(const std::string& mpirun, const std::string& exe,
                                        const std::vector<std::string>& argv, int world_size,
                                        int threads_per_rank);

// Re-executes this binary (/proc/self/exe) with argv[1:] under `mpirun -np world_size` on this
// host and returns mpirun's exit status (128 + signal if it was killed). Throws Error when
// mpirun cannot be found (PATH, or $CPINFER_MPIRUN) or started. Adds the run-as-root
// permission when running as root.
int relaunch_under_mpirun(const std::vector<std::string>& argv, int world_size,
                          int threads_per_rank);

// Registers vLLM's flag names on `cmd`: --tensor-parallel-size/-tp,
// --prefill-context-parallel-size/-pcp, --decode-context-parallel-size/-dcp,
// --cp-kv-cache-interleave-size (alias --dcp-kv-cache-interleave-size), --block-size,
// --threads-per-rank. CLI11 2.1 accepts no multi-letter single-dash names: run argv through
// normalize_layout_flags first so that -tp/-pcp/-dcp reach it in their long forms.
void add_layout_flags(CLI::App* cmd, LayoutSpec* spec, int* threads_per_rank);

// Rewrites "-tp" / "-pcp" / "-dcp" (also "-tp=4") to their long forms; stops at "--".
// Usage in cli_main:
//   std::vector<std::string> args = normalize_layout_flags({argv, argv + argc});
//   std::vector<char*> ptrs; for (auto& a : args) ptrs.push_back(a.data());
//   app.parse(int(ptrs.size()), ptrs.data());
std::vector<std::string> normalize_layout_flags(const std::vector<std::string>& argv);

// The thread count for this rank: `requested` if > 0, else $CPINFER_THREADS_PER_RANK, else
// max(1, available_cpus() / ranks on this host).
int resolve_threads_per_rank(int requested);

// Runs a command across spec.tp * spec.pcp ranks:
// - not under MPI, world 1: sets the thread count if one was requested, returns body();
// - not under MPI, world > 1: relaunches argv under mpirun (see relaunch_under_mpirun) and
//   returns its exit status; body runs in the relaunched processes;
// - under MPI (mpirun started us, possibly the user's own): checks the world size equals
//   tp * pcp (rank 0 throws Error naming both, the others return 2), sets this rank's
//   threads, runs body() on every rank. If body throws on any rank, that rank prints
//   "cpinfer: rank N failed: <message>" and calls MPI_Abort, which ends every rank (no
//   hang in a collective that rank will never join). If body returns non-zero on a rank,
//   that rank ends the job the same way with that status, since ranks that returned 0 could
//   otherwise wait for it forever. Returns 0 when every rank's body returned 0.
// The body must call Comm::world().set_layout itself (it knows the model's head counts).
// `precheck` (optional) validates the command before any rank starts: it runs in the
// process the user started, before the relaunch, so that an impossible layout is one
// message and no mpirun; under the user's own mpirun it runs on every rank and only rank 0
// reports a failure (the others return 2).
int run_distributed(const std::vector<std::string>& argv, const LayoutSpec& spec,
                    int threads_per_rank, const std::function<int()>& body,
                    const std::function<void()>& precheck = {});

}  // namespace cpinfer
