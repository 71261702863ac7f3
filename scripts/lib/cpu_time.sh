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
# own_jiffies: user + system CPU time of the calling shell's waited-for children so far, in
# jiffies, into $own. `times` runs in this shell, into a file (in a command substitution or a
# pipe it would run in a subshell, whose children are none).
own_jiffies() {
  local f
  f=$(mktemp)
  times >"$f"
  own=$(tail -1 "$f" | awk -v c="$(getconf CLK_TCK)" '{ s = 0; for (i = 1; i <= 2; ++i) {
    split($i, a, "m"); s += a[1] * 60 + a[2] } printf "%d", s * c }')
  rm -f "$f"
}
