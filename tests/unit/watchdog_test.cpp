// The rank watchdog's private channel without MPI: address selection (CIDR and interface
// rules) and rank 0's listener against strangers (no hello, a wrong secret, a valid-looking
// hello for a live rank, garbage, a flood of 1000 connections) racing real registrations, and
// a worker's registration (its answer from rank 0, connecting again when dropped before it).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dist/watchdog_address.h"
#include "dist/watchdog_listener.h"
#include "dist/watchdog_registration.h"

namespace cpinfer {
namespace {

TEST(WatchdogAddress, ParsesAndMatchesCidr) {
  EXPECT_EQ(parse_ipv4("10.1.2.3"), std::optional<uint32_t>(0x0A010203u));
  EXPECT_FALSE(parse_ipv4("10.1.2"));
  EXPECT_FALSE(parse_ipv4("eth0"));
  EXPECT_EQ(format_ipv4(0x0A010203u), "10.1.2.3");
  const uint32_t ip = *parse_ipv4("10.213.0.2");
  EXPECT_EQ(ipv4_in_cidr(ip, "10.213.0.0/24"), std::optional<bool>(true));
  EXPECT_EQ(ipv4_in_cidr(ip, "10.213.1.0/24"), std::optional<bool>(false));
  EXPECT_EQ(ipv4_in_cidr(ip, "10.213.0.2/32"), std::optional<bool>(true));
  EXPECT_EQ(ipv4_in_cidr(ip, "10.213.0.3/32"), std::optional<bool>(false));
  EXPECT_EQ(ipv4_in_cidr(ip, "0.0.0.0/0"), std::optional<bool>(true));
  EXPECT_EQ(ipv4_in_cidr(ip, "10.0.0.0/7"), std::optional<bool>(true));   // 0000101x
  EXPECT_EQ(ipv4_in_cidr(ip, "12.0.0.0/7"), std::optional<bool>(false));  // 0000110x
  EXPECT_FALSE(ipv4_in_cidr(ip, "10.213.0.0/33"));
  EXPECT_FALSE(ipv4_in_cidr(ip, "10.213.0.0/"));
  EXPECT_FALSE(ipv4_in_cidr(ip, "10.213.0.0/2x"));
  EXPECT_FALSE(ipv4_in_cidr(ip, "eth1"));
}

TEST(WatchdogAddress, IfIncludeTakesTheFirstListedMatch) {
  const std::vector<LocalAddress> local = {{"lo", *parse_ipv4("127.0.0.1")},
                                           {"eth0", *parse_ipv4("192.168.5.7")},
                                           {"ib0", *parse_ipv4("10.0.3.9")}};
  EXPECT_EQ(address_for_if_include("ib0", local), parse_ipv4("10.0.3.9"));
  EXPECT_EQ(address_for_if_include("10.0.0.0/16", local), parse_ipv4("10.0.3.9"));
  // Items in the user's order: the subnet first wins over the interface named second.
  EXPECT_EQ(address_for_if_include("192.168.5.0/24,ib0", local), parse_ipv4("192.168.5.7"));
  EXPECT_EQ(address_for_if_include("eth9,,ib0", local), parse_ipv4("10.0.3.9"));
  EXPECT_FALSE(address_for_if_include("eth9", local));
  EXPECT_FALSE(address_for_if_include("172.16.0.0/12", local));
  EXPECT_FALSE(address_for_if_include("", local));
}

TEST(WatchdogAddress, ExplicitAndSingleStackChoices) {
  std::string why;
  EXPECT_EQ(choose_watchdog_address("", true, &why), parse_ipv4("127.0.0.1"));
  EXPECT_EQ(choose_watchdog_address("127.0.0.1", false, &why), parse_ipv4("127.0.0.1"));
  EXPECT_EQ(choose_watchdog_address("lo", false, &why), parse_ipv4("127.0.0.1"));
  // An address or interface this host lacks is an error naming the flag and the value.
  for (const char* bad : {"203.0.113.77", "no-such-if0"}) {
    try {
      choose_watchdog_address(bad, true, &why);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--watchdog-address ") + bad),
                std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(network_stack_id().empty());
  EXPECT_EQ(network_stack_id(), network_stack_id());
}

// ---- the listener ------------------------------------------------------------------

int listen_loopback(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(::listen(fd, 128), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  *port = ntohs(a.sin_port);
  return fd;
}

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void send_all(int fd, const void* p, size_t n) {
  ASSERT_EQ(::send(fd, p, n, MSG_NOSIGNAL), ssize_t(n));
}

// True when the listener closed `fd` (EOF) within timeout_ms.
bool closed_by_peer(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return false;
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

template <typename Pred>
bool eventually(Pred pred, int timeout_ms = 5000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

struct ListenerFixture {
  static constexpr int kWorld = 4;
  WatchdogSecret secret = random_watchdog_secret();
  int port = 0;
  std::mutex mu;
  std::vector<std::pair<int, std::string>> lost;
  std::atomic<bool> stop{false}, disarmed{false};
  WatchdogListener listener;
  std::thread thread;

  explicit ListenerFixture(int hello_timeout_ms, int heartbeat_timeout_ms = 0)
      : listener(listen_loopback(&port), kWorld, secret,
                 [this](int rank, const std::string& d) {
                   std::lock_guard<std::mutex> g(mu);
                   lost.emplace_back(rank, d);
                 },
                 hello_timeout_ms, heartbeat_timeout_ms),
        thread([this] { listener.run(stop, [this] { return disarmed.load(); }, 20); }) {}
  ~ListenerFixture() {
    stop.store(true);
    thread.join();
  }
  size_t num_lost() {
    std::lock_guard<std::mutex> g(mu);
    return lost.size();
  }
  // Connects and registers ranks 1 .. kWorld-1; their sockets (empty if one could not connect).
  std::vector<int> register_all() {
    std::vector<int> fds;
    for (int rank = 1; rank < kWorld; ++rank) {
      const WatchdogHello h = hello(rank);
      const int c = connect_loopback(port);
      if (c < 0) return {};
      send_all(c, &h, sizeof(h));
      fds.push_back(c);
    }
    return fds;
  }
  WatchdogHello hello(int rank) const {
    WatchdogHello h;
    h.secret = secret;
    h.rank = rank;
    h.pid = 4242 + rank;
    std::snprintf(h.host, sizeof(h.host), "host-%d", rank);
    return h;
  }
};

TEST(WatchdogListener, StrangersChangeNothingAndRealRanksRegister) {
  ListenerFixture f(/*hello_timeout_ms=*/400);

  // A stranger that connects and never speaks: it must not hold up anyone else.
  const int silent = connect_loopback(f.port);
  ASSERT_GE(silent, 0);

  // A valid-looking hello for rank 1 with a wrong secret, then gone.
  WatchdogHello forged = f.hello(1);
  forged.secret[17] ^= 1;
  int s = connect_loopback(f.port);
  send_all(s, &forged, sizeof(forged));
  EXPECT_TRUE(closed_by_peer(s, 2000)) << "a wrong secret was not refused";
  ::close(s);

  // Garbage of exactly a hello's size, and half a real hello then a close.
  std::vector<char> junk(sizeof(WatchdogHello), 'x');
  s = connect_loopback(f.port);
  send_all(s, junk.data(), junk.size());
  EXPECT_TRUE(closed_by_peer(s, 2000));
  ::close(s);
  const WatchdogHello real1 = f.hello(1);
  s = connect_loopback(f.port);
  send_all(s, &real1, sizeof(real1) / 2);
  ::close(s);

  // Out-of-range ranks with the right secret (0 is rank 0 itself).
  for (int bad_rank : {0, -1, ListenerFixture::kWorld}) {
    const WatchdogHello h = f.hello(bad_rank);
    s = connect_loopback(f.port);
    send_all(s, &h, sizeof(h));
    EXPECT_TRUE(closed_by_peer(s, 2000)) << "rank " << bad_rank;
    ::close(s);
  }
  EXPECT_EQ(f.listener.registered(), 0);

  // Ranks 1 and 2 register while the silent stranger is still connected.
  const int r1 = connect_loopback(f.port);
  send_all(r1, &real1, sizeof(real1));
  const WatchdogHello real2 = f.hello(2);
  const int r2 = connect_loopback(f.port);
  send_all(r2, &real2, sizeof(real2));
  ASSERT_TRUE(eventually([&] { return f.listener.registered() == 2; }));
  for (int r : {r1, r2}) {  // each got rank 0's answer, and nothing else
    char c = 0;
    ASSERT_EQ(::recv(r, &c, 1, 0), 1);
    EXPECT_EQ(c, kWatchdogRegistered);
    EXPECT_EQ(::recv(r, &c, 1, MSG_DONTWAIT), -1);
  }

  // A second hello for live rank 1, even with the right secret, is refused.
  s = connect_loopback(f.port);
  send_all(s, &real1, sizeof(real1));
  EXPECT_TRUE(closed_by_peer(s, 2000)) << "rank 1 registered twice";
  ::close(s);

  // The silent stranger is dropped at its deadline.
  EXPECT_TRUE(closed_by_peer(silent, 3000)) << "a connection without hello was kept";
  ::close(silent);

  // A flood: 1000 connections, each closed at once, some sending a byte.
  for (int i = 0; i < 1000; ++i) {
    const int c = connect_loopback(f.port);
    ASSERT_GE(c, 0) << "connection " << i << " refused while the listener is open";
    if (i % 3 == 0) send_all(c, "z", 1);
    ::close(c);
  }
  EXPECT_TRUE(f.listener.listening());
  EXPECT_EQ(f.listener.registered(), 2);
  EXPECT_EQ(f.num_lost(), 0u) << "a stranger was taken for a rank";
  EXPECT_TRUE(eventually([&] { return f.listener.rejected() >= 1000 + 7; }))
      << f.listener.rejected();

  // The last rank registers: the port closes and nothing can connect any more.
  const WatchdogHello real3 = f.hello(3);
  const int r3 = connect_loopback(f.port);
  send_all(r3, &real3, sizeof(real3));
  ASSERT_TRUE(eventually([&] { return !f.listener.listening(); }));
  EXPECT_EQ(f.listener.registered(), 3);
  EXPECT_EQ(connect_loopback(f.port), -1) << "the port is still open after every rank registered";
  EXPECT_EQ(f.num_lost(), 0u);

  // A registered rank's connection closing is its death, reported once with its pid and host.
  ::close(r2);
  ASSERT_TRUE(eventually([&] { return f.num_lost() == 1; }));
  {
    std::lock_guard<std::mutex> g(f.mu);
    EXPECT_EQ(f.lost[0].first, 2);
    EXPECT_EQ(f.lost[0].second, "died (pid 4244 on host-2)");
  }
  ::close(r1);
  ::close(r3);
}

// A reset connection (what a rebooted host answers) is a death too, with the reason; an
// unanswered keepalive ("is unreachable") needs a cut link: tests/cli/mpi_two_namespace_test.sh.
TEST(WatchdogListener, AResetConnectionIsADeathWithItsReason) {
  ListenerFixture f(/*hello_timeout_ms=*/5000);
  const std::vector<int> ranks = f.register_all();
  ASSERT_EQ(ranks.size(), size_t(ListenerFixture::kWorld - 1));
  ASSERT_TRUE(eventually([&] { return f.listener.registered() == ListenerFixture::kWorld - 1; }));
  const linger hard{1, 0};  // close with RST, not FIN
  ASSERT_EQ(::setsockopt(ranks[0], SOL_SOCKET, SO_LINGER, &hard, sizeof(hard)), 0);
  ::close(ranks[0]);
  ASSERT_TRUE(eventually([&] { return f.num_lost() == 1; }));
  {
    std::lock_guard<std::mutex> g(f.mu);
    EXPECT_EQ(f.lost[0].first, 1);
    EXPECT_EQ(f.lost[0].second, "died (pid 4243 on host-1: Connection reset by peer)");
  }
  for (size_t i = 1; i < ranks.size(); ++i) ::close(ranks[i]);
}

TEST(WatchdogListener, TooManySilentConnectionsDropTheOldestNotTheRanks) {
  ListenerFixture f(/*hello_timeout_ms=*/60000);
  std::vector<int> silent;
  for (int i = 0; i < WatchdogListener::kMaxPending + 36; ++i) {
    const int c = connect_loopback(f.port);
    ASSERT_GE(c, 0);
    silent.push_back(c);
  }
  // The oldest 36 are dropped (the cap), long before their 60 s deadline.
  for (int i = 0; i < 36; ++i) EXPECT_TRUE(closed_by_peer(silent[size_t(i)], 3000)) << i;
  for (int rank = 1; rank < ListenerFixture::kWorld; ++rank) {
    const WatchdogHello h = f.hello(rank);
    const int c = connect_loopback(f.port);
    send_all(c, &h, sizeof(h));
    silent.push_back(c);  // closed at the end
  }
  ASSERT_TRUE(eventually([&] { return f.listener.registered() == ListenerFixture::kWorld - 1; }));
  // Registration complete: the remaining silent strangers are closed too.
  EXPECT_TRUE(closed_by_peer(silent[40], 3000));
  EXPECT_EQ(f.num_lost(), 0u);
  f.disarmed.store(true);  // a normal shutdown: ranks leaving are not deaths
  for (int c : silent) ::close(c);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(f.num_lost(), 0u);
}

// Heartbeats (timeout 400 ms here): ranks that keep sending stay registered well past the
// timeout; the one that falls silent, its connection still open, is reported as not
// responding, with how long it was silent, within a few poll periods of the timeout.
TEST(WatchdogListener, ARankWithoutHeartbeatsIsNotResponding) {
  ListenerFixture f(/*hello_timeout_ms=*/5000, /*heartbeat_timeout_ms=*/400);
  const std::vector<int> ranks = f.register_all();
  ASSERT_EQ(ranks.size(), size_t(ListenerFixture::kWorld - 1));
  ASSERT_TRUE(eventually([&] { return f.listener.registered() == ListenerFixture::kWorld - 1; }));
  const char beat = 'h';
  // 1.2 s (3 timeouts) of heartbeats every 100 ms from all three ranks: nobody is lost.
  // Rank 2's silence begins when its last heartbeat is sent (the listener receives it no
  // earlier), so the time to the report is measured from that send, not from the loop's end.
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 12; ++i) {
    for (int c : ranks) send_all(c, &beat, 1);
    t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(f.num_lost(), 0u);
  // Rank 2 stops (as a SIGSTOPped process would); ranks 1 and 3 go on.
  bool reported = false;
  for (int i = 0; i < 30 && !reported; ++i) {
    send_all(ranks[0], &beat, 1);
    send_all(ranks[2], &beat, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reported = f.num_lost() > 0;
  }
  const double after_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(reported) << "a silent rank was not reported within 3 s";
  EXPECT_GE(after_s, 0.4);  // never before 400 ms of silence
  EXPECT_LE(after_s, 1.6);
  {
    std::lock_guard<std::mutex> g(f.mu);
    ASSERT_EQ(f.lost.size(), 1u);
    EXPECT_EQ(f.lost[0].first, 2);
    EXPECT_EQ(f.lost[0].second.rfind("is not responding (pid 4244 on host-2: no heartbeat for ", 0),
              0u)
        << f.lost[0].second;
  }
  for (int c : ranks) ::close(c);
}

// Without a heartbeat timeout (the default) silence is not a failure: a registered rank that
// sends nothing for 1 s stays registered.
TEST(WatchdogListener, NoHeartbeatTimeoutNoSilenceCheck) {
  ListenerFixture f(/*hello_timeout_ms=*/5000);
  const std::vector<int> ranks = f.register_all();
  ASSERT_EQ(ranks.size(), size_t(ListenerFixture::kWorld - 1));
  ASSERT_TRUE(eventually([&] { return f.listener.registered() == ListenerFixture::kWorld - 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_EQ(f.num_lost(), 0u);
  f.disarmed.store(true);
  for (int c : ranks) ::close(c);
}

// Connections queued before the listener runs (a flood that arrived in the same instant as a
// worker): the worker's hello is already there when it is accepted and is read at once, so
// the 100 silent connections accepted after it in the same batch cannot push it out of the
// 64 pending slots. (Before, it was dropped once 64 later connections were accepted.)
TEST(WatchdogListener, AHelloAlreadyThereWhenAcceptedIsNotPushedOutByLaterStrangers) {
  int port = 0;
  const int listen_fd = listen_loopback(&port);  // backlog 128: every connect below completes
  const WatchdogSecret secret = random_watchdog_secret();
  std::atomic<int> lost{0};
  WatchdogListener listener(listen_fd, 2, secret, [&](int, const std::string&) { ++lost; },
                            60000);
  WatchdogHello h;
  h.secret = secret;
  h.rank = 1;
  const int worker = connect_loopback(port);
  ASSERT_GE(worker, 0);
  send_all(worker, &h, sizeof(h));
  std::vector<int> strangers;
  for (int i = 0; i < 100; ++i) {
    const int c = connect_loopback(port);
    ASSERT_GE(c, 0) << i;
    strangers.push_back(c);
  }
  std::atomic<bool> stop{false};
  std::thread t([&] { listener.run(stop, [] { return false; }, 20); });
  char c = 0;
  pollfd p{worker, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 5000), 1) << "no answer within 5 s";
  EXPECT_EQ(::recv(worker, &c, 1, MSG_DONTWAIT), 1) << "the worker's connection was closed";
  EXPECT_EQ(c, kWatchdogRegistered);
  EXPECT_TRUE(eventually([&] { return listener.registered() == 1 && !listener.listening(); }));
  int open_strangers = 0;  // closed, or reset with the listening socket (never accepted)
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (int s : strangers) {
    pollfd q{s, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (::poll(&q, 1, int(std::max<int64_t>(0, left.count()))) != 1 ||
        ::recv(s, &c, 1, MSG_DONTWAIT) > 0)
      ++open_strangers;
  }
  EXPECT_EQ(open_strangers, 0);
  EXPECT_EQ(lost.load(), 0);
  stop.store(true);
  t.join();
  for (int s : strangers) ::close(s);
  ::close(worker);
}

// Registration and a flood in parallel: 4 threads open 200 silent connections each (kept
// open, so the 64-connection cap keeps dropping the oldest) while the 3 ranks register with
// register_with_watchdog. Every rank registers, none is reported lost, the port closes.
TEST(WatchdogListener, AFloodRacingTheRegistrationsDropsNoRank) {
  ListenerFixture f(/*hello_timeout_ms=*/60000);
  std::atomic<int> connected{0};
  std::vector<std::vector<int>> held(4);
  std::vector<std::thread> flood;
  for (int t = 0; t < 4; ++t)
    flood.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const int c = connect_loopback(f.port);
        if (c < 0) break;  // the port closed: every rank is in
        held[size_t(t)].push_back(c);
        ++connected;
      }
    });
  std::vector<WatchdogRegistration> regs(ListenerFixture::kWorld);
  std::vector<std::thread> ranks;
  for (int rank = 1; rank < ListenerFixture::kWorld; ++rank)
    ranks.emplace_back([&, rank] {
      // Start once the flood is past the cap (rank r a few connections later than rank
      // r - 1), so each registration races strangers that push out the oldest pending
      // connections. Waiting on the count, not on a fixed sleep: under TSan the flood is
      // slow enough that a 5 ms head start was not enough to reach the cap.
      const int start_at = WatchdogListener::kMaxPending + 8 * rank;
      eventually([&] { return connected.load() > start_at; }, 20000);
      regs[size_t(rank)] = register_with_watchdog(INADDR_LOOPBACK, f.port, f.hello(rank), 20000);
    });
  for (auto& t : ranks) t.join();
  for (auto& t : flood) t.join();
  for (int rank = 1; rank < ListenerFixture::kWorld; ++rank) {
    EXPECT_TRUE(regs[size_t(rank)].registered) << "rank " << rank << ": " << regs[size_t(rank)].why;
    EXPECT_GE(regs[size_t(rank)].attempts, 1);
  }
  EXPECT_EQ(f.listener.registered(), ListenerFixture::kWorld - 1);
  EXPECT_TRUE(eventually([&] { return !f.listener.listening(); }));
  EXPECT_EQ(f.num_lost(), 0u);
  EXPECT_GT(connected.load(), WatchdogListener::kMaxPending) << "the flood did not reach the cap";
  std::printf("flood: %d stranger connections; registration attempts per rank: %d %d %d\n",
              connected.load(), regs[1].attempts, regs[2].attempts, regs[3].attempts);
  f.disarmed.store(true);
  for (auto& v : held)
    for (int c : v) ::close(c);
  for (int rank = 1; rank < ListenerFixture::kWorld; ++rank) ::close(regs[size_t(rank)].fd);
}

// ---- the worker's side ----------------------------------------------------------------

// A stand-in for rank 0 on a plain socket: accepts one connection per entry of `answer`,
// reads a hello from it, then answers kWatchdogRegistered (true) or closes it (false). The
// hellos it read, in order; the last connection is kept open until the object goes away.
struct FakeRank0 {
  int port = 0;
  int listen_fd;
  std::vector<WatchdogHello> hellos;
  int last = -1;
  std::thread thread;
  explicit FakeRank0(std::vector<bool> answer) : listen_fd(listen_loopback(&port)) {
    thread = std::thread([this, answer] {
      for (bool ok : answer) {
        pollfd p{listen_fd, POLLIN, 0};
        if (::poll(&p, 1, 5000) != 1) return;  // the worker gave up: the test fails, no hang
        const int c = ::accept(listen_fd, nullptr, nullptr);
        if (c < 0) return;
        WatchdogHello h;
        if (::recv(c, &h, sizeof(h), MSG_WAITALL) != ssize_t(sizeof(h))) return;
        hellos.push_back(h);
        if (ok) ::send(c, &kWatchdogRegistered, 1, MSG_NOSIGNAL);
        if (!ok) ::close(c); else last = c;
      }
    });
  }
  void wait() {
    if (thread.joinable()) thread.join();
  }
  ~FakeRank0() {
    wait();
    if (last >= 0) ::close(last);
    ::close(listen_fd);
  }
};

TEST(WatchdogRegistration, ConnectsAgainWhenDroppedBeforeTheAnswer) {
  WatchdogHello h;
  h.rank = 3;
  h.pid = 77;
  WatchdogRegistration reg;
  {
    FakeRank0 rank0({false, false, true});
    reg = register_with_watchdog(INADDR_LOOPBACK, rank0.port, h, 10000);
    rank0.wait();
    ASSERT_EQ(rank0.hellos.size(), 3u);
    for (const WatchdogHello& got : rank0.hellos) {
      EXPECT_EQ(got.rank, 3);
      EXPECT_EQ(got.pid, 77);
    }
  }
  EXPECT_TRUE(reg.registered) << reg.why;
  EXPECT_EQ(reg.attempts, 3);
  EXPECT_GE(reg.fd, 0);
  ::close(reg.fd);
}

TEST(WatchdogRegistration, NothingListeningGivesUpAtTheDeadline) {
  int port = 0;
  ::close(listen_loopback(&port));  // a port nobody listens on
  WatchdogHello h;
  h.rank = 1;
  const auto t0 = std::chrono::steady_clock::now();
  const WatchdogRegistration reg = register_with_watchdog(INADDR_LOOPBACK, port, h, 300);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(reg.registered);
  EXPECT_EQ(reg.fd, -1);
  EXPECT_EQ(reg.attempts, 0);
  EXPECT_NE(reg.why.find("connect"), std::string::npos) << reg.why;
  EXPECT_GE(s, 0.25);  // it kept trying until the deadline
  EXPECT_LT(s, 3.0);
}

// Rank 0 takes the hello but never answers: the connection is kept (closing it could read as
// this rank's death later), with heartbeats sent while waiting.
TEST(WatchdogRegistration, AnUnansweredConnectionIsKeptNotClosed) {
  int port = 0;
  const int listen_fd = listen_loopback(&port);
  WatchdogHello h;
  h.rank = 2;
  const WatchdogRegistration reg = register_with_watchdog(INADDR_LOOPBACK, port, h, 1200);
  EXPECT_FALSE(reg.registered);
  EXPECT_EQ(reg.attempts, 1);
  ASSERT_GE(reg.fd, 0);
  const int c = ::accept(listen_fd, nullptr, nullptr);  // it waited in the backlog
  ASSERT_GE(c, 0);
  std::vector<char> got(sizeof(WatchdogHello) + 8);
  const ssize_t n = ::recv(c, got.data(), got.size(), MSG_DONTWAIT);
  ASSERT_GE(n, ssize_t(sizeof(WatchdogHello) + 1)) << "the hello and at least one heartbeat";
  EXPECT_EQ(got[sizeof(WatchdogHello)], 'h');
  EXPECT_FALSE(closed_by_peer(c, 50));
  ::close(reg.fd);
  ::close(c);
  ::close(listen_fd);
}

}  // namespace
}  // namespace cpinfer
