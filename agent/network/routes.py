"""host-gw routes: every other node's pod block via that node's InternalIP.

Our routes carry their own routing protocol number (`proto 186`), so the agent
lists, replaces and deletes only those, never the host's own routes. The whole
set is reconciled on every sync: `desired_routes` (pure) from the Nodes, then
`route_diff` (pure) against what the kernel holds with our tag.

A node whose InternalIP is one of this host's own addresses (two agents on one
machine, `make up`) gets no route: its bridge is on this host and the kernel's
connected route for it already delivers.
"""
import ipaddress
import json
import logging
import subprocess

from shepherd_ha.model.network import internal_ip_of, pod_cidr_of

log = logging.getLogger(__name__)

ROUTE_PROTO = "186"     # our tag in the kernel's routing table (ip route ... proto 186)


def desired_routes(nodes, own_node, local_addresses):
    """{pod CIDR: gateway} for every other node with a block and an InternalIP off this host."""
    routes = {}
    for node in nodes:
        name = (node.get("metadata") or {}).get("name")
        cidr, via = pod_cidr_of(node), internal_ip_of(node)
        if name == own_node or not cidr or not via or via in local_addresses:
            continue
        routes[cidr] = via
    return routes


def route_diff(current, desired):
    """(to replace: {cidr: via}, to delete: [cidr]) turning `current` into `desired`."""
    replace = {cidr: via for cidr, via in desired.items() if current.get(cidr) != via}
    delete = sorted(cidr for cidr in current if cidr not in desired)
    return replace, delete


class IpCommand:
    """`ip` (iproute2), in this process's network namespace unless `prefix` says otherwise
    (e.g. ["nsenter", "--net=/run/netns/X"]: tests run nodes as namespaces)."""

    def __init__(self, binary="ip", prefix=()):
        self.binary = binary
        self.prefix = list(prefix)

    def run(self, *args, check=True):
        done = subprocess.run(self.prefix + [self.binary] + list(args), capture_output=True, text=True, timeout=10)
        if check and done.returncode != 0:
            raise OSError("ip %s: %s" % (" ".join(args), (done.stderr or done.stdout).strip()))
        return done.stdout

    def json(self, *args):
        out = self.run("-j", *args)
        return json.loads(out) if out.strip() else []


def inside(cidr, network):
    """Whether the network `cidr` (a string) lies in `network` (an ip_network); False if unreadable."""
    try:
        return ipaddress.ip_network(cidr, strict=False).subnet_of(network)
    except (TypeError, ValueError):
        return False


class RouteTable:
    """Our routes (proto 186); `within` (a CIDR) keeps it to one cluster's: a second
    cluster's agents on the same hosts have routes of their own, never touched here."""

    def __init__(self, ip=None, within=None):
        self.ip = ip or IpCommand()
        self.within = ipaddress.ip_network(within, strict=False) if within else None

    def local_addresses(self):
        found = set()
        for link in self.ip.json("-4", "addr", "show"):
            for info in link.get("addr_info") or []:
                if info.get("local"):
                    found.add(info["local"])
        return found

    def current(self):
        """{cidr: gateway} of our routes (proto 186) in the main table."""
        routes = {}
        for route in self.ip.json("-4", "route", "show", "proto", ROUTE_PROTO):
            dst = route.get("dst")
            if dst and "/" not in dst:
                dst += "/32"
            if self.within is not None and not inside(dst, self.within):
                continue
            routes[dst] = route.get("gateway", "")
        return routes

    def sync(self, desired):
        """Make our routes exactly `desired`; returns (replaced, deleted). A route that fails
        (its gateway unreachable, say) is logged and the others still go in."""
        if self.within is not None:       # another cluster's blocks are not this table's to add
            desired = {cidr: via for cidr, via in desired.items() if inside(cidr, self.within)}
        replace, delete = route_diff(self.current(), desired)
        done_replace, done_delete = {}, []
        for cidr in delete:
            try:
                self.ip.run("-4", "route", "del", cidr, "proto", ROUTE_PROTO)
                done_delete.append(cidr)
            except OSError as exc:
                log.warning("pod route %s: %s", cidr, exc)
        for cidr, via in sorted(replace.items()):
            try:
                self.ip.run("-4", "route", "replace", cidr, "via", via, "proto", ROUTE_PROTO)
                done_replace[cidr] = via
            except OSError as exc:
                log.warning("pod route %s via %s: %s", cidr, via, exc)
        if done_replace or done_delete:
            log.info("pod routes: %s%s", ", ".join("%s via %s" % kv for kv in sorted(done_replace.items())),
                     (" removed %s" % ", ".join(done_delete)) if done_delete else "")
        return done_replace, done_delete

    def remove_all(self):
        return self.sync({})
