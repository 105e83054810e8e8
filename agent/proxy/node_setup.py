"""What the node needs for Service traffic besides the rules:

- br_netfilter and net.bridge.bridge-nf-call-iptables=1: traffic between two pods
  on the same bridge is bridged, not routed, and skips iptables (so the DNAT of a
  cluster IP) without it; net.ipv4.ip_forward=1.
- a route for the service CIDR: a process on the node connecting to a cluster IP
  needs a route before the nat OUTPUT chain rewrites the destination (a node
  without a default route has none). Tagged `proto 249` (SERVICE_ROUTE_PROTO) so it
  is told apart from the pod network's routes. It points back into the pod bridge,
  so ICMP redirects are turned off there (and in `all`, which the kernel ORs in):
  with them, a pod's packet for a cluster IP without endpoints gets a redirect, the
  pod then ARPs for the cluster IP and times out instead of being refused at once.
- hairpin mode on the bridge ports: a pod reaching itself through its Service gets
  its packet back out of the port it came in by. The pod network (agent/network/)
  owns the bridge and its ports: it calls `set_hairpin(run, port)` for each pod's
  host-side veth when it attaches it, or `hairpin_all(run, bridge)` after a restart.

`run` is an Iptables (its prefix runs the commands in a namespace in tests).
"""
import logging
import os
import shutil

log = logging.getLogger(__name__)

SERVICE_ROUTE_PROTO = "249"
BRIDGE_NF_SYSCTL = "/proc/sys/net/bridge/bridge-nf-call-iptables"   # exists once br_netfilter is in
SYSCTLS = (("net.bridge.bridge-nf-call-iptables", "1"), ("net.ipv4.ip_forward", "1"))


def prepare_node(run):
    """Load br_netfilter (when modprobe is there) and set the sysctls. Returns the
    problems met (a list of sentences; empty when all is set)."""
    problems = []
    # Built into the kernel or loaded already: nothing to load (modprobe then fails on a
    # kernel without /lib/modules, as on this project's machines once kmod is installed).
    if not os.path.exists(BRIDGE_NF_SYSCTL) and shutil.which("modprobe"):
        proc = run.run(["modprobe", "br_netfilter"], check=False)
        if proc.returncode != 0:
            problems.append("modprobe br_netfilter: %s" % (proc.stderr or "").strip())
    for key, value in SYSCTLS:
        proc = run.run(["sysctl", "-q", "-w", "%s=%s" % (key, value)], check=False)
        if proc.returncode != 0:
            problems.append("sysctl %s=%s: %s (same-node Service traffic may bypass the rules)"
                            % (key, value, (proc.stderr or "").strip()))
    for problem in problems:
        log.warning("node setup for Services: %s", problem)
    return problems


def ensure_service_route(run, service_cidr, device):
    """A route for the service CIDR through `device` (the pod bridge), tagged as ours,
    and no ICMP redirects from that device."""
    for conf in ("all", device):
        run.run(["sysctl", "-q", "-w", "net.ipv4.conf.%s.send_redirects=0" % conf])
    run.run(["ip", "route", "replace", service_cidr, "dev", device, "proto", SERVICE_ROUTE_PROTO])


def remove_service_routes(run):
    """Delete every route tagged as ours (cleanup)."""
    run.run(["ip", "route", "flush", "proto", SERVICE_ROUTE_PROTO], check=False)


def set_hairpin(run, port, on=True):
    """Hairpin mode on one bridge port (a pod's host-side veth)."""
    run.run(["ip", "link", "set", "dev", port, "type", "bridge_slave", "hairpin", "on" if on else "off"])


def hairpin_all(run, bridge):
    """Hairpin mode on every port of `bridge`; returns the ports set."""
    out = run.run(["ip", "-o", "link", "show", "master", bridge]).stdout
    ports = [line.split(":", 2)[1].strip().split("@")[0] for line in out.splitlines() if line.count(":") >= 2]
    for port in ports:
        set_hairpin(run, port)
    return ports
