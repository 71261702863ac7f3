// See watchdog.h. Plain POSIX sockets; no MPI outside start_rank_watchdog's start-up
// collectives (main thread).
#include "dist/watchdog.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <optional>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/log.h"
#include "core/error.h"
#include "dist/comm.h"
#include "dist/watchdog_address.h"
#include "dist/watchdog_listener.h"
#include "dist/watchdog_registration.h"

namespace cpinfer {

namespace {

std::atomic<bool> g_disarmed{false};

struct Setup {  // broadcast by rank 0
  uint32_t ip = 0;   // host byte order
  int32_t port = 0;  // 0: no side channel
  WatchdogSecret secret{};
  char error[512] = {};  // non-empty: every rank throws it
};

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

// A flood of strangers must not fill the accept queue before the ranks connect (the listener
// drains it on every wake-up; a worker's connect is retried anyway).
constexpr int kListenBacklog = 512;

// Rank 0: listening socket on ip:port; -1 (errno set) on failure; *port gets the bound port.
int listen_on(uint32_t ip, int backlog, int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(ip);
  a.sin_port = htons(uint16_t(*port));
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

// How long a worker tries to register (rank 0 warns about missing ranks after as long).
constexpr int kRegisterTimeoutMs = 60000;

// CPINFER_WATCHDOG_REGISTER_DELAY_MS (tests only): workers wait this long (at most 10 s)
// before they register, so that a test's strangers surely race the registrations.
int register_delay_ms() {
  const char* v = std::getenv("CPINFER_WATCHDOG_REGISTER_DELAY_MS");
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long ms = std::strtol(v, &end, 10);
  return *end == '\0' ? int(std::clamp(ms, 0L, 10000L)) : 0;
}

void worker_thread(Setup setup, int my_rank) {
  const std::string where = fmt::format("{}:{}", format_ipv4(setup.ip), setup.port);
  std::this_thread::sleep_for(std::chrono::milliseconds(register_delay_ms()));
  WatchdogHello h;
  h.secret = setup.secret;
  h.rank = my_rank;
  h.pid = int32_t(::getpid());
  std::snprintf(h.host, sizeof(h.host), "%s", host_name().c_str());
  const WatchdogRegistration reg = register_with_watchdog(setup.ip, setup.port, h,
                                                          kRegisterTimeoutMs);
  if (reg.fd < 0) {
    CPI_LOG_WARN("rank {}: cannot register with rank 0's watchdog at {} ({}); a dead rank 0 "
                 "will only be noticed by mpirun", my_rank, where, reg.why);
    return;
  }
  if (!reg.registered)
    CPI_LOG_WARN("rank {}: rank 0's watchdog at {} has not answered the registration; "
                 "watching the connection anyway", my_rank, where);
  else if (reg.attempts > 1)
    CPI_LOG_INFO("rank {}: registered with rank 0's watchdog after {} connections (rank 0 "
                 "dropped the earlier ones: strangers on its port?)", my_rank, reg.attempts);
  const int fd = reg.fd;
  int on = 1, idle = 2, intvl = 1, cnt = 5;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
  // The heartbeats keep the connection busy, so keepalive (which probes idle connections
  // only) would never run here: a heartbeat unacknowledged for 7 s (rank 0's host down or the
  // network cut) makes the kernel drop the connection instead, with ETIMEDOUT, as keepalive
  // would have. A stopped rank 0 still acknowledges (its kernel does).
  unsigned user_timeout_ms = 7000;
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
  char buf[64];
  const char beat = 'h';
  for (;;) {
    // One heartbeat byte per interval (rank 0 reads them as "alive and running"); rank 0
    // sends nothing after its answer, so a readable socket means EOF or an error.
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, WatchdogListener::kHeartbeatIntervalMs);
    if (r == 0 || (r < 0 && errno == EINTR)) {
      ::send(fd, &beat, 1, MSG_NOSIGNAL | MSG_DONTWAIT);  // a failure shows up in recv below
      continue;
    }
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))) continue;
    if (g_disarmed.load()) return;  // rank 0 left after a normal shutdown
    const std::string why =
        n == 0 ? std::string("its process exited")
               : errno == ETIMEDOUT
                     ? std::string("unreachable: nothing acknowledged for ~7 s; its host is down "
                                   "or the network to it is cut")
                     : fmt::format("unreachable: {}", std::strerror(errno));
    std::fprintf(stderr, "cpinfer: rank %d: lost rank 0 (%s); exiting\n", my_rank, why.c_str());
    std::fflush(stderr);
    ::_exit(1);
  }
}

