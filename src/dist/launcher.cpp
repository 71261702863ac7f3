// Launching multi-rank jobs. `cpinfer generate -tp 2 -pcp 2` started from a shell re-executes
// itself under `mpirun -np 4` on this host; started by mpirun (ours or the user's, possibly
// across machines) it runs the command on every rank.
//
// The mpirun flags, and why (measured on a 2-core host, OpenMPI 4.1):
// - `--bind-to none`: OpenMPI binds each rank to one core (np <= 2) or one NUMA domain by
//   default, which would squeeze a rank's thread pool onto one core.
// - `--mca mpi_yield_when_idle 1` when the ranks' threads outnumber the CPUs (ranks x
//   threads per rank > CPUs): a rank waiting in a collective calls sched_yield while it
//   polls. Without it a waiting rank spins and steals its core from the ranks (and threads)
//   still computing: 4 ranks on 2 cores ran 2x slower. With a core per thread it is left
//   off: there a waiting rank's core is its own, and a stream of sched_yield calls slowed the
//   computing core next to it on a 2-core VM (a 4096-token prefill on one thread beside a
//   sched_yield loop: 9.04 s, beside a pause loop 5.68 s, alone 6.11 s; pcp 2 x 1 thread,
//   8192 tokens, three interleaved pairs: TTFT 7.28 / 9.28 / 9.05 s with it, 7.57 / 7.77 /
//   8.51 s without). (On a host busy with other jobs a
//   spinning rank can wait longer for a descheduled peer: 2 ranks on a busy 2-core host saw
//   8 ms per small all-gather instead of 10 us.)
// - `--oversubscribe` when ranks > CPUs (OpenMPI refuses otherwise).
// - `--mca btl self,vader`: the ranks share this host, so shared memory carries everything
//   and OpenMPI's TCP transport, which would listen on every interface in each rank, stays
//   off (unless the environment names its own OMPI_MCA_btl).
// - `-q`: MPI_Abort would print a 7-line banner after our own one-line error.
// - `btl_vader_single_copy_mechanism none` only when this process cannot use
//   process_vm_readv (seccomp in some containers): vader's default CMA copies then fail.
// - as root, OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1: mpirun refuses to run as root otherwise.
#include "dist/launcher.h"

#include <CLI/CLI.hpp>
#include <dirent.h>
#include <fmt/ranges.h>
#include <sched.h>
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "dist/comm.h"

namespace cpinfer {

namespace {

constexpr const char* kRelaunchedEnv = "CPINFER_RELAUNCHED";

bool has_env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

// A positive int from the environment, or 0 when unset or not a positive int.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (end != v && *end == '\0' && n > 0 && n <= 1 << 20) ? int(n) : 0;
}

bool is_executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

// $CPINFER_MPIRUN, else mpirun then mpiexec on PATH; "" when none is found.
std::string find_mpirun() {
  if (const char* forced = std::getenv("CPINFER_MPIRUN"); forced && *forced) {
    CPI_CHECK(is_executable(forced), "CPINFER_MPIRUN '{}' is not an executable file", forced);
    return forced;
  }
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (const char* name : {"mpirun", "mpiexec"}) {
    size_t begin = 0;
    while (begin <= dirs.size()) {
      size_t end = dirs.find(':', begin);
      if (end == std::string::npos) end = dirs.size();
      const std::string dir = end > begin ? dirs.substr(begin, end - begin) : ".";
      const std::string cand = dir + "/" + name;
      if (is_executable(cand)) return cand;
      begin = end + 1;
    }
  }
  return "";
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  CPI_CHECK(n > 0, "cannot relaunch under mpirun: readlink /proc/self/exe failed: {}",
            std::strerror(errno));
  return std::string(buf, size_t(n));
}

// Whether process_vm_readv (OpenMPI vader's CMA single copy) is allowed here. Seccomp
// filters refuse the call itself, so reading our own memory is a faithful probe.
bool cma_allowed() {
  int src = 42, dst = 0;
  iovec local{&dst, sizeof(dst)}, remote{&src, sizeof(src)};
  return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == ssize_t(sizeof(dst)) &&
         dst == 42;
}

// A SIGTERM or SIGHUP received while mpirun runs, not yet passed on (the wait loop does).
volatile sig_atomic_t g_stop_signal = 0;

void note_stop_signal(int sig) { g_stop_signal = sig; }

// The pid of rank 0 among mpirun's children (mpirun starts the ranks on its own host
// itself), told by OMPI_COMM_WORLD_RANK=0 in its environment; -1 when none is found.
pid_t find_rank0(pid_t mpirun) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return -1;
  pid_t found = -1;
  while (const dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    // /proc/PID/stat: "pid (comm) state ppid ...": the comm may hold spaces and ')', so the
    // parent is read after the last ')'.
    std::ifstream stat(fmt::format("/proc/{}/stat", pid));
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %ld", &state, &ppid) != 2 || ppid != mpirun)
      continue;
    std::ifstream environ(fmt::format("/proc/{}/environ", pid), std::ios::binary);
    const std::string env((std::istreambuf_iterator<char>(environ)), std::istreambuf_iterator<char>());
    if (env.find(std::string("OMPI_COMM_WORLD_RANK=0\0", 23)) == 0 ||
        env.find(std::string("\0OMPI_COMM_WORLD_RANK=0\0", 24)) != std::string::npos) {
      found = pid_t(pid);
      break;
    }
  }
  ::closedir(proc);
  return found;
}

}  // namespace

