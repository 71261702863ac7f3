// Rank liveness for a multi-rank server: a side channel beside MPI that notices within
// milliseconds when a rank's process dies (SIGKILL, crash, OOM kill), without any cost on
// the step path and without calling MPI from a second thread (comm.cpp initialises
// MPI_THREAD_SERIALIZED).
//
// Rank 0 listens on one TCP port of one address (dist/watchdog_address.h: 127.0.0.1 when
// every rank shares its network stack, otherwise the ranks' own interface), never on every
// interface. start() broadcasts the address, the port and a random 32-byte secret once over
// MPI (a collective at start-up, from the main thread); every other rank connects from a
// watchdog thread and sends a hello with its rank, pid, host and the secret. Rank 0 accepts
// each rank once, only with the secret (dist/watchdog_listener.h), answers with one byte (a
// worker dropped before it connects again: dist/watchdog_registration.h), and closes the port
// when all have registered. After the hello a worker sends only heartbeats (one byte every
// 500 ms from its watchdog thread); rank 0 sends nothing else. The kernel closes the connection
// when a process ends, however it ends, so rank 0 sees EOF on the dead rank's socket (and a
// worker on rank 0's). TCP keepalive (2 s idle, 1 s interval, 5 probes) covers a host that
// vanishes without closing. A rank whose heartbeats stop for heartbeat_timeout_s while its
// connection stays open is stopped (SIGSTOP, a debugger) or starved: rank 0 reports it as
// not responding. (A stopped rank 0 stops the HTTP server with it; the workers wait.)
//
// On rank 0 the loss of rank r calls `on_lost(r, description)` on the watchdog thread, with
// description "died (pid P on HOST)" (its connection closed), "is unreachable (pid P on
// HOST: ...)" (keepalive probes unanswered) or "is not responding (pid P on HOST: no
// heartbeat for S s ...)"; the caller fails the server and exits. On another
// rank the loss of rank 0 prints "cpinfer: rank R: lost rank 0 (...); exiting", saying which
// of the two it was, and ends the process (_exit(1)): rank 0 exiting after a failure thus
// takes down every rank still blocked in a collective, and a rank cut off from rank 0 ends
// by itself.
// disarm() before a normal shutdown, so that ranks leaving cleanly are not reported.
#pragma once
#include <functional>
#include <string>

namespace cpinfer {

class Comm;

using RankLostFn = std::function<void(int rank, const std::string& description)>;

struct WatchdogOptions {
  // "" picks the address by the rules of dist/watchdog_address.h; else an IPv4 address or an
  // interface name of rank 0's host.
  std::string address;
  int port = 0;  // 0: any free port (logged at start)
  // A worker silent for longer (no heartbeat) is lost; 0: never (only deaths and cut links).
  double heartbeat_timeout_s = 5.0;
};

// Collective over the world (every rank, main thread, once). No-op for a world of one.
// If the side channel cannot be set up (no socket, no route to rank 0) it logs a warning and
// the job runs without it (mpirun's own error handling still ends a failed job).
// An explicit options.address that rank 0's host lacks is an Error on every rank.
void start_rank_watchdog(Comm& comm, const WatchdogOptions& options, RankLostFn on_lost);
// A normal shutdown is under way: connections closing from now on are not failures.
void disarm_rank_watchdog();
bool rank_watchdog_disarmed();

}  // namespace cpinfer
