# Sourced by the benchmark scripts that report other processes' CPU time during a run.
# busy_jiffies: CPU time of the whole machine so far (/proc/stat: user, nice, system, irq,
# softirq), in jiffies. tree_jiffies PID: CPU time of process PID and all its descendants.
busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
tree_jiffies() {
  local pids total=0 p
  pids=$(ps -e -o pid=,ppid= | awk -v root="$1" '
    { parent[$1] = $2 } END { for (p in parent) { q = p; while (q != "" && q != root && q in parent && q != 1) q = parent[q]; if (q == root) print p } }')
  for p in $pids; do [[ -r /proc/$p/stat ]] && total=$((total + $(awk '{print $14+$15}' "/proc/$p/stat"))); done
  echo "$total"
}
