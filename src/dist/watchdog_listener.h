// Rank 0's side of the watchdog channel (dist/watchdog.h): accepts the other ranks'
// registrations on one listening socket and reports a registered rank whose connection
// closes. No MPI here, so it is tested with plain sockets (tests/unit/watchdog_test.cpp).
//
// Registration: a rank connects and sends one WatchdogHello. It is accepted when the magic
// matches, the 32-byte per-job secret matches (constant-time compare), 0 < rank < world and
// that rank has not registered yet, and answered with one byte, kWatchdogRegistered (the
// worker's side, dist/watchdog_registration.h, connects again when its connection is closed
// before that answer); anything else (a wrong secret, a second hello for a live
// rank, a connection that sends nothing for 5 s, bytes that are no hello) is closed and
// logged, and changes nothing. Accepts and reads never block the loop (non-blocking sockets,
// at most kMaxPending unregistered connections at once: the oldest is dropped first; a hello
// already there when a connection is accepted is read at once, so a flood of silent
// strangers accepted in the same batch cannot push it out). Once
// every rank has registered the listening socket is closed: nothing can connect any more.
//
// Heartbeats: a registered rank sends one byte every kHeartbeatIntervalMs from its watchdog
// thread. With a heartbeat timeout, a rank silent for longer is reported as not responding:
// its process is stopped (SIGSTOP, a debugger) or starved, although its connection is open.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace cpinfer {

using WatchdogSecret = std::array<uint8_t, 32>;

// Rank 0's answer to an accepted hello (the only byte it ever sends).
constexpr char kWatchdogRegistered = 'R';

struct WatchdogHello {  // the only bytes a worker ever sends (same binary on every rank)
  char magic[8] = {'C', 'P', 'I', 'W', 'D', 'O', 'G', '1'};
  WatchdogSecret secret{};
  int32_t rank = -1;
  int32_t pid = 0;
  char host[64] = {};
};
static_assert(sizeof(WatchdogHello) == 112, "the hello's bytes are a wire format");

// 32 random bytes from the kernel (getrandom); throws when it has none.
WatchdogSecret random_watchdog_secret();

class WatchdogListener {
 public:
  static constexpr int kMaxPending = 64;
  static constexpr int kAcceptBatch = 256;  // accepts per wake-up of the loop
  static constexpr int kHelloTimeoutMs = 5000;
  static constexpr int kHeartbeatIntervalMs = 500;  // what a worker sends (dist/watchdog.cpp)

  // description: what happened, to follow "rank N": "died (pid P on HOST)" when its
  // connection closed (the process ended), "is unreachable (pid P on HOST: why)" when it broke
  // (keepalive probes unanswered: host down or network cut; the process may still run),
  // "is not responding (pid P on HOST: no heartbeat for S s ...)" past the heartbeat timeout.
  using LostFn = std::function<void(int rank, const std::string& description)>;
  // Takes `listen_fd` (bound and listening). `world`: ranks 0..world-1; 1..world-1 register.
  // heartbeat_timeout_ms 0: no heartbeat check (only closed or broken connections count).
  WatchdogListener(int listen_fd, int world, const WatchdogSecret& secret, LostFn on_lost,
                   int hello_timeout_ms = kHelloTimeoutMs, int heartbeat_timeout_ms = 0);
  ~WatchdogListener();
  WatchdogListener(const WatchdogListener&) = delete;
  WatchdogListener& operator=(const WatchdogListener&) = delete;

  // The loop: returns after on_lost was called, when `stop` becomes true (checked every
  // poll_ms), or when disarmed() says a registered connection closed in a normal shutdown.
  void run(const std::atomic<bool>& stop, const std::function<bool()>& disarmed, int poll_ms = 200);

  int registered() const { return registered_.load(); }
  int rejected() const { return rejected_.load(); }
  bool listening() const { return listening_.load(); }

 private:
  struct Pending {  // connected, hello not complete yet
    int fd;
    WatchdogHello hello;
    size_t got;
    std::chrono::steady_clock::time_point deadline;
    std::string from;  // "10.0.0.5:41234"
  };
  struct Peer {  // a registered rank
    int fd;
    WatchdogHello hello;
    std::chrono::steady_clock::time_point last_heard;  // registration or its latest byte
  };
  void accept_new();
  // Reads what `p` sent; true when it is finished with (registered or rejected).
  bool read_hello(Pending& p);
  void reject(Pending& p, const std::string& why);
  void close_listener();

  int listen_fd_;
  int world_;
  int hello_timeout_ms_;
  int heartbeat_timeout_ms_;
  WatchdogSecret secret_;
  LostFn on_lost_;
  std::vector<Pending> pending_;
  std::vector<Peer> peers_;
  std::vector<bool> is_registered_;  // [world]
  std::atomic<int> registered_{0}, rejected_{0};
  std::atomic<bool> listening_{true};
};

}  // namespace cpinfer
