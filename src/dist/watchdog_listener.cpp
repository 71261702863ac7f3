// See watchdog_listener.h. Plain POSIX sockets and poll().
#include "dist/watchdog_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "core/constant_time.h"
#include "core/error.h"
#include "core/log.h"

namespace cpinfer {

namespace {

using Clock = std::chrono::steady_clock;

// Rejections logged one by one; past this, only a count every kLogEvery rejections (a flood
// of strangers must not flood the log).
constexpr int kLogFirst = 10, kLogEvery = 1000;

std::string_view bytes_of(const void* p, size_t n) {
  return std::string_view(static_cast<const char*>(p), n);
}

std::string peer_name(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET)
    return "?";
  char ip[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
  return fmt::format("{}:{}", ip, ntohs(a.sin_port));
}

// The peer's end is closed or broken: "" while it is not; otherwise what happened, as a verb
// phrase after "rank N", with *detail the reason (empty for EOF). Drains the heartbeat bytes
// (*heard: some arrived).
std::string peer_gone(int fd, std::string* detail, bool* heard) {
  char buf[64];
  const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
  if (n > 0) {
    *heard = true;
    return "";
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return "";
  if (n == 0) return "died";  // EOF: its kernel closed the connection, the process ended
  const int e = errno;
  if (e == ETIMEDOUT) {  // keepalive probes unanswered: the process may still run
    *detail = "no answer to TCP keepalive probes for ~7 s: its host is down or the network to "
              "it is cut";
    return "is unreachable";
  }
  *detail = std::strerror(e);
  if (e == EHOSTUNREACH || e == ENETUNREACH) return "is unreachable";
  return "died";  // a reset: its host no longer knows the connection
}

}  // namespace

WatchdogSecret random_watchdog_secret() {
  WatchdogSecret s{};
  size_t got = 0;
  while (got < s.size()) {
    const ssize_t n = ::getrandom(s.data() + got, s.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    CPI_CHECK(n > 0, "the rank watchdog cannot get random bytes for its secret: {}",
              std::strerror(errno));
    got += size_t(n);
  }
  return s;
}

WatchdogListener::WatchdogListener(int listen_fd, int world, const WatchdogSecret& secret,
                                   LostFn on_lost, int hello_timeout_ms,
                                   int heartbeat_timeout_ms)
    : listen_fd_(listen_fd), world_(world), hello_timeout_ms_(hello_timeout_ms),
      heartbeat_timeout_ms_(heartbeat_timeout_ms), secret_(secret), on_lost_(std::move(on_lost)),
      is_registered_(size_t(world), false) {
  ::fcntl(listen_fd_, F_SETFL, ::fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
  if (world_ <= 1) close_listener();
}

WatchdogListener::~WatchdogListener() {
  close_listener();
  for (const Pending& p : pending_) ::close(p.fd);
  for (const Peer& p : peers_) ::close(p.fd);
}

void WatchdogListener::close_listener() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  listening_.store(false);
}

void WatchdogListener::reject(Pending& p, const std::string& why) {
  const int n = rejected_.fetch_add(1) + 1;
  if (n <= kLogFirst)
    CPI_LOG_WARN("rank watchdog: refused a connection from {}: {}", p.from, why);
  else if (n % kLogEvery == 0)
    CPI_LOG_WARN("rank watchdog: {} connections refused so far (latest from {}: {})", n, p.from,
                 why);
  ::close(p.fd);
  p.fd = -1;
}

void WatchdogListener::accept_new() {
  // At most kAcceptBatch per wake-up: a flood that connects as fast as it is accepted must not
  // keep the loop from the registered ranks (the listener stays readable: poll returns at once).
  for (int n = 0; n < kAcceptBatch; ++n) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: none left (or a transient error: poll again)
    Pending p{fd, {}, 0, Clock::now() + std::chrono::milliseconds(hello_timeout_ms_),
              peer_name(fd)};
    // A worker sends its hello right after connecting: read it now, before the connections
    // accepted after it in this batch can push it out of the pending list.
    if (read_hello(p)) {
      if (listen_fd_ < 0) return;  // that was the last rank: the port is closed
      continue;
    }
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                  [](const Pending& q) { return q.fd < 0; }),
                   pending_.end());
    if (int(pending_.size()) >= kMaxPending) {
      reject(pending_.front(), "dropped: too many connections without a hello");
      pending_.erase(pending_.begin());
    }
    pending_.push_back(std::move(p));
  }
}

