// See watchdog_registration.h.
#include "dist/watchdog_registration.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace cpinfer {

namespace {

using Clock = std::chrono::steady_clock;

int ms_until(Clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return int(std::max<int64_t>(0, ms));
}

// A connected socket to ip:port, or -1 (*why set). Non-blocking connect bounded by the
// deadline: a blocking one can wait minutes on SYN retries while a flood fills the backlog.
int connect_until(uint32_t ip, int port, Clock::time_point deadline, std::string* why) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *why = fmt::format("socket: {}", std::strerror(errno));
    return -1;
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(ip);
  a.sin_port = htons(uint16_t(port));
  int err = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, ms_until(deadline));
      socklen_t len = sizeof(err);
      if (r <= 0) err = ETIMEDOUT;
      else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
  }
  if (err != 0) {
    *why = fmt::format("connect: {}", std::strerror(err));
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // the heartbeat loop blocks
  return fd;
}

enum class Answer { Registered, Dropped, Timeout };

// Sends the hello on `fd` and waits for rank 0's answer, heartbeating meanwhile.
Answer hello_and_wait(int fd, const WatchdogHello& hello, Clock::time_point deadline,
                      std::string* why) {
  if (::send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != ssize_t(sizeof(hello))) {
    *why = fmt::format("sending the hello: {}", std::strerror(errno));
    return Answer::Dropped;
  }
  const char beat = 'h';
  for (;;) {
    const int wait = std::min(ms_until(deadline), WatchdogListener::kHeartbeatIntervalMs);
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, wait);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      if (ms_until(deadline) == 0) {
        *why = "rank 0 did not answer the hello";
        return Answer::Timeout;
      }
      ::send(fd, &beat, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      continue;
    }
    char c = 0;
    const ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
    if (n == 1 && c == kWatchdogRegistered) return Answer::Registered;
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    *why = n == 0  ? std::string("rank 0 closed the connection before answering")
           : n < 0 ? fmt::format("before rank 0's answer: {}", std::strerror(errno))
                   : fmt::format("rank 0 answered byte {} instead of the registration", int(c));
    return Answer::Dropped;
  }
}

}  // namespace

WatchdogRegistration register_with_watchdog(uint32_t ip, int port, const WatchdogHello& hello,
                                            int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  WatchdogRegistration out;
  while (ms_until(deadline) > 0) {
    const int fd = connect_until(ip, port, deadline, &out.why);
    if (fd < 0) {  // not listening yet, or a full backlog: try again shortly
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, ms_until(deadline))));
      continue;
    }
    ++out.attempts;
    const Answer a = hello_and_wait(fd, hello, deadline, &out.why);
    if (a != Answer::Dropped) {
      out.fd = fd;
      out.registered = a == Answer::Registered;
      if (out.registered) out.why.clear();
      return out;
    }
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(20, ms_until(deadline))));
  }
  return out;
}

}  // namespace cpinfer
