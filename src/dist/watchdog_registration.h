// A worker rank's side of the watchdog registration (rank 0's side: dist/watchdog_listener.h).
// Plain POSIX sockets, no MPI, so it is tested with plain sockets (tests/unit/watchdog_test.cpp).
//
// The worker connects to rank 0's watchdog port, sends its WatchdogHello and waits for rank
// 0's one-byte answer (kWatchdogRegistered). Strangers may flood the port while the ranks
// register: rank 0 then drops the oldest connections that have not completed a hello, and a
// real rank's connection can be among them. Such a connection is closed by rank 0 before
// any answer, so the worker connects again and resends; only after the answer does a closed
// connection mean that rank 0 is gone. A connection that stays open without an answer is
// never given up by the worker (rank 0 may be slow: closing a registered connection would
// read as this rank's death), it just waits, sending heartbeats, until the deadline.
#pragma once
#include <cstdint>
#include <string>

#include "dist/watchdog_listener.h"

namespace cpinfer {

struct WatchdogRegistration {
  // The connection: registered (rank 0 answered), or, when not, still open and unanswered at
  // the deadline (kept: closing it would read as a death if rank 0 registers it later);
  // -1: no connection left at the deadline.
  int fd = -1;
  bool registered = false;
  int attempts = 0;  // connections that sent the hello
  std::string why;   // when not registered: what happened last
};

// Registers `hello` with the watchdog at ip:port (IPv4, host byte order), retrying (a refused
// or failed connect, a connection closed before the answer) until timeout_ms has passed. While it waits for the answer it sends a heartbeat byte every
// WatchdogListener::kHeartbeatIntervalMs (rank 0 reads them as heartbeats once registered).
WatchdogRegistration register_with_watchdog(uint32_t ip, int port, const WatchdogHello& hello,
                                            int timeout_ms);

}  // namespace cpinfer
