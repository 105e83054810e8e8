#!/bin/bash
# Everything the VMs install, made on the host because the VMs have no internet:
#   wheels/   the project and its dependencies (`pip wheel`), for a venv in every VM
#   debs/     Docker's .deb files for the workers: what docker.io needs beyond the box
#   images/   the local busybox image (docker save), since no registry is reachable
#   secrets/  the generated Raft password (control-plane VMs only)
#   server-vm.yaml  the server options of the VMs that differ from the defaults
#             (vagrant/cluster_layout.py, with RAFT_HEARTBEAT ... overrides), rewritten every run
#   data-plane.yaml  the cluster and service CIDRs and the cluster domain (CLUSTER_CIDR,
#             SERVICE_CIDR, CLUSTER_DOMAIN overrides), rewritten every run
# Idempotent: a part that exists is kept; FORCE=1 redoes wheels, debs and images.
# Env: ARTIFACTS (vagrant/.artifacts), BUILD_DIR (vagrant/.build), PYTHON (python3),
#      RAFT_HEARTBEAT RAFT_ELECTION_MIN RAFT_ELECTION_MAX RAFT_LEADER_FALLBACK
#      NODE_GRACE_PERIOD POD_EVICTION_TIMEOUT, CLUSTER_CIDR SERVICE_CIDR CLUSTER_DOMAIN
#      (see vagrant/cluster_layout.py).
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
# (grep: a pip.conf here names find-links dirs that do not exist; pip warns per package)
"$PYTHON" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$ARTIFACTS/wheels" "$PROJECT" 2>&1 \
  | { grep -v "is ignored: it is neither a file nor a directory" || true; }
log "$(find "$ARTIFACTS/wheels" -name '*.whl' | wc -l) wheels"

# apparmor: the VMs' kernel has AppArmor on, and dockerd refuses to create
# containers when it cannot load its profile (docker.io only recommends apparmor).
DEB_PACKAGES=(docker.io apparmor)
if [ "$(cat "$ARTIFACTS/debs/.done" 2>/dev/null)" != "${DEB_PACKAGES[*]}" ]; then
  # Resolve docker.io against the box's own package list, so exactly the missing
  # packages are fetched; without it, fetch the whole dependency closure.
  mkdir -p "$ARTIFACTS/debs/partial"
  if [ -e "$BUILD_DIR/box-dpkg-status" ]; then
    log "apt: downloading ${DEB_PACKAGES[*]} and what the box lacks of their dependencies"
    apt-get install --download-only --no-install-recommends -y -qq \
      -o Dir::State::status="$BUILD_DIR/box-dpkg-status" \
      -o Dir::Cache::archives="$ARTIFACTS/debs" \
      -o Debug::NoLocking=1 "${DEB_PACKAGES[@]}" >/dev/null
  else
    log "apt: no box package list ($BUILD_DIR/box-dpkg-status); downloading the whole closure of ${DEB_PACKAGES[*]}"
    pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
      --no-replaces --no-enhances "${DEB_PACKAGES[@]}" | grep -E '^[a-z0-9]' | sort -u)
    # shellcheck disable=SC2086
    (cd "$ARTIFACTS/debs" && apt-get download -qq $pkgs)
  fi
  rm -rf "$ARTIFACTS/debs/partial" "$ARTIFACTS/debs/lock"
  ls "$ARTIFACTS"/debs/docker.io_*.deb >/dev/null || { echo "error: docker.io .deb not downloaded; run apt-get update" >&2; exit 1; }
  echo "${DEB_PACKAGES[*]}" >"$ARTIFACTS/debs/.done"
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
if [ ! -s "$ARTIFACTS/secrets/raft-salt" ]; then
  # The cluster's salt for the Raft key derivations: random, the same on every replica, not secret.
  log "generating the Raft salt"
  "$PYTHON" -c 'import secrets; print(secrets.token_hex(16))' >"$ARTIFACTS/secrets/raft-salt"
fi
if [ ! -s "$ARTIFACTS/secrets/tokens.csv" ]; then
  log "generating the admin's API token (sheepctl and the drills)"
  mkdir -p "$ARTIFACTS/secrets"
  chmod 700 "$ARTIFACTS/secrets"
  (umask 077
   "$PYTHON" -c 'import secrets; print(secrets.token_hex(16))' >"$ARTIFACTS/secrets/admin-token"
   printf '%s,admin,admin,"system:masters"\n' "$(cat "$ARTIFACTS/secrets/admin-token")" >"$ARTIFACTS/secrets/tokens.csv")
fi
# One identity per worker (user system:node:NAME, group system:nodes: docs/security.md), made once per
# worker; a WORKERS=N raised later adds the new ones (the replicas re-read tokens.csv once provisioned).
# A shared node token of an older layout is dropped.
(umask 077
 mkdir -p "$ARTIFACTS/secrets/nodes"
 if grep -q ',system:node,system:node,' "$ARTIFACTS/secrets/tokens.csv"; then
   log "dropping the shared node token of an older layout"
   grep -v ',system:node,system:node,' "$ARTIFACTS/secrets/tokens.csv" >"$ARTIFACTS/secrets/tokens.csv.new"
   mv "$ARTIFACTS/secrets/tokens.csv.new" "$ARTIFACTS/secrets/tokens.csv"
   rm -f "$ARTIFACTS/secrets/node-token"
 fi
 for worker in $("$PYTHON" "$PROJECT/vagrant/cluster_layout.py" workers); do
   [ -s "$ARTIFACTS/secrets/nodes/$worker.token" ] && continue
   log "generating node $worker's own API token"
   PYTHONPATH="$PROJECT" "$PYTHON" -m shepherd_ha.cli.node_tokens create --node "$worker" --rotate \
     --token-file "$ARTIFACTS/secrets/tokens.csv" --output "$ARTIFACTS/secrets/nodes/$worker.token"
 done)
log "the cluster CA and a certificate per VM (made once; FORCE_CERTS=1 issues them again)"
mkdir -p "$ARTIFACTS/secrets/pki"
chmod 700 "$ARTIFACTS/secrets" "$ARTIFACTS/secrets/pki"
if [ "${FORCE_CERTS:-0}" = 1 ]; then rm -f "$ARTIFACTS"/secrets/pki/*.crt "$ARTIFACTS"/secrets/pki/*.key; fi
PYTHONPATH="$PROJECT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$PROJECT/vagrant/cluster_layout.py" certificates "$ARTIFACTS/secrets/pki" >/dev/null
if [ ! -s "$ARTIFACTS/cluster-id" ]; then
  # Made once with the cluster (docs/operations.md "Cluster identity"); not a secret: every VM gets it.
  log "generating the cluster id"
  "$PYTHON" -c 'import uuid; print(uuid.uuid4().hex)' >"$ARTIFACTS/cluster-id"
fi
"$PYTHON" "$PROJECT/vagrant/cluster_layout.py" server-options "$ARTIFACTS/server-vm.yaml" >/dev/null
log "server options of the VMs: $(grep -v '^#' "$ARTIFACTS/server-vm.yaml" | tr '\n' ' ')"
"$PYTHON" "$PROJECT/vagrant/cluster_layout.py" data-plane "$ARTIFACTS/data-plane.yaml" >/dev/null
log "data plane of the VMs: $(grep -v '^#' "$ARTIFACTS/data-plane.yaml" | tr '\n' ' ')"
log "ready in $ARTIFACTS"
