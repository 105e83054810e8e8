#!/usr/bin/env bash
# After `make up`: wait until the example web deployment is rolled out, then fetch
# its page from every pod IP its Service's endpoints list (containers this cluster
# made, on the Docker bridge). A cluster started again from its kept data shows its
# pods' last known IPs until the agents have started their containers again (with
# new IPs): the endpoints are read again until every pod answers (90 s at most).
set -euo pipefail
CONFIG=${1:-.local-cluster/config}
sheepctl --config "$CONFIG" rollout status deployment/web --timeout 180
fetch='import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode().strip())
except Exception as exc:
    print(exc)
    sys.exit(1)'
deadline=$((SECONDS + 90))
while :; do
    ips=$(sheepctl --config "$CONFIG" get endpoints web -o json |
          python3 -c 'import json,sys; e=json.load(sys.stdin); print(" ".join(a["ip"] for s in e.get("subsets") or [] for a in s.get("addresses") or []))')
    answers="" failed=""
    for ip in $ips; do
        if page=$(python3 -c "$fetch" "http://$ip:8080/"); then
            answers+="http://$ip:8080/ -> $page"$'\n'
        else
            failed="http://$ip:8080/: $page"
        fi
    done
    if [ -n "$ips" ] && [ -z "$failed" ]; then
        printf '%s' "$answers"
        exit 0
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
        echo "the example web Service's pods did not all answer within 90 s (${failed:-no ready endpoints}):" \
             "see 'sheepctl --config $CONFIG describe deployment web' and the agents' logs in $(dirname "$CONFIG")/agents"
        exit 1
    fi
    echo "waiting for the example's pods to answer (${failed:-no ready endpoints yet})"
    sleep 2
done
