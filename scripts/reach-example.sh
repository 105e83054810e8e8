#!/usr/bin/env bash
# After `make up`: wait until the example web deployment is rolled out, then fetch
# its page from every pod IP its Service's endpoints list (containers this cluster
# made, on the Docker bridge).
set -euo pipefail
CONFIG=${1:-.local-cluster/config}
sheepctl --config "$CONFIG" rollout status deployment/web --timeout 180
for _ in $(seq 1 60); do
    ips=$(sheepctl --config "$CONFIG" get endpoints web -o json |
          python3 -c 'import json,sys; e=json.load(sys.stdin); print(" ".join(a["ip"] for s in e.get("subsets") or [] for a in s.get("addresses") or []))')
    [ -n "$ips" ] && break
    sleep 1
done
[ -n "$ips" ] || { echo "service web has no ready endpoints yet: see 'sheepctl describe deployment web'"; exit 1; }
for ip in $ips; do
    printf 'http://%s:8080/ -> ' "$ip"
    python3 -c 'import sys,urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode().strip())' "http://$ip:8080/"
done
