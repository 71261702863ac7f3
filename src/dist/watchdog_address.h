// Where rank 0's watchdog listens (dist/watchdog.h): the one IPv4 address the ranks use to
// reach each other, never every interface.
//
//   1. --watchdog-address ADDR|IFNAME, when given: that address, or the interface's first
//      IPv4 address (an error when this host has neither).
//   2. every rank on rank 0's network stack (same kernel boot and network namespace):
//      127.0.0.1.
//   3. OpenMPI's TCP interface selection, OMPI_MCA_btl_tcp_if_include (what `mpirun --mca
//      btl_tcp_if_include eth1` or `... 10.0.0.0/24` sets in every rank's environment): the
//      first local IPv4 address on a listed interface or inside a listed subnet.
//   4. the IPv4 address that rank 0's host name resolves to, when it is a local address.
//   Otherwise none: the job runs without the side channel (with a warning).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cpinfer {

// One IPv4 address of this host, as getifaddrs lists it.
struct LocalAddress {
  std::string interface;  // "eth0"
  uint32_t ip = 0;        // host byte order: 10.0.0.1 is 0x0A000001
};

// Identifies the network stack this process runs on: the kernel's boot id and the network
// namespace ("<boot id>/net:[4026531840]"). Two processes with equal ids reach each other
// on 127.0.0.1; processes in different namespaces of one machine (or on two machines) do not.
std::string network_stack_id();

std::vector<LocalAddress> local_ipv4_addresses();

// "10.1.2.3" -> 0x0A010203; nullopt when `text` is not a dotted IPv4 address.
std::optional<uint32_t> parse_ipv4(const std::string& text);
std::string format_ipv4(uint32_t ip);
// Whether `ip` lies in "A.B.C.D/N" (N in 0..32); nullopt when `cidr` is not of that form.
std::optional<bool> ipv4_in_cidr(uint32_t ip, const std::string& cidr);

// Rule 3 for a given btl_tcp_if_include value ("eth1,10.0.0.0/24"): the first of `local`
// (in order) on a listed interface or in a listed subnet; nullopt when none is.
std::optional<uint32_t> address_for_if_include(const std::string& if_include,
                                               const std::vector<LocalAddress>& local);

// Rank 0's choice by rules 1-4 above. `all_on_one_stack`: every rank's network_stack_id()
// equals rank 0's. Throws an Error for an explicit `requested` address this host lacks.
// On nullopt, *why says why no address fits.
std::optional<uint32_t> choose_watchdog_address(const std::string& requested,
                                                bool all_on_one_stack, std::string* why);

}  // namespace cpinfer
