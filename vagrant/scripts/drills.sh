#!/bin/bash
# `make drills`: run the failure drills against the VMs of `make vagrant-up`.
# Args are passed to run_drills.py, e.g. --drill kill-leader.
set -euo pipefail
# shellcheck source=vagrant/scripts/common.sh
source "$(dirname "$0")/common.sh"
[ -e "$VAGRANT_DIR/drills/run_drills.py" ] || die "vagrant/drills/run_drills.py is missing"
[ -s "$SHEEPCTL_CONFIG_FILE" ] || die "no VM cluster is up ($SHEEPCTL_CONFIG_FILE missing); run make vagrant-up first"
cd "$PROJECT_DIR"
exec python3 "$VAGRANT_DIR/drills/run_drills.py" --target vagrant "$@"
