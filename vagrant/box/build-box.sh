#!/bin/bash
# Build the local Debian 12 Vagrant box (libvirt provider) offline: debootstrap from
# the Debian mirror, a raw ext4 disk made with `mkfs.ext4 -d` (no loop device or
# mount needed), converted to qcow2; the kernel and initrd are booted directly by
# libvirt, so the disk needs no boot loader.
#
# Idempotent: every stage leaves a stamp and is skipped when its stamp exists;
# the box is added to Vagrant only when `vagrant box list` lacks it.
# Env: BOX_NAME (shepherd/debian12), BUILD_DIR (vagrant/.build), DEBIAN_MIRROR,
#      BOX_DISK_GB (6), FORCE=1 rebuilds from scratch.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BOX_NAME=${BOX_NAME:-shepherd/debian12}
BUILD_DIR=${BUILD_DIR:-$HERE/../.build}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DISK_GB=${BOX_DISK_GB:-6}
ROOTFS=$BUILD_DIR/rootfs
OUT=$BUILD_DIR/box
BOOT=$BUILD_DIR/boot
BOX_FILE=$BUILD_DIR/debian12-shepherd.box
# Packages the guests need offline: ssh + sudo for Vagrant, ifupdown + DHCP for its
# network configuration, rsync for synced folders, python3-venv for the project's
# wheels, iptables for the partition drills.
PACKAGES=linux-image-amd64,initramfs-tools,systemd-sysv,openssh-server,sudo,ifupdown,isc-dhcp-client,iproute2,iptables,iputils-ping,procps,rsync,python3,python3-venv,ca-certificates,less

log() { printf '[box %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
need() { command -v "$1" >/dev/null || { echo "error: $1 is missing; install it: apt-get install -y $2" >&2; exit 1; }; }

if [ "$(id -u)" != 0 ]; then echo "error: build-box.sh needs root (debootstrap, chroot)" >&2; exit 1; fi
need debootstrap debootstrap
need mkfs.ext4 e2fsprogs
need qemu-img qemu-utils
need vagrant vagrant

if [ "${FORCE:-0}" = 1 ]; then
  log "FORCE=1: removing $BUILD_DIR/{rootfs,box,boot} and the box $BOX_NAME"
  rm -rf "$ROOTFS" "$OUT" "$BOOT" "$BOX_FILE"
  vagrant box remove --force "$BOX_NAME" >/dev/null 2>&1 || true
fi

if vagrant box list 2>/dev/null | grep -q "^$BOX_NAME "; then
  log "box $BOX_NAME is already added; nothing to do (FORCE=1 rebuilds it)"
  exit 0
fi
mkdir -p "$BUILD_DIR"
START=$(date +%s)

if [ ! -e "$ROOTFS/.debootstrap-done" ]; then
  log "debootstrap bookworm from $MIRROR into $ROOTFS (a few minutes; log: $BUILD_DIR/debootstrap.log)"
  rm -rf "$ROOTFS"
  debootstrap --include="$PACKAGES" bookworm "$ROOTFS" "$MIRROR" >"$BUILD_DIR/debootstrap.log" 2>&1 \
    || { tail -20 "$BUILD_DIR/debootstrap.log" >&2; echo "error: debootstrap failed; see $BUILD_DIR/debootstrap.log" >&2; exit 1; }
  touch "$ROOTFS/.debootstrap-done"
else
  log "rootfs already bootstrapped ($ROOTFS)"
fi

if [ ! -e "$ROOTFS/.customized" ]; then
  log "customizing the rootfs for Vagrant"
  bash "$HERE/customize-rootfs.sh" "$ROOTFS"
  touch "$ROOTFS/.customized"
fi
# The host fetches Docker's .deb files against exactly what the box holds.
cp "$ROOTFS/var/lib/dpkg/status" "$BUILD_DIR/box-dpkg-status"

if [ ! -e "$OUT/box.img" ]; then
  log "packing the disk (${DISK_GB} GB sparse ext4 -> qcow2)"
  mkdir -p "$OUT" "$BOOT"
  cp -L "$ROOTFS/vmlinuz" "$BOOT/vmlinuz"
  cp -L "$ROOTFS/initrd.img" "$BOOT/initrd.img"
  rm -f "$OUT/disk.raw"
  truncate -s "${DISK_GB}G" "$OUT/disk.raw"
  mkfs.ext4 -q -F -L root -d "$ROOTFS" "$OUT/disk.raw"
  qemu-img convert -f raw -O qcow2 "$OUT/disk.raw" "$OUT/box.img.tmp"
  rm -f "$OUT/disk.raw"
  mv "$OUT/box.img.tmp" "$OUT/box.img"
fi

# The box carries the direct kernel boot; the project Vagrantfile stays box-agnostic.
printf '{"provider":"libvirt","format":"qcow2","virtual_size":%s}\n' "$DISK_GB" >"$OUT/metadata.json"
cat >"$OUT/Vagrantfile" <<EOT
Vagrant.configure("2") do |config|
  config.vm.provider :libvirt do |lv|
    lv.kernel = "$(cd "$BOOT" && pwd)/vmlinuz"
    lv.initrd = "$(cd "$BOOT" && pwd)/initrd.img"
    lv.cmd_line = "root=/dev/vda rw console=ttyS0 net.ifnames=0 biosdevname=0 quiet"
  end
end
EOT
log "writing $BOX_FILE"
(cd "$OUT" && tar czf "$BOX_FILE.tmp" metadata.json Vagrantfile box.img)
mv "$BOX_FILE.tmp" "$BOX_FILE"
log "vagrant box add $BOX_NAME"
vagrant box add --force --name "$BOX_NAME" "$BOX_FILE"
log "box $BOX_NAME ready in $(( $(date +%s) - START )) s"
