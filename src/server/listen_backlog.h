// The API socket's accept queue. cpp-httplib 0.11 (Debian's build) listens with a backlog of
// 5, fixed when the library was compiled, and gives no handle on its socket. Under load on a
// busy host (32 streaming clients reconnecting every few requests while the ranks keep both
// cores busy, so the accept thread waits for a core) five pending connections fill the queue:
// the kernel then drops handshakes (counter TcpExtListenOverflows in `nstat`). Linux lets
// listen() be called again on a listening socket to change its backlog, so the server finds
// its own socket and does that right after binding.
#pragma once

namespace cpinfer {

// The backlog the API server asks for (uvicorn's default; the kernel caps it at
// net.core.somaxconn).
inline constexpr int kApiListenBacklog = 2048;

// Calls listen(fd, backlog) on every listening TCP socket of this process bound to `port`
// (found among /proc/self/fd). Returns how many it changed (0: none found, or /proc absent).
int raise_listen_backlog(int port, int backlog);

}  // namespace cpinfer
