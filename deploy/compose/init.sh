#!/bin/sh
# One-shot setup of the compose cluster's shared material in /pki (a named
# volume, mounted read-only by the nodes): a throwaway CA and a certificate
# for every node naming PKI_HOSTS (service names and fixed IPs), the gossip
# keyring and an admin token with an SQS key. It runs in the Ferry image
# (busybox sh) as uid 65532 on every `up`, and creates only what is missing:
# after changing PKI_HOSTS or the node IPs, remove the pki volume
# (`down -v` removes every volume, data included).
set -eu
dir=${PKI_DIR:-/pki}
: "${PKI_NODES:?PKI_NODES names the node ids}"
: "${PKI_HOSTS:?PKI_HOSTS names the hosts every node certificate is valid for}"

ferryd dev-pki -dir "$dir" -nodes "$PKI_NODES" -hosts "$PKI_HOSTS"

umask 077
if [ ! -s "$dir/gossip.key" ]; then
  head -c 32 /dev/urandom | base64 > "$dir/gossip.key.new"
  mv "$dir/gossip.key.new" "$dir/gossip.key"
  echo "created $dir/gossip.key"
fi
if [ ! -s "$dir/admin.token" ] || [ ! -s "$dir/sqs.env" ]; then
  rm -f "$dir/tokens.json" "$dir/admin.token" "$dir/sqs.env"
  ferryd token -name admin -cluster admin -file "$dir/tokens.json" \
    -secret-file "$dir/admin.token" -sqs -sqs-env-file "$dir/sqs.env"
fi
