#!/bin/bash
# A control-plane VM: `shepherd-ha server` as the systemd unit shepherd-server,
# configured in /etc/shepherd/server.yaml, data in /var/lib/shepherd.
# Args: ID RAFT_ADDRESS API_ADDRESS PEERS   (PEERS as `shepherd-ha server --peers`, or
# join=URL,URL... for a spare VM: it starts with --join and waits to be added)
# The VM-sized timings come from the artifacts' server-vm.yaml and the cluster and
# service CIDRs from data-plane.yaml (both written on the host by prepare-artifacts.sh from
# vagrant/cluster_layout.py); every other option is the server's default.
set -euo pipefail
ID=${1:?usage: control-plane.sh ID RAFT_ADDRESS API_ADDRESS PEERS}
RAFT_ADDRESS=${2:?raft address missing}
API_ADDRESS=${3:?api address missing}
PEERS=${4:?peers missing}
SECRET=/opt/shepherd-dist/secrets/raft-password
SALT=/opt/shepherd-dist/secrets/raft-salt
TOKENS=/opt/shepherd-dist/secrets/tokens.csv
OPTIONS=/opt/shepherd-dist/server-vm.yaml
DATA_PLANE=/opt/shepherd-dist/data-plane.yaml
PKI=/opt/shepherd-dist/secrets/pki
HOST=$(hostname)
CLUSTER_ID_FILE=/opt/shepherd-dist/cluster-id

for f in "$SECRET" "$SALT" "$TOKENS" "$OPTIONS" "$DATA_PLANE" "$CLUSTER_ID_FILE" "$PKI/ca.crt" "$PKI/$HOST.crt" "$PKI/$HOST.key"; do
  [ -s "$f" ] || { echo "error: $f is missing; run vagrant/scripts/prepare-artifacts.sh on the host" >&2; exit 1; }
done
install -d -m 755 /etc/shepherd
install -d -m 700 /var/lib/shepherd
install -m 600 "$SECRET" /etc/shepherd/raft-password
install -m 600 "$TOKENS" /etc/shepherd/tokens.csv
install -d -m 700 /etc/shepherd/pki
install -m 644 "$PKI/ca.crt" /etc/shepherd/pki/ca.crt
install -m 644 "$PKI/$HOST.crt" /etc/shepherd/pki/tls.crt
install -m 600 "$PKI/$HOST.key" /etc/shepherd/pki/tls.key

if [[ $PEERS == join=* ]]; then
  MEMBERS="join: ${PEERS#join=}"
else
  MEMBERS="peers: $PEERS"
fi
cat >/etc/shepherd/server.yaml <<EOT
# Written by vagrant/provision/control-plane.sh
id: $ID
raft_address: $RAFT_ADDRESS
$MEMBERS
api_bind: 0.0.0.0:${API_ADDRESS##*:}
api_url: https://$API_ADDRESS
data_dir: /var/lib/shepherd
raft_password_file: /etc/shepherd/raft-password
raft_salt: $(tr -d '[:space:]' <"$SALT")
token_file: /etc/shepherd/tokens.csv
tls_cert_file: /etc/shepherd/pki/tls.crt
tls_private_key_file: /etc/shepherd/pki/tls.key
client_ca_file: /etc/shepherd/pki/ca.crt
cluster_ca_file: /etc/shepherd/pki/ca.crt
cluster_id: $(cat "$CLUSTER_ID_FILE")
EOT
cat "$OPTIONS" >>/etc/shepherd/server.yaml
# the pod blocks and ClusterIPs come from these (--cluster-cidr, --service-cidr); a key the
# server does not know would make it refuse the file (SERVER_DATA_PLANE in cluster_layout.py)
grep -E '^(cluster_cidr|service_cidr):' "$DATA_PLANE" >>/etc/shepherd/server.yaml

cat >/etc/systemd/system/shepherd-server.service <<'EOT'
[Unit]
Description=Shepherd HA control-plane replica (Raft member + HTTP API)
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/opt/shepherd/bin/shepherd-ha server --config /etc/shepherd/server.yaml
Restart=always
RestartSec=2
# SIGTERM first: the replica closes its journal cleanly.
KillSignal=SIGTERM
# Every API connection and watch is a descriptor (the server also raises its soft limit to this).
LimitNOFILE=65536
# Every open watch holds a thread of an API worker (up to --max-watches + 144 each); a small
# VM's DefaultTasksMax (15 % of the kernel's limit) can be below that.
TasksMax=infinity
TimeoutStopSec=20

[Install]
WantedBy=multi-user.target
EOT
systemctl daemon-reload
systemctl enable shepherd-server.service >/dev/null 2>&1
systemctl restart shepherd-server.service
echo "[$ID] shepherd-server started (API https://$API_ADDRESS)"
