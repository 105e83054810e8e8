#!/bin/bash
# A worker VM: the kernel settings of the pod network, Docker (from the host's .deb
# files when the VM is offline, apt when it is online), the local busybox image, and
# `shepherd-agent` as the systemd unit shepherd-agent, configured in
# /etc/shepherd/agent.yaml (with the cluster domain of the artifacts' data-plane.yaml).
# Args: NODE_NAME ADDRESS SERVERS AGENT_PORT   (SERVERS: comma-separated API URLs)
set -euo pipefail
NODE=${1:?usage: worker.sh NODE_NAME ADDRESS SERVERS AGENT_PORT}
ADDRESS=${2:?address missing}
SERVERS=${3:?servers missing}
PORT=${4:-10250}
DIST=/opt/shepherd-dist
DATA_PLANE=$DIST/data-plane.yaml
export DEBIAN_FRONTEND=noninteractive

# Pod traffic: routed between nodes (ip_forward), and bridged pod-to-Service traffic
# on one node must pass iptables (br_netfilter + bridge-nf-call-iptables), or a
# ClusterIP whose backend sits on the same bridge is never translated. Kept across
# reboots in modules-load.d and sysctl.d.
echo "[$NODE] kernel: br_netfilter, ip_forward, bridge-nf-call-iptables"
echo br_netfilter >/etc/modules-load.d/shepherd.conf
modprobe br_netfilter
cat >/etc/sysctl.d/90-shepherd.conf <<'EOT'
# Written by vagrant/provision/worker.sh: the pod network and Services (docs/networking.md)
net.ipv4.ip_forward = 1
net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
EOT
sysctl -q --system
for key in net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables; do
  [ "$(sysctl -n "$key")" = 1 ] || { echo "error: $key did not take (see /etc/sysctl.d/90-shepherd.conf)" >&2; exit 1; }
done

# apparmor: the kernel has AppArmor on, and dockerd cannot create containers
# without apparmor_parser to load its profile.
if ! command -v dockerd >/dev/null || ! command -v apparmor_parser >/dev/null; then
  if ls "$DIST"/debs/*.deb >/dev/null 2>&1; then
    echo "[$NODE] installing Docker from $(find "$DIST/debs" -name '*.deb' | wc -l) host-fetched .deb files (offline)"
    apt-get install -y -qq --no-install-recommends "$DIST"/debs/*.deb >/dev/null
  else
    echo "[$NODE] no .deb files in $DIST/debs: installing docker.io with apt (needs the internet)"
    apt-get update -qq && apt-get install -y -qq --no-install-recommends docker.io apparmor >/dev/null
  fi
  systemctl restart docker.service
fi
systemctl enable docker.service >/dev/null 2>&1
systemctl start docker.service
for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
docker info >/dev/null 2>&1 || { echo "error: dockerd did not answer within 60 s; see journalctl -u docker" >&2; exit 1; }

if [ -e "$DIST/images/busybox.tar" ]; then
  while read -r image; do
    docker image inspect "$image" >/dev/null 2>&1 && continue
    echo "[$NODE] loading image $image"
    docker load -q -i "$DIST/images/busybox.tar"
  done <"$DIST/images/names"
fi

install -d -m 755 /etc/shepherd
[ -s "$DATA_PLANE" ] || { echo "error: $DATA_PLANE is missing; run vagrant/scripts/prepare-artifacts.sh on the host" >&2; exit 1; }
# This node's own token (user system:node:$NODE): it may write only its own Node and Lease.
[ -s "$DIST/secrets/nodes/$NODE.token" ] || { echo "error: $DIST/secrets/nodes/$NODE.token is missing; run vagrant/scripts/prepare-artifacts.sh on the host (WORKERS as for vagrant up)" >&2; exit 1; }
install -m 600 "$DIST/secrets/nodes/$NODE.token" /etc/shepherd/node-token
PKI=$DIST/secrets/pki
for f in "$PKI/ca.crt" "$PKI/$NODE.crt" "$PKI/$NODE.key"; do
  [ -s "$f" ] || { echo "error: $f is missing; run vagrant/scripts/prepare-artifacts.sh on the host" >&2; exit 1; }
done
install -d -m 700 /etc/shepherd/pki
install -m 644 "$PKI/ca.crt" /etc/shepherd/pki/ca.crt
install -m 644 "$PKI/$NODE.crt" /etc/shepherd/pki/tls.crt
install -m 600 "$PKI/$NODE.key" /etc/shepherd/pki/tls.key
[ -s "$DIST/cluster-id" ] || { echo "error: $DIST/cluster-id is missing; run vagrant/scripts/prepare-artifacts.sh on the host" >&2; exit 1; }
cat >/etc/shepherd/agent.yaml <<EOT
# Written by vagrant/provision/worker.sh
servers: $SERVERS
node_name: $NODE
address: $ADDRESS
port: $PORT
runtime: docker
token_file: /etc/shepherd/node-token
ca_file: /etc/shepherd/pki/ca.crt
tls_cert_file: /etc/shepherd/pki/tls.crt
tls_private_key_file: /etc/shepherd/pki/tls.key
cluster_id: $(cat "$DIST/cluster-id")
EOT
# the servers' CIDRs (--cluster-cidr: what leaves it is masqueraded; --service-cidr) and
# the pods' DNS zone (--cluster-domain); the agent serves it on its pod bridge's gateway.
# One agent per VM, so each programs its own node's Service rules (the service-traffic drill
# needs them); the service CIDR route goes through the pod bridge by default.
echo "proxy_mode: iptables" >>/etc/shepherd/agent.yaml
grep -E '^(cluster_cidr|service_cidr|cluster_domain):' "$DATA_PLANE" >>/etc/shepherd/agent.yaml

cat >/etc/systemd/system/shepherd-agent.service <<'EOT'
[Unit]
Description=Shepherd HA node agent
Wants=network-online.target docker.service
After=network-online.target docker.service

[Service]
ExecStart=/opt/shepherd/bin/shepherd-agent --config /etc/shepherd/agent.yaml
Restart=always
RestartSec=2
TimeoutStopSec=20

[Install]
WantedBy=multi-user.target
EOT
systemctl daemon-reload
systemctl enable shepherd-agent.service >/dev/null 2>&1
systemctl restart shepherd-agent.service
echo "[$NODE] shepherd-agent started (servers $SERVERS)"