bool launched_by_mpi() {
  return has_env("OMPI_COMM_WORLD_SIZE") || has_env("PMIX_RANK") || has_env("PMI_RANK") ||
         has_env("PMI_SIZE");
}

int available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, default_num_threads());
}

std::vector<std::string> mpirun_command(const std::string& mpirun, const std::string& exe,
                                        const std::vector<std::string>& argv, int world_size,
                                        int threads_per_rank) {
  const int cpus = available_cpus();
  const int threads = threads_per_rank > 0 ? threads_per_rank : std::max(1, cpus / world_size);
  std::vector<std::string> cmd = {mpirun, "-q", "-np", std::to_string(world_size),
                                  "--bind-to", "none"};
  if (world_size > cpus) cmd.push_back("--oversubscribe");
  if (int64_t(world_size) * threads > cpus)
    for (const char* s : {"--mca", "mpi_yield_when_idle", "1"}) cmd.push_back(s);
  if (!cma_allowed()) {
    for (const char* s : {"--mca", "btl_vader_single_copy_mechanism", "none"}) cmd.push_back(s);
  }
  // Every rank is on this host: shared memory carries all traffic, and without the TCP
  // transport no rank listens on a port of every interface (OpenMPI's TCP BTL otherwise
  // opens one per rank on 0.0.0.0 and ::). A user's own OMPI_MCA_btl wins.
  if (!has_env("OMPI_MCA_btl"))
    for (const char* s : {"--mca", "btl", "self,vader"}) cmd.push_back(s);
  cmd.push_back("-x");
  cmd.push_back(fmt::format("{}={}", kThreadsPerRankEnv, threads));
  cmd.push_back("-x");
  cmd.push_back(fmt::format("{}=1", kRelaunchedEnv));
  cmd.push_back(exe);
  for (size_t i = 1; i < argv.size(); ++i) cmd.push_back(argv[i]);
  return cmd;
}

