#!/usr/bin/env bash
# The system tools the test suite uses besides Docker and etcd, installed with apt when
# missing (idempotent, needs root): shellcheck (static checks of the Vagrant scripts),
# iproute2 and iptables (clusters whose replicas live in network namespaces), conntrack
# (the service proxy deletes the conntrack entries of removed UDP endpoints with it).
# Exits non-zero with the reason when a tool cannot be had: tests that need one fail, never skip.
set -euo pipefail

say() { echo "setup-test-tools: $*"; }
fail() { echo "setup-test-tools: ERROR: $*" >&2; exit 1; }

missing=()
command -v shellcheck >/dev/null || missing+=(shellcheck)
command -v ip >/dev/null || missing+=(iproute2)
command -v iptables >/dev/null || missing+=(iptables)
command -v conntrack >/dev/null || missing+=(conntrack)
if [ "${#missing[@]}" = 0 ]; then
    say "shellcheck, ip, iptables and conntrack already installed"
    exit 0
fi
[ "$(id -u)" = 0 ] || fail "${missing[*]} missing and installing needs root (run: sudo bash $0)"
command -v apt-get >/dev/null || fail "${missing[*]} missing and there is no apt-get: install them by hand"
say "installing ${missing[*]} (apt-get update, then install)"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq || fail "apt-get update failed (is a Debian mirror reachable?)"
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || fail "apt-get install ${missing[*]} failed"
say "ready"
