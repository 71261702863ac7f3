#include "server/listen_backlog.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>

namespace cpinfer {

namespace {
// The local port of socket fd, or -1 (not an IPv4/IPv6 socket, or not a socket at all).
int local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return -1;
}
}  // namespace

int raise_listen_backlog(int port, int backlog) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  int changed = 0;
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == ::dirfd(dir)) continue;  // ".", "..", ours
    // Any other descriptor fails one of these harmlessly (ENOTSOCK, or not listening).
    int listening = 0;
    socklen_t len = sizeof listening;
    if (::getsockopt(int(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening)
      continue;
    if (local_port(int(fd)) != port) continue;
    if (::listen(int(fd), backlog) == 0) ++changed;
  }
  ::closedir(dir);
  return changed;
}

}  // namespace cpinfer
