#!/usr/bin/env bash
# Restarts the nodes of a Ferry cluster one by one, each only once the
# cluster says it is safe to stop, and waits for it to be back and for
# every partition to have its caught-up replicas again before the next.
#
#   RESTART='systemctl restart ferryd@{}' scripts/rolling-restart.sh node1 node2 node3
#
# RESTART is run through the shell with {} replaced by the node id; it must
# stop the node with SIGTERM (the node hands its leaderships over first)
# and start it again. The ferry CLI (FERRY in the environment, default
# ./bin/ferry) reaches the cluster the usual way (-s / FERRY_SERVERS, TLS
# and token flags in FERRY_ARGS). WAIT bounds each wait, in seconds
# (default 120). Needs jq.
set -euo pipefail

ferry=${FERRY:-./bin/ferry}
read -r -a args <<<"${FERRY_ARGS:-}"
wait_max=${WAIT:-120}
: "${RESTART:?set RESTART to the command that restarts one node, with {} for its id}"
[ $# -gt 0 ] || { echo "usage: RESTART='cmd {}' $0 NODE..." >&2; exit 2; }

# until CMD... retries CMD every half second for wait_max seconds.
until_ok() {
  local what=$1; shift
  local deadline=$((SECONDS + wait_max))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "rolling restart: gave up after ${wait_max}s waiting for: $what" >&2
      return 1
    fi
    sleep 0.5
  done
}

# back ID: the node is alive, and no partition is under-replicated or
# moving.
back() {
  "$ferry" "${args[@]}" node ls --json | jq -e --arg id "$1" '
    (.nodes[] | select(.id == $id) | .state == "alive") and .under_replicated_total == 0 and .moves_in_flight == 0' >/dev/null
}

for id in "$@"; do
  echo "== $id: waiting until it is safe to stop"
  until_ok "$id safe to stop" "$ferry" "${args[@]}" node safe-to-stop "$id"
  echo "== $id: restarting"
  started=$SECONDS
  sh -c "${RESTART//\{\}/$id}"
  until_ok "$id back with every partition caught up" back "$id"
  echo "== $id: back after $((SECONDS - started))s"
done
echo "rolling restart done: $# nodes"
