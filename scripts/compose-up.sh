#!/usr/bin/env bash
# Starts deploy/compose.yaml's three-node cluster (`make compose-up`):
# builds the image (scripts/image.sh) unless FERRY_SKIP_IMAGE=1, starts the
# cluster in the background, waits until node1 is ready, and copies the CA,
# the admin token and the SQS key to data/compose/ with an env file for the
# ferry CLI on this host:
#
#   scripts/compose-up.sh
#   set -a; . data/compose/ferry.env; set +a; ./bin/ferry cluster status
#
# `scripts/compose-up.sh down` stops the cluster (data stays in the named
# volumes); `scripts/compose-up.sh down -v` removes them too. Any other
# arguments go to the compose tool as they are (logs, ps, exec node1 ...).
# The compose tool is $COMPOSE if set, else the first that works of
# `docker compose`, `podman compose`, podman-compose (1.0.4 or later) and
# docker-compose; the last two talk to podman's API socket when there is no
# Docker daemon.
set -euo pipefail
cd "$(dirname "$0")/.."

file=deploy/compose.yaml

# docker-compose and `docker compose` talk to the Docker API: without a
# Docker daemon, podman's API socket serves it (podman system service).
if [ -z "${DOCKER_HOST:-}" ] && [ ! -S /var/run/docker.sock ]; then
  for s in /run/podman/podman.sock "${XDG_RUNTIME_DIR:-/nonexistent}/podman/podman.sock"; do
    if [ -S "$s" ]; then export DOCKER_HOST=unix://$s; break; fi
  done
fi

# podman_compose_ok: podman-compose is installed and 1.0.4 or later (1.0.3
# cannot give a service a fixed IP on a network).
podman_compose_ok() {
  command -v podman-compose >/dev/null 2>&1 || return 1
  local v
  v=$(podman-compose version 2>/dev/null | sed -n 's/^podman-compose[a-z]* version  *\([0-9.]*\).*/\1/p' | head -1)
  [ -n "$v" ] && [ "$(printf '%s\n1.0.4\n' "$v" | sort -V | head -1)" = 1.0.4 ]
}

if [ -n "${COMPOSE:-}" ]; then
  read -r -a compose <<< "$COMPOSE"
elif command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
elif command -v podman >/dev/null 2>&1 && podman compose version >/dev/null 2>&1; then
  compose=(podman compose)
elif podman_compose_ok; then
  compose=(podman-compose)
elif command -v docker-compose >/dev/null 2>&1; then
  compose=(docker-compose)
else
  cat >&2 <<'MSG'
compose-up.sh: no compose tool that can give services fixed IPs. Install one of:
  docker compose (v2), podman-compose 1.0.4 or later, or docker-compose (Debian:
  apt-get install docker-compose) with podman's API socket:
    podman system service --time=0 unix:///run/podman/podman.sock &
or name yours in COMPOSE.
MSG
  exit 1
fi
compose+=(-p "${FERRY_COMPOSE_PROJECT:-ferry}" -f "$file")

if [ $# -gt 0 ]; then
  exec "${compose[@]}" "$@"
fi

if [ "${FERRY_SKIP_IMAGE:-}" != 1 ]; then
  scripts/image.sh
fi
# Up unless node1 already runs (docker-compose 1.x on podman's API refuses a
# second `up` while the network exists).
if [ -z "$("${compose[@]}" ps -q node1 2>/dev/null)" ]; then
  "${compose[@]}" up -d
fi

# node1's /readyz, checked from its own container (its IP, its CA).
ready=
for _ in $(seq 1 120); do
  if "${compose[@]}" exec -T node1 sh -c 'ferry health --timeout 2s --url "https://$FERRY_IP:7201/readyz"' >/dev/null 2>&1; then
    ready=1
    break
  fi
  sleep 1
done
if [ -z "$ready" ]; then
  echo "compose-up.sh: node1 not ready after 2 minutes; see: ${compose[*]} logs" >&2
  exit 1
fi

out=data/compose
mkdir -p "$out"
(
  umask 077
  for f in ca.pem admin.token sqs.env; do
    "${compose[@]}" exec -T node1 cat "/pki/$f" > "$out/$f"
  done
  cat > "$out/ferry.env" <<ENV
FERRY_SERVERS=127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103
FERRY_CA=$PWD/$out/ca.pem
FERRY_TOKEN_FILE=$PWD/$out/admin.token
ENV
)

cat <<TXT

Ferry is running in containers: node1..node3 serve clients on 127.0.0.1:7101-7103,
HTTP admin (HTTPS) on 127.0.0.1:7201-7203 and SQS on 127.0.0.1:7401-7403.
The CA, admin token and SQS key are in $out/. From this host:

  set -a; . $out/ferry.env; set +a
  ./bin/ferry cluster status

From inside the cluster's network (no files needed):

  ${compose[*]} exec node1 ferry cluster status

Stop it with: scripts/compose-up.sh down   (add -v to delete the data too)
TXT
