#!/usr/bin/env bash
# Make Debian's etcd (server and etcdctl) available, idempotently, for the write-gap
# comparison (bench/bench_failover_vs_etcd.py, tests/integration/test_etcd_compare.py):
#   1. install etcd-server and etcd-client with apt when `etcd` or `etcdctl` is missing (needs root);
#   2. check that both run and print their versions.
# Debian's package also starts a system etcd where an init system runs; we never use it
# (the bench starts its own members on free loopback ports), and machines here have no systemd.
# Exits non-zero with the reason when a step fails: a test that needs etcd must fail, not skip.
set -euo pipefail

say() { echo "setup-etcd: $*"; }
fail() { echo "setup-etcd: ERROR: $*" >&2; exit 1; }

if command -v etcd >/dev/null && command -v etcdctl >/dev/null; then
    say "etcd and etcdctl already installed"
else
    [ "$(id -u)" = 0 ] || fail "etcd is missing and installing it needs root (run: sudo bash $0)"
    command -v apt-get >/dev/null || fail "etcd is missing and there is no apt-get: install etcd-server and etcd-client (3.4+) by hand"
    say "installing etcd-server and etcd-client (apt-get update, then install; waits up to 10 min for another apt)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq || fail "apt-get update failed (is a Debian mirror reachable?)"
    # policy-rc.d 101: do not let the package start a system etcd on 2379/2380.
    policy=/usr/sbin/policy-rc.d
    made_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && made_policy=1
    fi
    status=0
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends etcd-server etcd-client >/dev/null || status=$?
    [ "$made_policy" = 1 ] && rm -f "$policy"
    [ "$status" = 0 ] || fail "apt-get install etcd-server etcd-client failed (exit $status)"
fi

# Whole outputs first, then their first lines: `| head -1` under pipefail fails at random
# when head exits before the writer is done (SIGPIPE, exit 141).
server=$(etcd --version 2>/dev/null) || fail "etcd is installed but does not run: etcd --version failed"
client=$(ETCDCTL_API=3 etcdctl version 2>/dev/null) || fail "etcdctl is installed but does not run"
say "${server%%$'\n'*}; ${client%%$'\n'*}"
say "ready"
