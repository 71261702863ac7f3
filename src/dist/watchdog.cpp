// See watchdog.h. Plain POSIX sockets and poll(); no MPI outside start_rank_watchdog's one
// broadcast (main thread).
#include "dist/watchdog.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/log.h"
#include "dist/comm.h"

namespace cpinfer {

namespace {

std::atomic<bool> g_disarmed{false};

struct Address {  // broadcast by rank 0
  char host[256] = {};
  int32_t port = 0;  // 0: no side channel
};

struct Hello {  // sent once by each worker
  int32_t rank = -1;
  int32_t pid = 0;
  char host[64] = {};
};

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

void set_keepalive(int fd) {
  int on = 1, idle = 2, intvl = 1, cnt = 5;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

// Rank 0: listening socket on any port of every interface; -1 on failure.
int listen_any(int backlog, int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

// Worker: connects to rank 0 (loopback when on the same host), retrying for up to 30 s.
int connect_to(const Address& addr) {
  const bool local = host_name() == addr.host;
  const std::string host = local ? "127.0.0.1" : addr.host;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (::getaddrinfo(host.c_str(), std::to_string(addr.port).c_str(), &hints, &res) == 0) {
      for (addrinfo* p = res; p; p = p->ai_next) {
        const int fd = ::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, p->ai_addr, p->ai_addrlen) == 0) {
          ::freeaddrinfo(res);
          return fd;
        }
        ::close(fd);
      }
      ::freeaddrinfo(res);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return -1;
}

// True when the peer's end is closed or broken (EOF or error); drains stray bytes.
bool peer_gone(int fd) {
  char buf[64];
  const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
  if (n > 0) return false;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  return true;
}

void worker_thread(Address addr, int my_rank) {
  const int fd = connect_to(addr);
  if (fd < 0) {
    CPI_LOG_WARN("rank {}: cannot reach rank 0's watchdog at {}:{}; a dead rank 0 will only be "
                 "noticed by mpirun", my_rank, addr.host, addr.port);
    return;
  }
  set_keepalive(fd);
  Hello h;
  h.rank = my_rank;
  h.pid = int32_t(::getpid());
  std::snprintf(h.host, sizeof(h.host), "%s", host_name().c_str());
  if (::send(fd, &h, sizeof(h), MSG_NOSIGNAL) != ssize_t(sizeof(h))) {
    CPI_LOG_WARN("rank {}: cannot register with rank 0's watchdog", my_rank);
  }
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r > 0 && !peer_gone(fd)) continue;
    if (g_disarmed.load()) return;  // rank 0 left after a normal shutdown
    std::fprintf(stderr,
                 "cpinfer: rank %d: lost rank 0 (its process exited or its host is unreachable); "
                 "exiting\n",
                 my_rank);
    std::fflush(stderr);
    ::_exit(1);
  }
}

void driver_thread(int listen_fd, int world, RankLostFn on_lost) {
  struct Peer {
    int fd;
    Hello hello;
  };
  std::vector<Peer> peers;
  std::vector<pollfd> fds;
  const auto start = std::chrono::steady_clock::now();
  bool warned = false;
  for (;;) {
    fds.clear();
    fds.push_back({listen_fd, POLLIN, 0});
    for (const Peer& p : peers) fds.push_back({p.fd, POLLIN, 0});
    const int r = ::poll(fds.data(), nfds_t(fds.size()), 1000);
    if (r < 0 && errno != EINTR) return;
    if (!warned && int(peers.size()) < world - 1 &&
        std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) {
      warned = true;
      CPI_LOG_WARN("only {} of {} ranks registered with the watchdog after 60 s; the death of "
                   "the others is left to mpirun", peers.size(), world - 1);
    }
    if (r <= 0) continue;
    if (fds[0].revents & POLLIN) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        Peer p{fd, {}};
        // The hello follows the connect at once; wait for it at most 5 s.
        timeval tv{5, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (::recv(fd, &p.hello, sizeof(p.hello), MSG_WAITALL) == ssize_t(sizeof(p.hello)) &&
            p.hello.rank > 0 && p.hello.rank < world) {
          p.hello.host[sizeof(p.hello.host) - 1] = '\0';
          set_keepalive(fd);
          peers.push_back(p);
        } else {
          ::close(fd);
        }
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      if (!peer_gone(fds[i].fd)) continue;
      const Peer p = peers[i - 1];
      if (g_disarmed.load()) return;  // normal shutdown: ranks are leaving
      on_lost(p.hello.rank, fmt::format("pid {} on {}", p.hello.pid, p.hello.host));
      return;  // on_lost ends the process
    }
  }
}

}  // namespace

void disarm_rank_watchdog() { g_disarmed.store(true); }
bool rank_watchdog_disarmed() { return g_disarmed.load(); }

void start_rank_watchdog(Comm& comm, RankLostFn on_lost) {
  if (comm.size() <= 1) return;
  Address addr;
  int listen_fd = -1;
  if (comm.rank() == 0) {
    int port = 0;
    listen_fd = listen_any(comm.size(), &port);
    if (listen_fd < 0) {
      CPI_LOG_WARN("the rank watchdog cannot listen on a TCP port ({}); the death of a rank is "
                   "left to mpirun", std::strerror(errno));
    } else {
      addr.port = port;
      std::snprintf(addr.host, sizeof(addr.host), "%s", host_name().c_str());
    }
  }
  comm.broadcast(&addr, sizeof(addr), 0, Group::World);
  if (addr.port == 0) return;
  if (comm.rank() == 0) {
    std::thread(driver_thread, listen_fd, comm.size(), std::move(on_lost)).detach();
  } else {
    std::thread(worker_thread, addr, comm.rank()).detach();
  }
}

}  // namespace cpinfer
