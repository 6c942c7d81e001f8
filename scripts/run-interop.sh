#!/usr/bin/env bash
# Runs the interop tests (tests/interop) with the real agents inside a new network namespace
# whose only interface is loopback, so nothing an agent does can leave the machine. Extra
# arguments go to pytest. Needs root (or unprivileged user namespaces), util-linux `unshare` and
# iproute2 `ip`; install the agents first with scripts/install-agents.sh (ACP_FAST_AGENTS
# overrides where they are). Where no namespace can be made, the tests run outside one: the
# replay tests pass and the real-agent tests are skipped with one line saying why. Arguments
# naming files or tests under tests/interop run only those (`run-interop.sh
# tests/interop/test_v2_agents.py -x`); otherwise the whole folder runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

where=(tests/interop)
for argument in "$@"; do
  case "$argument" in tests/interop/*) where=() ;; esac
done

python="${PYTHON:-$(command -v python || command -v python3)}"
problem=""
netns=(unshare -n)
if [ "$(id -u)" != 0 ]; then
  netns=(unshare -r -n)  # map ourselves to root in a new user namespace to get a network one
fi
if ! command -v unshare >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
  problem="cannot create a network namespace: unshare (util-linux) or ip (iproute2) not found"
elif ! error="$("${netns[@]}" -- sh -c 'ip link set lo up' 2>&1)"; then
  problem="cannot create a network namespace here (${netns[*]}: ${error//$'\n'/ })"
fi

if [ -n "$problem" ]; then
  echo "run-interop: $problem; running without the real agents" >&2
  ACP_FAST_NETNS_PROBLEM="$problem" exec "$python" -m pytest "${where[@]}" "$@"
fi
exec "${netns[@]}" -- sh -c 'ip link set lo up && exec "$0" -m pytest "$@"' \
  "$python" "${where[@]}" "$@"
