#!/bin/bash
# `make vagrant-down`: destroy the VMs (their disks and networks); the box stays.
set -euo pipefail
# shellcheck source=vagrant/scripts/common.sh
source "$(dirname "$0")/common.sh"
need vagrant vagrant
cd "$VAGRANT_DIR"
if [ "$VAGRANT_DEFAULT_PROVIDER" = libvirt ]; then bash "$VAGRANT_DIR/scripts/start-libvirt.sh" >/dev/null; fi
log "vagrant destroy -f (the box stays; vagrant/box/build-box.sh FORCE=1 rebuilds it)"
vagrant destroy -f
rm -f "$SHEEPCTL_CONFIG_FILE"
log "VMs removed"
