#!/bin/bash
# Make sure libvirtd answers on qemu:///system and the storage pool Vagrant uses
# exists. On machines with systemd this starts the service; without systemd
# (containers, this project's CI machines) it starts virtlogd and libvirtd by hand.
# HIDE_KVM=1 (default when the QEMU driver is used) starts libvirtd in a private
# mount namespace where /dev/kvm is /dev/null: here /dev/kvm cannot boot stock
# kernels, and with it visible libvirt re-probes QEMU on every define (~60 s).
# Env: POOL_NAME (default), POOL_DIR (/var/lib/libvirt/images), VM_DRIVER, VM_CPU_SHARES (16384).
set -euo pipefail
POOL_NAME=${POOL_NAME:-default}
POOL_DIR=${POOL_DIR:-/var/lib/libvirt/images}
VM_DRIVER=${VM_DRIVER:-qemu}
HIDE_KVM=${HIDE_KVM:-$([ "$VM_DRIVER" = qemu ] && echo 1 || echo 0)}
VIRSH="virsh -c qemu:///system"

command -v libvirtd >/dev/null || { echo "error: libvirtd is missing; apt-get install -y libvirt-daemon-system qemu-system-x86" >&2; exit 1; }

if ! $VIRSH version >/dev/null 2>&1; then
  if [ -d /run/systemd/system ]; then
    echo "starting libvirtd with systemctl"
    systemctl start libvirtd virtlogd
  else
    echo "starting virtlogd and libvirtd by hand (no systemd; hide /dev/kvm: $HIDE_KVM)"
    pgrep -x virtlogd >/dev/null || virtlogd -d
    if [ "$HIDE_KVM" = 1 ] && [ -e /dev/kvm ]; then
      unshare -m --propagation private sh -c 'mount --bind /dev/null /dev/kvm && exec libvirtd -d'
    else
      libvirtd -d
    fi
  fi
  for _ in $(seq 1 30); do $VIRSH version >/dev/null 2>&1 && break; sleep 1; done
  $VIRSH version >/dev/null || { echo "error: libvirtd did not answer within 30 s" >&2; exit 1; }
fi

# Without systemd on cgroup v1, libvirt puts every VM under the cpu cgroup
# "machine", whose default cpu.shares (1024) weighs as much as ONE process of the
# host's root group: with a busy host (tests, 30 runnable processes) the five VMs
# then got ~2 % of a core each and took over 10 minutes to reach DHCP. Give the VMs
# the weight of VM_CPU_SHARES/1024 host processes (created before libvirt makes it).
CPU_CGROUP=/sys/fs/cgroup/cpu
if [ ! -d /run/systemd/system ] && [ -e "$CPU_CGROUP/cpu.shares" ]; then
  mkdir -p "$CPU_CGROUP/machine"
  echo "${VM_CPU_SHARES:-16384}" >"$CPU_CGROUP/machine/cpu.shares"
fi

if ! $VIRSH pool-info "$POOL_NAME" >/dev/null 2>&1; then
  echo "defining storage pool $POOL_NAME in $POOL_DIR"
  mkdir -p "$POOL_DIR"
  $VIRSH pool-define-as "$POOL_NAME" dir --target "$POOL_DIR" >/dev/null
  $VIRSH pool-autostart "$POOL_NAME" >/dev/null
fi
# Read the whole of pool-info (awk, not grep -q): grep -q exits at the first match,
# virsh then dies of SIGPIPE and, with pipefail, a running pool read as not running.
pool_running() { $VIRSH pool-info "$POOL_NAME" 2>/dev/null | awk '$1 == "State:" && $2 == "running" {ok = 1} END {exit !ok}'; }
# A freshly started libvirtd autostarts the pool in the background: pool-start can
# then fail with "already active", which is what we wanted anyway.
if ! pool_running; then
  $VIRSH pool-start "$POOL_NAME" >/dev/null 2>&1 || pool_running \
    || { echo "error: storage pool $POOL_NAME does not start: $VIRSH pool-start $POOL_NAME" >&2; exit 1; }
fi
echo "libvirtd ready (pool $POOL_NAME)"
