#!/bin/bash
# Everything the VMs install, made on the host because the VMs have no internet:
#   wheels/   the project and its dependencies (`pip wheel`), for a venv in every VM
#   debs/     Docker's .deb files for the workers: what docker.io needs beyond the box
#   images/   the local busybox image (docker save), since no registry is reachable
#   secrets/  the generated Raft password (control-plane VMs only)
# Idempotent: a part that exists is kept; FORCE=1 redoes wheels, debs and images.
# Env: ARTIFACTS (vagrant/.artifacts), BUILD_DIR (vagrant/.build), PYTHON (python3).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PROJECT=$(cd "$HERE/../.." && pwd)
ARTIFACTS=${ARTIFACTS:-$PROJECT/vagrant/.artifacts}
BUILD_DIR=${BUILD_DIR:-$PROJECT/vagrant/.build}
PYTHON=${PYTHON:-python3}
IMAGE=${SHEPHERD_IMAGE:-shepherd/busybox:1}

log() { printf '[artifacts %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
mkdir -p "$ARTIFACTS"
if [ "${FORCE:-0}" = 1 ]; then rm -rf "$ARTIFACTS/wheels" "$ARTIFACTS/debs" "$ARTIFACTS/images"; fi

# The project's wheel is always rebuilt (the code changes); dependencies are cached.
log "pip wheel: the project and its dependencies -> $ARTIFACTS/wheels"
mkdir -p "$ARTIFACTS/wheels"
rm -f "$ARTIFACTS"/wheels/shepherd_ha-*.whl
"$PYTHON" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$ARTIFACTS/wheels" "$PROJECT"
log "$(find "$ARTIFACTS/wheels" -name '*.whl' | wc -l) wheels"

if [ ! -e "$ARTIFACTS/debs/.done" ]; then
  # Resolve docker.io against the box's own package list, so exactly the missing
  # packages are fetched; without it, fetch the whole dependency closure.
  mkdir -p "$ARTIFACTS/debs/partial"
  if [ -e "$BUILD_DIR/box-dpkg-status" ]; then
    log "apt: downloading docker.io and what the box lacks of its dependencies"
    apt-get install --download-only --no-install-recommends -y -qq \
      -o Dir::State::status="$BUILD_DIR/box-dpkg-status" \
      -o Dir::Cache::archives="$ARTIFACTS/debs" \
      -o Debug::NoLocking=1 docker.io >/dev/null
  else
    log "apt: no box package list ($BUILD_DIR/box-dpkg-status); downloading docker.io's whole closure"
    pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
      --no-replaces --no-enhances docker.io | grep -E '^[a-z0-9]' | sort -u)
    # shellcheck disable=SC2086
    (cd "$ARTIFACTS/debs" && apt-get download -qq $pkgs)
  fi
  rm -rf "$ARTIFACTS/debs/partial" "$ARTIFACTS/debs/lock"
  ls "$ARTIFACTS"/debs/docker.io_*.deb >/dev/null || { echo "error: docker.io .deb not downloaded; run apt-get update" >&2; exit 1; }
  touch "$ARTIFACTS/debs/.done"
fi
log "$(find "$ARTIFACTS/debs" -name '*.deb' | wc -l) .deb files"

if [ ! -e "$ARTIFACTS/images/busybox.tar" ]; then
  log "docker save $IMAGE"
  docker image inspect "$IMAGE" >/dev/null 2>&1 || bash "$PROJECT/scripts/setup-docker.sh"
  mkdir -p "$ARTIFACTS/images"
  docker save -o "$ARTIFACTS/images/busybox.tar.tmp" "$IMAGE"
  mv "$ARTIFACTS/images/busybox.tar.tmp" "$ARTIFACTS/images/busybox.tar"
fi
echo "$IMAGE" >"$ARTIFACTS/images/names"

if [ ! -s "$ARTIFACTS/secrets/raft-password" ]; then
  log "generating the Raft password"
  mkdir -p "$ARTIFACTS/secrets"
  chmod 700 "$ARTIFACTS/secrets"
  (umask 077 && "$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(32))' >"$ARTIFACTS/secrets/raft-password")
fi
log "ready in $ARTIFACTS"
