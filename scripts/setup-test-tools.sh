#!/usr/bin/env bash
# The system tools the test suite uses besides Docker and etcd, installed with apt when
# missing (idempotent, needs root): shellcheck (static checks of the Vagrant scripts),
# iproute2 and iptables (clusters whose replicas live in network namespaces), conntrack
# (the service proxy deletes the conntrack entries of removed UDP endpoints with it); and
# kubectl (tests/integration/test_tls.py reads /readyz with DIR/kubeconfig), which Debian
# no longer packages: the release binary from dl.k8s.io, checked against its sha256.
# Exits non-zero with the reason when a tool cannot be had: tests that need one fail, never skip.
set -euo pipefail

say() { echo "setup-test-tools: $*"; }
fail() { echo "setup-test-tools: ERROR: $*" >&2; exit 1; }

KUBECTL_VERSION=${KUBECTL_VERSION:-v1.32.4}
if ! command -v kubectl >/dev/null; then
    [ "$(id -u)" = 0 ] || fail "kubectl missing and installing it into /usr/local/bin needs root"
    arch=$(uname -m); case "$arch" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
    url="https://dl.k8s.io/release/$KUBECTL_VERSION/bin/linux/$arch/kubectl"
    say "installing kubectl $KUBECTL_VERSION from $url"
    tmp=$(mktemp -d)
    curl -fsSL -o "$tmp/kubectl" "$url" || fail "cannot download kubectl from $url"
    curl -fsSL -o "$tmp/kubectl.sha256" "$url.sha256" || fail "cannot download $url.sha256"
    echo "$(cat "$tmp/kubectl.sha256")  $tmp/kubectl" | sha256sum --check --quiet \
        || fail "kubectl from $url does not match its sha256"
    install -m 755 "$tmp/kubectl" /usr/local/bin/kubectl
    rm -rf "$tmp"
fi

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
