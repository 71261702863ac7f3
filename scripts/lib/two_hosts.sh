# Sourced by scripts that run an MPI job on two "hosts" of one machine: two network
# namespaces joined by a veth pair (tests/cli/mpi_two_namespace_test.sh,
# bench/scripts/cp_emulated_links.sh, bench/scripts/fault_table.sh). The caller sets NS_A
# NS_B (namespaces), VETH_A VETH_B (the pair's ends), IP_A IP_B (their addresses in a /24)
# and SUBNET (that /24), then calls:
#   two_hosts_up [OPT...]   create the namespaces and the pair (OPT: `ip link add` options
#                           for both ends, e.g. mtu 9000), then two_hosts_wire; or create
#                           them itself (to handle errors) and call:
#   two_hosts_wire          move each end into its namespace, address it, bring links up
#   two_hosts_agent FILE    write OpenMPI's "remote shell" (plm_rsh_agent): it runs the
#                           daemon for host IP_A / IP_B with `ip netns exec` (no sshd)
#   two_hosts_mpirun DIR SLOTS [YIELD]  write DIR/agent.sh (two_hosts_agent) and DIR/hosts
#                           (SLOTS per host) and set the array MPIRUN: mpirun started in NS_A,
#                           TCP only on SUBNET for MPI (btl) and the daemons (oob), no binding,
#                           mpi_yield_when_idle YIELD (default 1); the caller appends -np,
#                           mapping, the command. YIELD 1 when the ranks' threads outnumber the
#                           CPUs (both "hosts" share this machine's); 0 otherwise, as cpinfer's
#                           own launcher does: a waiting rank's stream of sched_yield calls slows
#                           the rank computing on the next core (docs/multi-node.md)
#   two_hosts_cleanup       kill what still runs in the namespaces, delete them and the pair
two_hosts_up() {
  ip netns add "$NS_A"
  ip netns add "$NS_B"
  ip link add "$VETH_A" "$@" type veth peer name "$VETH_B" "$@"
  two_hosts_wire
}

two_hosts_wire() {
  ip link set "$VETH_A" netns "$NS_A"
  ip link set "$VETH_B" netns "$NS_B"
  ip -n "$NS_A" addr add "$IP_A/24" dev "$VETH_A"
  ip -n "$NS_B" addr add "$IP_B/24" dev "$VETH_B"
  local ns
  for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
  ip -n "$NS_A" link set "$VETH_A" up
  ip -n "$NS_B" link set "$VETH_B" up
}

two_hosts_agent() {
  cat >"$1" <<AGENT
#!/bin/sh
host=\$1; shift
case "\$host" in
  $IP_A) ns=$NS_A ;;
  $IP_B) ns=$NS_B ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
  chmod +x "$1"
}

two_hosts_mpirun() {
  two_hosts_agent "$1/agent.sh"
  printf '%s slots=%s\n%s slots=%s\n' "$IP_A" "$2" "$IP_B" "$2" >"$1/hosts"
  MPIRUN=(ip netns exec "$NS_A" mpirun --hostfile "$1/hosts" --bind-to none
          --mca plm_rsh_agent "$1/agent.sh"
          --mca btl tcp,self --mca btl_tcp_if_include "$SUBNET" --mca oob_tcp_if_include "$SUBNET"
          --mca mpi_yield_when_idle "${3:-1}")
}

two_hosts_cleanup() {
  local ns pid
  for ns in "$NS_A" "$NS_B"; do
    # Leftover processes (a failed run's daemons) would keep the namespace busy.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "$VETH_A" 2>/dev/null || true
}