void driver_thread(WatchdogListener* listener, int world) {
  std::atomic<bool> never{false};
  std::thread warn([listener, world] {
    // Ranks that have not registered after 60 s: their death is left to mpirun.
    for (int i = 0; i < 600 && listener->listening(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (listener->listening())
      CPI_LOG_WARN("only {} of {} ranks registered with the watchdog after 60 s; the death of "
                   "the others is left to mpirun", listener->registered(), world - 1);
  });
  warn.detach();
  listener->run(never, [] { return g_disarmed.load(); }, 250);
}

}  // namespace

void disarm_rank_watchdog() { g_disarmed.store(true); }
bool rank_watchdog_disarmed() { return g_disarmed.load(); }

void start_rank_watchdog(Comm& comm, const WatchdogOptions& options, RankLostFn on_lost) {
  if (comm.size() <= 1) return;
  // Does every rank share rank 0's network stack? Rank 0 sends its id, each rank compares.
  char stack[256] = {};
  std::snprintf(stack, sizeof(stack), "%s", network_stack_id().c_str());
  char root_stack[256];
  std::memcpy(root_stack, stack, sizeof(stack));
  comm.broadcast(root_stack, sizeof(root_stack), 0, Group::World);
  int32_t elsewhere = std::memcmp(stack, root_stack, sizeof(stack)) != 0 ? 1 : 0;
  comm.all_reduce_sum(&elsewhere, 1, DType::I32, Group::World);

  Setup setup;
  int listen_fd = -1;
  if (comm.rank() == 0) {
    try {
      std::string why;
      const std::optional<uint32_t> ip =
          choose_watchdog_address(options.address, elsewhere == 0, &why);
      int port = options.port;
      if (!ip) {
        CPI_LOG_WARN("the rank watchdog has no address to listen on ({}); the death of a rank "
                     "is left to mpirun", why);
      } else if ((listen_fd = listen_on(*ip, kListenBacklog, &port)) < 0) {
        const std::string err = fmt::format("the rank watchdog cannot listen on {}:{} ({})",
                                            format_ipv4(*ip), options.port, std::strerror(errno));
        CPI_CHECK(options.port == 0, "{}: choose another --watchdog-port, or 0 for any", err);
        CPI_LOG_WARN("{}; the death of a rank is left to mpirun", err);
      } else {
        setup.ip = *ip;
        setup.port = port;
        setup.secret = random_watchdog_secret();
      }
    } catch (const Error& e) {
      std::snprintf(setup.error, sizeof(setup.error), "%s", e.what());
    }
  }
  comm.broadcast(&setup, sizeof(setup), 0, Group::World);
  if (setup.error[0] != '\0') fail("{}", setup.error);
  if (setup.port == 0) return;
  if (comm.rank() == 0) {
    CPI_LOG_INFO("rank watchdog: port {}:{} for the {} other ranks (authenticated; "
                 "closed once all have registered)",
                 format_ipv4(setup.ip), setup.port, comm.size() - 1);
    // Lives as long as the process: the thread may still run at exit.
    auto* listener = new WatchdogListener(listen_fd, comm.size(), setup.secret, std::move(on_lost),
                                          WatchdogListener::kHelloTimeoutMs,
                                          int(options.heartbeat_timeout_s * 1000));
    std::thread(driver_thread, listener, comm.size()).detach();
  } else {
    std::thread(worker_thread, setup, comm.rank()).detach();
  }
}

}  // namespace cpinfer