int relaunch_under_mpirun(const std::vector<std::string>& argv, int world_size,
                          int threads_per_rank) {
  CPI_CHECK(world_size >= 1, "cannot launch a world of {} ranks", world_size);
  // A relaunched rank always sees mpirun's environment; if it does not, relaunching again
  // would start mpirun recursively.
  CPI_CHECK(!has_env(kRelaunchedEnv),
            "this process was relaunched under mpirun but sees no MPI launch environment "
            "(OMPI_COMM_WORLD_SIZE / PMIX_RANK); refusing to relaunch again");
  const std::string mpirun = find_mpirun();
  CPI_CHECK(!mpirun.empty(),
            "cannot start {} ranks: mpirun was not found on PATH (install OpenMPI, e.g. the "
            "Debian package openmpi-bin, set CPINFER_MPIRUN, or start cpinfer under your own "
            "mpirun -np {})",
            world_size, world_size);
  const std::vector<std::string> cmd =
      mpirun_command(mpirun, self_exe(), argv, world_size, threads_per_rank);
  CPI_LOG_DEBUG("relaunching: {}", fmt::join(cmd, " "));

  std::vector<char*> cargv;
  for (const std::string& s : cmd) cargv.push_back(const_cast<char*>(s.c_str()));
  cargv.push_back(nullptr);
  const bool root = ::geteuid() == 0;

  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  CPI_CHECK(pid >= 0, "cannot start mpirun: fork failed: {}", std::strerror(errno));
  if (pid == 0) {
    if (root) {
      ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
      ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    ::execv(cargv[0], cargv.data());
    std::fprintf(stderr, "error: cannot execute %s: %s\n", cargv[0], std::strerror(errno));
    std::_Exit(127);
  }

  // Ctrl-C reaches mpirun directly (same process group) and mpirun ends the ranks; we only
  // wait for it. SIGTERM / SIGHUP sent to us alone are passed on: the first to rank 0 alone,
  // which stops serving and ends the other ranks through the step executor, so every
  // process, and then mpirun, exits with 0 (mpirun relays a signal it receives to every
  // rank and reports the job as failed, status 1, however cleanly the ranks left). A second
  // signal, or the first when rank 0 is not found, goes to mpirun.
  g_stop_signal = 0;
  struct sigaction ign {}, fwd {}, old_int {}, old_quit {}, old_term {}, old_hup {};
  ign.sa_handler = SIG_IGN;
  fwd.sa_handler = note_stop_signal;  // no SA_RESTART: the sleep below returns early
  ::sigaction(SIGINT, &ign, &old_int);
  ::sigaction(SIGQUIT, &ign, &old_quit);
  ::sigaction(SIGTERM, &fwd, &old_term);
  ::sigaction(SIGHUP, &fwd, &old_hup);
  int status = 0, passed_on = 0;
  pid_t r;
  for (;;) {
    r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) break;
    if (const int sig = g_stop_signal) {
      g_stop_signal = 0;
      const pid_t rank0 = passed_on++ == 0 ? find_rank0(pid) : -1;
      CPI_LOG_INFO("{} received: passed on to {}", sig == SIGTERM ? "SIGTERM" : "SIGHUP",
                   rank0 > 0 ? fmt::format("rank 0 (pid {})", rank0) : std::string("mpirun"));
      ::kill(rank0 > 0 ? rank0 : pid, sig);
    }
    ::usleep(50 * 1000);  // a signal cuts it short
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGQUIT, &old_quit, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGHUP, &old_hup, nullptr);
  CPI_CHECK(r == pid, "waiting for mpirun failed: {}", std::strerror(errno));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void add_layout_flags(CLI::App* cmd, LayoutSpec* spec, int* threads_per_rank) {
  const std::string group = "Parallelism";
  cmd->add_option("--tensor-parallel-size", spec->tp,
                  "tensor-parallel ranks (-tp); the job runs tp * pcp processes")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--prefill-context-parallel-size", spec->pcp,
                  "prefill context-parallel ranks (-pcp)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--decode-context-parallel-size", spec->dcp,
                  "decode context-parallel size (-dcp): shards the KV cache over TP ranks that "
                  "would hold replicas of a KV head")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--cp-kv-cache-interleave-size,--dcp-kv-cache-interleave-size",
                  spec->interleave,
                  "consecutive tokens stored on one context-parallel rank before moving on")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--block-size", spec->page_size, "tokens per KV cache page")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--threads-per-rank", *threads_per_rank,
                  "threads of each rank (default: CPUs / ranks on the host, at least 1)")
      ->group(group);
}

