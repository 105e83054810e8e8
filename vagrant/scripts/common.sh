# Shared by the host scripts under vagrant/scripts (sourced, not run).
# shellcheck shell=bash
VAGRANT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PROJECT_DIR
PROJECT_DIR=$(cd "$VAGRANT_DIR/.." && pwd)
STATE_DIR=${STATE_DIR:-$VAGRANT_DIR/.state}
export VAGRANT_CHECKPOINT_DISABLE=1
export VAGRANT_DEFAULT_PROVIDER=${VAGRANT_DEFAULT_PROVIDER:-libvirt}
export ARTIFACTS=${ARTIFACTS:-$VAGRANT_DIR/.artifacts}
export SHEEPCTL_CONFIG_FILE=$STATE_DIR/sheepctl-config
mkdir -p "$STATE_DIR"

log() { printf '[vagrant %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { echo "error: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null || die "$1 is missing; install it: apt-get install -y $2"; }
# Record a measured duration for vagrant/README.md.
record() { printf '%s %s\n' "$(date -u +%FT%TZ)" "$*" >>"$STATE_DIR/timings.log"; log "$*"; }
vm_names() { (cd "$VAGRANT_DIR" && python3 cluster_layout.py show | awk '{print $1}'); }