bool WatchdogListener::read_hello(Pending& p) {
  auto* dst = reinterpret_cast<char*>(&p.hello);
  for (;;) {
    const ssize_t n = ::recv(p.fd, dst + p.got, sizeof(p.hello) - p.got, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n <= 0) {
      reject(p, fmt::format("closed after {} of {} hello bytes", p.got, sizeof(p.hello)));
      return true;
    }
    p.got += size_t(n);
    if (p.got == sizeof(p.hello)) break;
  }
  const WatchdogHello& h = p.hello;
  const WatchdogHello want;
  // Secret first and always (constant time); then the fields it vouches for.
  const bool secret_ok = constant_time_equal(bytes_of(h.secret.data(), h.secret.size()),
                                             bytes_of(secret_.data(), secret_.size()));
  if (std::memcmp(h.magic, want.magic, sizeof(h.magic)) != 0 || !secret_ok) {
    reject(p, "not a hello with this job's secret");
    return true;
  }
  if (h.rank <= 0 || h.rank >= world_) {
    reject(p, fmt::format("rank {} is not a worker rank of this job (1..{})", h.rank, world_ - 1));
    return true;
  }
  if (is_registered_[size_t(h.rank)]) {
    reject(p, fmt::format("rank {} has registered already", h.rank));
    return true;
  }
  Peer peer{p.fd, h, Clock::now()};
  peer.hello.host[sizeof(peer.hello.host) - 1] = '\0';
  int on = 1, idle = 2, intvl = 1, cnt = 5;  // a vanished host: noticed after ~7 s
  ::setsockopt(p.fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  ::setsockopt(p.fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(p.fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  ::setsockopt(p.fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
  // The answer (a fresh socket's send buffer has room: this never blocks or fails short).
  ::send(p.fd, &kWatchdogRegistered, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  peers_.push_back(peer);
  is_registered_[size_t(h.rank)] = true;
  p.fd = -1;  // owned by peers_ now
  if (registered_.fetch_add(1) + 1 == world_ - 1) {
    close_listener();  // everyone is here: nothing may connect from now on
    for (Pending& q : pending_)
      if (q.fd >= 0 && &q != &p) reject(q, "every rank has registered");
    CPI_LOG_DEBUG("rank watchdog: all {} ranks registered; its port is closed", world_ - 1);
  }
  return true;
}

void WatchdogListener::run(const std::atomic<bool>& stop, const std::function<bool()>& disarmed,
                           int poll_ms) {
  std::vector<pollfd> fds;
  while (!stop.load()) {
    // fds: [listener?] [pending...] [peers...]
    fds.clear();
    const size_t first_pending = listen_fd_ >= 0 ? 1 : 0;
    if (listen_fd_ >= 0) fds.push_back({listen_fd_, POLLIN, 0});
    for (const Pending& p : pending_) fds.push_back({p.fd, POLLIN, 0});
    const size_t first_peer = fds.size();
    for (const Peer& p : peers_) fds.push_back({p.fd, POLLIN, 0});
    const int r = ::poll(fds.data(), nfds_t(fds.size()), poll_ms);
    if (r < 0 && errno != EINTR) return;
    const auto now = Clock::now();
    // Pending connections: hello bytes, or their time is up.
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = pending_[i];
      if (p.fd < 0) continue;  // closed by a registration that completed the job
      if (r > 0 && fds[first_pending + i].revents != 0) {
        if (read_hello(p)) continue;
      }
      if (p.fd >= 0 && now > p.deadline)
        reject(p, fmt::format("no complete hello within {} ms", hello_timeout_ms_));
    }
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                  [](const Pending& p) { return p.fd < 0; }),
                   pending_.end());
    // Registered ranks: a closed connection is a dead rank; bytes are heartbeats.
    for (size_t i = first_peer; r > 0 && i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Peer& p = peers_[i - first_peer];
      std::string detail;
      bool heard = false;
      const std::string what = peer_gone(fds[i].fd, &detail, &heard);
      if (heard) p.last_heard = now;
      if (what.empty()) continue;
      if (disarmed()) return;  // normal shutdown: ranks are leaving
      on_lost_(p.hello.rank, fmt::format("{} (pid {} on {}{}{})", what, p.hello.pid, p.hello.host,
                                         detail.empty() ? "" : ": ", detail));
      return;
    }
    // A live connection without heartbeats: the process is stopped or starved.
    for (const Peer& p : peers_) {
      if (heartbeat_timeout_ms_ <= 0) break;
      const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - p.last_heard);
      if (silent.count() <= heartbeat_timeout_ms_) continue;
      if (disarmed()) return;
      on_lost_(p.hello.rank,
               fmt::format("is not responding (pid {} on {}: no heartbeat for {:.1f} s; the "
                           "process is stopped or starved, or the network to it is cut)",
                           p.hello.pid, p.hello.host, double(silent.count()) / 1000.0));
      return;
    }
    if (r > 0 && first_pending == 1 && listen_fd_ >= 0 && (fds[0].revents & POLLIN)) accept_new();
  }
}

}  // namespace cpinfer
