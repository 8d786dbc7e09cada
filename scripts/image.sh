#!/usr/bin/env bash
# Builds Ferry's container image from the Containerfile with podman or
# buildah, whichever is installed (FERRY_ENGINE picks one), tags it
# $FERRY_IMAGE (default localhost/ferry:latest) and prints its size.
#
#   scripts/image.sh               build the image (`make image`)
#   scripts/image.sh rootfs DIR    lay the image's files out in DIR: in
#                                  DIR/system static ferryd and ferry,
#                                  busybox, /etc/passwd; in DIR/state the
#                                  directories that the image's user owns,
#                                  /data and /pki (the Containerfile's
#                                  builder stage runs this)
#
# With Go on this machine (FERRY_IMAGE_BUILD=local, the default when go is
# on PATH) the binaries are built here and handed to the Containerfile as
# its builder stage (--build-context builder=DIR): the final stage is FROM
# scratch, so nothing is pulled and no registry is needed. Busybox comes
# from Debian's busybox-static package (FERRY_BUSYBOX names another static
# busybox). FERRY_IMAGE_BUILD=container builds everything inside the
# golang image instead, which needs a registry to pull it from.
set -euo pipefail
cd "$(dirname "$0")/.."

# The image's user and group: ferry, 65532 (no login, home /data).
ferry_uid=65532

die() {
  echo "image.sh: $*" >&2
  exit 1
}

# rootfs lays out the final image's files in $1/system and, for those its
# user owns, $1/state (COPY --chown changes what it copies, not the
# directories it copies into).
rootfs() {
  local top=$1 dir=$1/system bb=${FERRY_BUSYBOX:-/bin/busybox}
  [ -x "$bb" ] || die "no busybox at $bb: install it (Debian: apt-get install busybox-static) or set FERRY_BUSYBOX"
  if ldd "$bb" >/dev/null 2>&1; then
    die "$bb is linked dynamically and would not run FROM scratch: install busybox-static (Debian: apt-get install busybox-static)"
  fi
  if [ -e "$top" ] && [ -n "$(ls -A "$top")" ]; then
    die "rootfs: $top is not empty"
  fi
  mkdir -p "$dir/usr/local/bin" "$dir/bin" "$dir/etc" "$dir/tmp" "$top/state/data" "$top/state/pki"
  CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$dir/usr/local/bin/" ./cmd/ferryd ./cmd/ferry
  cp "$bb" "$dir/bin/busybox"
  local applet
  for applet in $("$bb" --list); do
    [ -e "$dir/bin/$applet" ] || ln -s busybox "$dir/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/false\nferry:x:%d:%d:ferry:/data:/bin/false\n' "$ferry_uid" "$ferry_uid" > "$dir/etc/passwd"
  printf 'root:x:0:\nferry:x:%d:\n' "$ferry_uid" > "$dir/etc/group"
  chmod 1777 "$dir/tmp"
}

if [ "${1:-}" = rootfs ]; then
  [ $# -eq 2 ] || die "usage: scripts/image.sh rootfs DIR"
  rootfs "$2"
  exit 0
fi
[ $# -eq 0 ] || die "usage: scripts/image.sh [rootfs DIR]"

image=${FERRY_IMAGE:-localhost/ferry:latest}
engine=${FERRY_ENGINE:-}
if [ -z "$engine" ]; then
  for e in podman buildah; do
    if command -v "$e" >/dev/null 2>&1; then engine=$e; break; fi
  done
fi
case "$engine" in
  podman) build=(podman build) ;;
  buildah) build=(buildah build) ;;
  "") die "neither podman nor buildah is installed (Debian: apt-get install podman, or buildah)" ;;
  *) die "FERRY_ENGINE=$engine: want podman or buildah" ;;
esac

mode=${FERRY_IMAGE_BUILD:-}
if [ -z "$mode" ]; then
  mode=container
  if command -v go >/dev/null 2>&1; then mode=local; fi
fi
# --format docker: the OCI format has no HEALTHCHECK.
args=(--format docker -f Containerfile -t "$image")
case "$mode" in
  local)
    ctx=$(mktemp -d)
    trap 'rm -rf "$ctx"' EXIT
    rootfs "$ctx/rootfs"
    args+=(--build-context "builder=$ctx")
    ;;
  container) ;;
  *) die "FERRY_IMAGE_BUILD=$mode: want local or container" ;;
esac
"${build[@]}" "${args[@]}" .

if [ "$engine" = podman ]; then
  bytes=$(podman image inspect --format '{{.Size}}' "$image")
  awk -v img="$image" -v b="$bytes" 'BEGIN { printf "image %s: %.1f MB (%d bytes)\n", img, b / 1e6, b }'
else
  echo "image $image: $(buildah images --noheading --format '{{.Size}}' "$image")"
fi
