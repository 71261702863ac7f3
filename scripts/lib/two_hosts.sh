# Sourced by scripts that run an MPI job on two "hosts" of one machine: two network
# namespaces joined by a veth pair (tests/cli/mpi_two_namespace_test.sh,
# bench/scripts/cp_emulated_links.sh). The caller sets NS_A NS_B (namespaces), VETH_A VETH_B
# (the pair's ends) and IP_A IP_B (their addresses in a /24), creates the namespaces and the
# pair, then calls:
#   two_hosts_wire          move each end into its namespace, address it, bring links up
#   two_hosts_agent FILE    write OpenMPI's "remote shell" (plm_rsh_agent): it runs the
#                           daemon for host IP_A / IP_B with `ip netns exec` (no sshd)
#   two_hosts_cleanup       kill what still runs in the namespaces, delete them and the pair
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

two_hosts_cleanup() {
  local ns pid
  for ns in "$NS_A" "$NS_B"; do
    # Leftover processes (a failed run's daemons) would keep the namespace busy.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "$VETH_A" 2>/dev/null || true
}
