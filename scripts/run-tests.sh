#!/usr/bin/env bash
# The whole test suite, as `make test` and CI run it: unit tests, integration tests on
# real replica processes on 127.0.0.1, end-to-end tests with real Docker containers, the
# chaos suite's short setting and the failure drills on network-namespace hosts.
# One pytest run, one summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# Agent tests run real containers, the failover comparison a real etcd cluster, the drills
# network namespaces: make the Docker engine (and the local busybox image), etcd, shellcheck,
# ip and iptables available first. Failing here fails the run: a test never skips for lack of one.
bash scripts/setup-docker.sh
bash scripts/setup-etcd.sh
bash scripts/setup-test-tools.sh
exec "$PYTHON" -m pytest tests -q -p no:cacheprovider "$@"
