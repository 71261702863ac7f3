# Sourced by the scripts that start `cpinfer serve` in the background (tests/cli, bench/scripts).
#
# wait_for_server PID LOG NAME [SECONDS]: waits until LOG (the server's output) says
# "listening on", at most SECONDS (default 60); sets URL to the address it printed
# (http://127.0.0.1:PORT). Fails if process PID exits first or no address appears, through
# the caller's fail() if it has one (which may print more), else with a message and exit 1.
wait_for_server() {
  local pid=$1 log=$2 name=$3 seconds=${4:-60} _
  for _ in $(seq $((seconds * 10))); do
    grep -q "listening on" "$log" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || _wait_for_server_fail "server $name exited at start-up" "$log"
    sleep 0.1
  done
  URL=$(grep -o "http://[0-9.]*:[0-9]*" "$log" | head -1)
  [[ -n "$URL" ]] || _wait_for_server_fail "server $name did not start in ${seconds} s" "$log"
}

_wait_for_server_fail() {
  if declare -F fail >/dev/null; then fail "$1"; fi
  echo "FAIL: $1" >&2
  tail -20 "$2" >&2 || true
  exit 1
}
