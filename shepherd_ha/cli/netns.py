"""Low-level `ip` and `iptables` calls for hosts made of network namespaces (root only).

A host is a namespace holding one end of a veth pair (renamed eth0 inside); the other
end is enslaved to a bridge in the root namespace. Every call here names exactly the
namespace, link or rule it touches, so teardown removes what we made and nothing else.
"""
import os
import shutil
import subprocess

from .local_cluster import LocalClusterError

COMMAND_TIMEOUT = 20.0
ISOLATE_TAG = "shepherd-isolate"


class NetnsError(LocalClusterError):
    """A namespace, link or rule could not be made or removed (`shepherd-ha local` prints it)."""


def require_root():
    """Raise NetnsError naming what is missing: root, `ip`, `iptables`, or namespace support."""
    if os.geteuid() != 0:
        raise NetnsError("network-namespace clusters need root (ip netns, veth, iptables): run as root, "
                         "e.g. with sudo")
    for tool, package in (("ip", "iproute2"), ("iptables", "iptables")):
        if shutil.which(tool) is None:
            raise NetnsError("`%s` not found: install it (apt-get install %s)" % (tool, package))
    if not os.path.exists("/proc/self/ns/net"):
        raise NetnsError("this kernel has no network namespaces (/proc/self/ns/net missing)")


def run(argv, check=True, namespace=None):
    """Run a command (inside `namespace` when given); its stderr is in the error."""
    if namespace:
        argv = ["ip", "netns", "exec", namespace] + list(argv)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise NetnsError("`%s` did not finish within %.0fs" % (" ".join(argv), COMMAND_TIMEOUT)) from None
    if check and done.returncode != 0:
        raise NetnsError("`%s` failed (exit %d): %s" % (" ".join(argv), done.returncode,
                                                        (done.stderr or done.stdout).strip()))
    return done


# ---- what exists ----

def namespaces():
    out = run(["ip", "netns", "list"]).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def link_exists(name, namespace=None):
    return run(["ip", "link", "show", "dev", name], check=False, namespace=namespace).returncode == 0


def root_addresses():
    """Every IPv4 address configured in the root namespace, without prefix length."""
    out = run(["ip", "-4", "-o", "addr", "show"]).stdout
    found = set()
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            found.add(parts[parts.index("inet") + 1].split("/")[0])
    return found


# ---- making and removing ----

def add_bridge(name, address_cidr):
    """A bridge in the root namespace with our gateway address; idempotent."""
    if not link_exists(name):
        run(["ip", "link", "add", name, "type", "bridge"])
    if address_cidr.split("/")[0] not in root_addresses():
        run(["ip", "addr", "add", address_cidr, "dev", name])
    run(["ip", "link", "set", name, "up"])


def add_host(namespace, veth, bridge, address_cidr):
    """Namespace `namespace` with eth0 (address_cidr) wired to `bridge` via root-side link `veth`;
    idempotent: an existing namespace or link is reused."""
    if namespace not in namespaces():
        run(["ip", "netns", "add", namespace])
    run(["ip", "link", "set", "lo", "up"], namespace=namespace)
    if not link_exists("eth0", namespace=namespace):
        if link_exists(veth):
            run(["ip", "link", "del", veth])   # a half-made pair from an interrupted setup
        peer = veth + "p"
        run(["ip", "link", "add", veth, "type", "veth", "peer", "name", peer])
        run(["ip", "link", "set", peer, "netns", namespace])
        run(["ip", "link", "set", peer, "name", "eth0"], namespace=namespace)
    run(["ip", "link", "set", veth, "master", bridge])
    run(["ip", "link", "set", veth, "up"])
    have = run(["ip", "-4", "-o", "addr", "show", "dev", "eth0"], namespace=namespace).stdout
    if " %s " % address_cidr not in have:
        run(["ip", "addr", "add", address_cidr, "dev", "eth0"], namespace=namespace)
    run(["ip", "link", "set", "eth0", "up"], namespace=namespace)


def delete_namespace(namespace):
    if namespace in namespaces():
        done = run(["ip", "netns", "del", namespace], check=False)
        if done.returncode != 0 and namespace in namespaces():
            raise NetnsError("`ip netns del %s` failed: %s" % (namespace, done.stderr.strip()))


def delete_link(name):
    """Delete a root-namespace link (a veth end takes its peer with it); absent is fine."""
    if link_exists(name):
        done = run(["ip", "link", "del", name], check=False)
        # Deleting a namespace removes its veth ends asynchronously: gone meanwhile is fine.
        if done.returncode != 0 and link_exists(name):
            raise NetnsError("`ip link del %s` failed: %s" % (name, done.stderr.strip()))


def set_link(name, up):
    run(["ip", "link", "set", name, "up" if up else "down"])


def link_is_up(name):
    out = run(["ip", "-o", "link", "show", "dev", name]).stdout
    return "state UP" in out or ",UP" in out.split(">")[0]


# ---- iptables ----

def _bridge_rule(bridge, tag):
    return ["FORWARD", "-i", bridge, "-o", bridge, "-m", "comment", "--comment", tag, "-j", "ACCEPT"]


def allow_bridge_forwarding(bridge, tag):
    """Docker sets FORWARD's policy to DROP and br_netfilter sends bridged frames through it:
    accept frames that stay within our bridge (nothing is routed anywhere else)."""
    rule = _bridge_rule(bridge, tag)
    if run(["iptables", "-C"] + rule, check=False).returncode != 0:
        run(["iptables", "-I"] + rule)


def remove_bridge_forwarding(bridge, tag):
    rule = _bridge_rule(bridge, tag)
    for _ in range(10):   # bounded: at most a few copies if setup ran concurrently
        if run(["iptables", "-C"] + rule, check=False).returncode != 0:
            return
        run(["iptables", "-D"] + rule)


def drop_between(namespace, address, tag=ISOLATE_TAG):
    """Inside `namespace`: drop every packet from and to `address`."""
    for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d")):
        rule = [chain, flag, address, "-m", "comment", "--comment", tag, "-j", "DROP"]
        if run(["iptables", "-C"] + rule, check=False, namespace=namespace).returncode != 0:
            run(["iptables", "-I"] + rule, namespace=namespace)


def tagged_rules(namespace, tag=ISOLATE_TAG):
    """The `iptables -S` lines inside `namespace` that carry our tag."""
    out = run(["iptables", "-S"], namespace=namespace).stdout
    return [line for line in out.splitlines() if line.startswith("-A ") and tag in line]


def clear_tagged_rules(namespace, tag=ISOLATE_TAG):
    """Remove every rule we tagged inside `namespace`; returns how many."""
    rules = tagged_rules(namespace, tag)
    for line in rules:
        spec = line.split()[1:]   # "-A INPUT -s ..." -> delete the same spec; our tags have no spaces
        run(["iptables", "-D"] + spec, namespace=namespace)
    return len(rules)
