#!/bin/bash
# Turn a debootstrapped bookworm rootfs into a Vagrant guest: a vagrant user with
# Vagrant's well-known key and passwordless sudo, DHCP on eth0 (the management
# network Vagrant finds the VM on), per-VM SSH host keys and machine-id at first
# boot (every VM is a clone of this disk), no timers that reach the internet.
set -euo pipefail
R=${1:?usage: customize-rootfs.sh ROOTFS}
[ -d "$R/etc" ] || { echo "error: $R is not a root filesystem" >&2; exit 1; }

keys=(/usr/share/rubygems-integration/all/gems/vagrant-*/keys/vagrant.pub)
PUB=${keys[0]}
[ -e "$PUB" ] || { echo "error: Vagrant's insecure public key not found; install vagrant" >&2; exit 1; }

echo vagrant-box >"$R/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 vagrant-box\n' >"$R/etc/hosts"
echo '/dev/vda / ext4 defaults,noatime 0 1' >"$R/etc/fstab"
cat >"$R/etc/network/interfaces" <<'EOT'
source /etc/network/interfaces.d/*
auto lo
iface lo inet loopback
auto eth0
iface eth0 inet dhcp
EOT

chroot "$R" /bin/bash -c 'id vagrant >/dev/null 2>&1 || useradd -m -s /bin/bash vagrant; echo vagrant:vagrant | chpasswd'
install -d -m 700 -o 1000 -g 1000 "$R/home/vagrant/.ssh"
install -m 600 -o 1000 -g 1000 "$PUB" "$R/home/vagrant/.ssh/authorized_keys"
echo 'vagrant ALL=(ALL) NOPASSWD:ALL' >"$R/etc/sudoers.d/vagrant"
chmod 440 "$R/etc/sudoers.d/vagrant"
grep -q '^UseDNS no' "$R/etc/ssh/sshd_config" || echo 'UseDNS no' >>"$R/etc/ssh/sshd_config"

chroot "$R" systemctl mask systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer \
  e2scrub_reap.service man-db.timer >/dev/null 2>&1 || true

rm -f "$R"/etc/ssh/ssh_host_*
cat >"$R/etc/systemd/system/ssh-keygen-firstboot.service" <<'EOT'
[Unit]
Description=Generate this VM's SSH host keys
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key
[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A
[Install]
WantedBy=multi-user.target
EOT
chroot "$R" systemctl enable ssh-keygen-firstboot.service >/dev/null 2>&1
: >"$R/etc/machine-id"
rm -f "$R/var/lib/dbus/machine-id"
chroot "$R" apt-get clean
