// See watchdog_address.h.
#include "dist/watchdog_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace cpinfer {

namespace {

std::string read_first_line(const char* path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

std::string link_target(const char* path) {
  char buf[256] = {};
  const ssize_t n = ::readlink(path, buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

bool is_loopback(uint32_t ip) { return (ip >> 24) == 127; }

bool is_local(uint32_t ip, const std::vector<LocalAddress>& local) {
  for (const LocalAddress& a : local)
    if (a.ip == ip) return true;
  return false;
}

}  // namespace

std::string network_stack_id() {
  return read_first_line("/proc/sys/kernel/random/boot_id") + "/" + link_target("/proc/self/ns/net");
}

std::vector<LocalAddress> local_ipv4_addresses() {
  std::vector<LocalAddress> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* p = list; p; p = p->ifa_next) {
    if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET || !(p->ifa_flags & IFF_UP)) continue;
    const auto* sin = reinterpret_cast<const sockaddr_in*>(p->ifa_addr);
    out.push_back({p->ifa_name ? p->ifa_name : "", ntohl(sin->sin_addr.s_addr)});
  }
  ::freeifaddrs(list);
  return out;
}

std::optional<uint32_t> parse_ipv4(const std::string& text) {
  in_addr a{};
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

std::string format_ipv4(uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 255) + "." +
         std::to_string((ip >> 8) & 255) + "." + std::to_string(ip & 255);
}

std::optional<bool> ipv4_in_cidr(uint32_t ip, const std::string& cidr) {
  const size_t slash = cidr.find('/');
  if (slash == std::string::npos) return std::nullopt;
  const std::optional<uint32_t> net = parse_ipv4(cidr.substr(0, slash));
  const std::string bits_text = cidr.substr(slash + 1);
  if (!net || bits_text.empty() || bits_text.size() > 2 ||
      bits_text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const int bits = std::atoi(bits_text.c_str());
  if (bits > 32) return std::nullopt;
  // /24 keeps the top 24 bits: mask 0xFFFFFF00 (a shift by 32 is undefined, hence /0 apart).
  const uint32_t mask = bits == 0 ? 0u : ~uint32_t(0) << (32 - bits);
  return (ip & mask) == (*net & mask);
}

std::optional<uint32_t> address_for_if_include(const std::string& if_include,
                                               const std::vector<LocalAddress>& local) {
  std::stringstream items(if_include);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    for (const LocalAddress& a : local) {
      const std::optional<bool> in = ipv4_in_cidr(a.ip, item);
      if (in ? *in : a.interface == item) return a.ip;
    }
  }
  return std::nullopt;
}

std::optional<uint32_t> choose_watchdog_address(const std::string& requested,
                                                bool all_on_one_stack, std::string* why) {
  const std::vector<LocalAddress> local = local_ipv4_addresses();
  if (!requested.empty()) {
    if (const std::optional<uint32_t> ip = parse_ipv4(requested)) {
      CPI_CHECK(is_local(*ip, local),
                "--watchdog-address {}: no interface of this host (rank 0's) has that address",
                requested);
      return ip;
    }
    for (const LocalAddress& a : local)
      if (a.interface == requested) return a.ip;
    fail("--watchdog-address {}: neither an IPv4 address nor an interface with an IPv4 "
             "address on this host (rank 0's)", requested);
  }
  if (all_on_one_stack) return parse_ipv4("127.0.0.1");
  if (const char* inc = std::getenv("OMPI_MCA_btl_tcp_if_include"); inc && *inc) {
    if (const std::optional<uint32_t> ip = address_for_if_include(inc, local)) return ip;
    *why = std::string("no local IPv4 address matches OMPI_MCA_btl_tcp_if_include=") + inc;
    return std::nullopt;
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (::getaddrinfo(host, nullptr, &hints, &res) == 0) {
    for (addrinfo* p = res; p; p = p->ai_next) {
      const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(p->ai_addr)->sin_addr.s_addr);
      if (!is_loopback(ip) && is_local(ip, local)) {
        ::freeaddrinfo(res);
        return ip;
      }
    }
    ::freeaddrinfo(res);
  }
  *why = std::string("the ranks span several hosts and the host name '") + host +
         "' resolves to no local non-loopback IPv4 address (set --watchdog-address)";
  return std::nullopt;
}

}  // namespace cpinfer
