#!/bin/bash
# `make vagrant-down`: destroy the VMs (their disks and networks); the box stays.
set -euo pipefail
# shellcheck source=vagrant/scripts/common.sh
source "$(dirname "$0")/common.sh"
need vagrant vagrant
cd "$VAGRANT_DIR"
if [ "$VAGRANT_DEFAULT_PROVIDER" = libvirt ]; then bash "$VAGRANT_DIR/scripts/start-libvirt.sh" >/dev/null; fi
# A spare made under a larger CP_SPARE (a drill run with CP_SPARE=4) is not in the
# default layout and `vagrant destroy` would leave it running: cover every cpN made.
highest=$(find .vagrant/machines -mindepth 1 -maxdepth 1 -name 'cp*' -printf '%f\n' 2>/dev/null | sed -n 's/^cp\([0-9][0-9]*\)$/\1/p' | sort -n | tail -1)
if [ -n "$highest" ] && [ "$highest" -gt "$(( ${CP:-3} + ${CP_SPARE:-3} ))" ]; then
  export CP_SPARE=$(( highest - ${CP:-3} ))
fi
log "vagrant destroy -f (the box stays; vagrant/box/build-box.sh FORCE=1 rebuilds it)"
vagrant destroy -f
rm -f "$SHEEPCTL_CONFIG_FILE"
log "VMs removed"