std::vector<std::string> normalize_layout_flags(const std::vector<std::string>& argv) {
  static const std::pair<std::string, std::string> kShort[] = {
      {"-tp", "--tensor-parallel-size"},
      {"-pcp", "--prefill-context-parallel-size"},
      {"-dcp", "--decode-context-parallel-size"},
  };
  std::vector<std::string> out;
  out.reserve(argv.size());
  bool positional = false;  // after "--" everything is left alone
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    std::string rewritten = a;
    if (i > 0 && !positional) {
      if (a == "--") positional = true;
      for (const auto& [s, l] : kShort) {
        if (a == s) rewritten = l;
        else if (a.size() > s.size() && a.compare(0, s.size() + 1, s + "=") == 0)
          rewritten = l + a.substr(s.size());
      }
    }
    out.push_back(std::move(rewritten));
  }
  return out;
}

int resolve_threads_per_rank(int requested) {
  if (requested > 0) return requested;
  if (const int n = env_int(kThreadsPerRankEnv); n > 0) return n;
  int local = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (local == 0) local = env_int("MPI_LOCALNRANKS");
  return std::max(1, available_cpus() / std::max(1, local));
}

int run_distributed(const std::vector<std::string>& argv, const LayoutSpec& spec,
                    int threads_per_rank, const std::function<int()>& body,
                    const std::function<void()>& precheck) {
  CPI_CHECK(spec.tp >= 1, "tensor-parallel-size {} must be >= 1", spec.tp);
  CPI_CHECK(spec.pcp >= 1, "prefill-context-parallel-size {} must be >= 1", spec.pcp);
  CPI_CHECK(threads_per_rank >= 0, "threads-per-rank {} must be >= 1 (or 0: automatic)",
            threads_per_rank);
  const int world = spec.tp * spec.pcp;
  if (!launched_by_mpi()) {
    // The relaunched ranks are under MPI: they skip this (it passed here already).
    if (precheck) precheck();
    if (world > 1) return relaunch_under_mpirun(argv, world, threads_per_rank);
    if (threads_per_rank > 0) set_num_threads(threads_per_rank);
    return body();
  }

  Comm& comm = Comm::world();
  if (precheck && std::getenv(kRelaunchedEnv) == nullptr) {
    // The user's own mpirun: every rank sees the same failure; one message (rank 0).
    try {
      precheck();
    } catch (const Error&) {
      if (comm.rank() != 0) return 2;
      throw;
    }
  }
  if (comm.size() != world) {
    // Every rank sees the same mismatch: one message (rank 0), the same status everywhere.
    if (comm.rank() != 0) return 2;
    fail("mpirun started {} ranks but tensor-parallel-size {} x prefill-context-parallel-size "
         "{} needs {} (use mpirun -np {})",
         comm.size(), spec.tp, spec.pcp, world, world);
  }
  const int threads = resolve_threads_per_rank(threads_per_rank);
  // Fewer CPUs in our affinity mask than online: mpirun bound this rank.
  if (threads > available_cpus() && available_cpus() < default_num_threads()) {
    CPI_LOG_WARN("rank {}: {} threads but this process may run on {} CPUs (is mpirun binding "
                 "ranks? start it with --bind-to none)",
                 comm.rank(), threads, available_cpus());
  }
  set_num_threads(threads);
  // A world of one (mpirun -np 1): errors propagate like in the plain CLI.
  if (comm.size() == 1) return body();

  // More than one rank: a rank that fails must end the job, since the others may be waiting
  // for it in a collective (MPI_Abort kills every rank; mpirun returns its code).
  int rc = 0;
  try {
    rc = body();
  } catch (const std::exception& e) {
    comm.abort_job_raw(fmt::format("cpinfer: rank {} failed: {}", comm.rank(), e.what()), 1);
  } catch (...) {
    comm.abort_job_raw(fmt::format("cpinfer: rank {} failed: unknown exception", comm.rank()),
                       1);
  }
  if (rc != 0) {
    comm.abort_job_raw(fmt::format("cpinfer: rank {} failed: exit status {}", comm.rank(), rc),
                       rc);
  }
  return 0;
}

}  // namespace cpinfer
