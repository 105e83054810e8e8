"""The Service rules as data: a pure function of (service ports, node IPs, cluster
CIDR) to every chain we own, and the iptables-restore text that moves the kernel
from what was rendered last time to what is rendered now.

kube-proxy's iptables mode, with our own prefix so nothing else is touched:

  nat   PREROUTING, OUTPUT -> SHEP-SERVICES: cluster IP:port -> SHEP-SVC-<hash>;
                              a node IP -> SHEP-NODEPORTS: node port -> SHEP-EXT-<hash>
        SHEP-EXT-<hash>       mark for masquerade (a client outside the node must
                              get the answer through this node), then SHEP-SVC-<hash>
        SHEP-SVC-<hash>       traffic from outside the cluster CIDR is marked; then one
                              endpoint chosen at random: probability 1/n, 1/(n-1) ... 1
        SHEP-SEP-<hash>       an endpoint reaching itself is marked (hairpin); DNAT
        POSTROUTING -> SHEP-POSTROUTING: marked packets are masqueraded
  filter OUTPUT, FORWARD -> SHEP-SERVICES, INPUT, FORWARD -> SHEP-EXTERNAL-SERVICES:
                              a Service port without ready endpoints is REJECTed at
                              once (no blackhole); FORWARD -> SHEP-FORWARD accepts
                              marked and established traffic past Docker's DROP policy.

Chains of one Service port are named by a hash of what identifies it, so a change
rewrites only the chains whose rules changed (`restore_text`), and a chain that is
no longer rendered is flushed and deleted (-X) in the same atomic restore.
"""
import base64
import collections
import hashlib
import re

PREFIX = "SHEP-"
SERVICES, NODEPORTS, POSTROUTING = "SHEP-SERVICES", "SHEP-NODEPORTS", "SHEP-POSTROUTING"
MARK_MASQ, EXTERNAL, FORWARD = "SHEP-MARK-MASQ", "SHEP-EXTERNAL-SERVICES", "SHEP-FORWARD"
# Whose rules these are: one rule naming the cluster and the node, and when the owner last
# renewed its claim (nothing jumps to it). The chains are the host's, one proxy's per host;
# a proxy finding another cluster's and another node's fresh claim here stands down
# (agent/proxy/proxier.py).
OWNER = "SHEP-OWNER"
_OWNER_COMMENT = "shepherd service proxy of cluster "
Owner = collections.namedtuple("Owner", "cluster node")
Claim = collections.namedtuple("Claim", "owner renewed")     # renewed: wall-clock seconds
MASQ_BIT = "0x4000"            # Kubernetes' masquerade bit; our chains set and clear it
UDP_LIKE = ("UDP", "SCTP")     # connectionless: their conntrack entries outlive an endpoint
TABLES = ("nat", "filter")

_COMMENT = '-m comment --comment "shepherd service portals"'
# The rules in built-in chains that lead to ours: (table, chain, rule). Installed with
# iptables -C/-I (restore --noflush cannot add a rule once without duplicating it).
JUMPS = (
    ("nat", "PREROUTING", "%s -j %s" % (_COMMENT, SERVICES)),
    ("nat", "OUTPUT", "%s -j %s" % (_COMMENT, SERVICES)),
    ("nat", "POSTROUTING", "%s -j %s" % (_COMMENT, POSTROUTING)),
    ("filter", "INPUT", "-m conntrack --ctstate NEW %s -j %s" % (_COMMENT, EXTERNAL)),
    ("filter", "FORWARD", "-m conntrack --ctstate NEW %s -j %s" % (_COMMENT, SERVICES)),
    ("filter", "FORWARD", "-m conntrack --ctstate NEW %s -j %s" % (_COMMENT, EXTERNAL)),
    ("filter", "FORWARD", "%s -j %s" % (_COMMENT, FORWARD)),
    ("filter", "OUTPUT", "-m conntrack --ctstate NEW %s -j %s" % (_COMMENT, SERVICES)),
)
# Docker puts its DOCKER-USER jump back at the top of FORWARD whenever it makes a
# network, and the pod network's SHEPHERD-PODNET-<hash> there accepts all pod traffic: a pod's
# packet for a cluster IP without endpoints would be accepted before our REJECT (and
# then time out on ARP). So the REJECTs are also jumped to first in DOCKER-USER, when
# Docker is there (agent/proxy/iptables.py keeps it first).
DOCKER_USER_JUMP = "-m conntrack --ctstate NEW %s -j %s" % (_COMMENT, SERVICES)


class ServicePort(collections.namedtuple(
        "ServicePort", "namespace name port_name protocol cluster_ip port node_port endpoints")):
    """One port of one Service as the proxy sees it; endpoints: sorted ((ip, port), ...), ready only."""

    @property
    def id(self):
        return "%s/%s:%s/%s" % (self.namespace, self.name, self.port_name, self.protocol)


def _hash(text):
    return base64.b32encode(hashlib.sha256(text.encode()).digest())[:16].decode()


def svc_chain(sp):
    return "SHEP-SVC-" + _hash(sp.id)


def ext_chain(sp):
    return "SHEP-EXT-" + _hash(sp.id)


def sep_chain(sp, endpoint):
    return "SHEP-SEP-" + _hash("%s %s:%d" % (sp.id, endpoint[0], endpoint[1]))


# ---- from API objects ----

def _dict(value):
    return value if isinstance(value, dict) else {}


def _valid_port(value):
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


def service_ports(services, endpoints):
    """[ServicePort] of `services` (Service objects) with the ready addresses of their
    Endpoints (`endpoints`: {(namespace, name): Endpoints object}). Headless and
    ExternalName Services have no rules; ports that cannot be read are left out."""
    out = []
    for svc in services:
        meta, spec = _dict(svc.get("metadata")), _dict(svc.get("spec"))
        cluster_ip = spec.get("clusterIP")
        if not isinstance(cluster_ip, str) or cluster_ip in ("", "None") or spec.get("type") == "ExternalName":
            continue
        key = (meta.get("namespace") or "", meta.get("name"))
        subsets = _dict(endpoints.get(key)).get("subsets")
        subsets = subsets if isinstance(subsets, list) else []
        ports = spec.get("ports")
        for port in ports if isinstance(ports, list) else []:
            if not isinstance(port, dict) or not _valid_port(port.get("port")):
                continue
            name, protocol = port.get("name") or "", port.get("protocol") or "TCP"
            node_port = port.get("nodePort") if _valid_port(port.get("nodePort")) else None
            out.append(ServicePort(key[0], key[1], name, protocol, cluster_ip, port["port"], node_port,
                                   _ready(subsets, name, protocol)))
    return sorted(out, key=lambda sp: (sp.namespace, sp.name, sp.port_name, sp.protocol))


def _ready(subsets, port_name, protocol):
    found = set()
    for subset in subsets:
        if not isinstance(subset, dict):
            continue
        ports, addresses = subset.get("ports"), subset.get("addresses")
        for port in ports if isinstance(ports, list) else []:
            if not (isinstance(port, dict) and (port.get("name") or "") == port_name
                    and (port.get("protocol") or "TCP") == protocol and _valid_port(port.get("port"))):
                continue
            for address in addresses if isinstance(addresses, list) else []:
                if isinstance(address, dict) and isinstance(address.get("ip"), str):
                    found.add((address["ip"], port["port"]))
    return tuple(sorted(found))


# ---- the rules ----

def owner(cluster_id, service_cidr, node):
    """The Owner a proxy writes: its cluster's id (an agent given no --cluster-id: its
    service CIDR, which clusters sharing a host do not share) and its node's name."""
    def safe(text):
        return re.sub(r"[^A-Za-z0-9._-]", "_", text)
    return Owner(safe(cluster_id or "service-cidr-" + str(service_cidr or "")), safe(node or ""))


def owner_rule(claim):
    """The rule of the OWNER chain holding `claim` (a Claim)."""
    return '-A %s -m comment --comment "%s%s node %s renewed %d" -j RETURN' % (
        OWNER, _OWNER_COMMENT, claim.owner.cluster, claim.owner.node, claim.renewed)


def claim_of(lines):
    """The Claim held by the OWNER chain's rules as `iptables -S` prints them, or None."""
    for line in lines:
        found = re.search(r'--comment "?%s(\S+) node (\S*) renewed (\d+)"? ' % re.escape(_OWNER_COMMENT), line)
        if found:
            return Claim(Owner(found.group(1), found.group(2)), int(found.group(3)))
    return None


def render(ports, node_ips=(), cluster_cidr=None, cache=None, owner=None):
    """{table: {chain: [rule, ...]}} of every chain we own, in a fixed order.

    node_ips: addresses node ports answer on (none: every local address);
    cluster_cidr: the pod network; traffic to a cluster IP from outside it is
    masqueraded (None: no such rule, as kube-proxy without --cluster-cidr).
    cache: a dict kept between calls (Renderer): a Service port rendered before
    with the same inputs is reused, not rendered again. Callers must not modify
    the returned rule lists.
    owner: the Claim written in the OWNER chain (None: no such chain)."""
    nat = collections.OrderedDict((c, []) for c in (SERVICES, NODEPORTS, POSTROUTING, MARK_MASQ))
    if owner:
        nat[OWNER] = [owner_rule(owner)]
    filt = collections.OrderedDict((c, []) for c in (SERVICES, EXTERNAL, FORWARD))
    nat[MARK_MASQ].append("-A %s -j MARK --or-mark %s" % (MARK_MASQ, MASQ_BIT))
    nat[POSTROUTING] += ["-A %s -m mark ! --mark %s/%s -j RETURN" % (POSTROUTING, MASQ_BIT, MASQ_BIT),
                         "-A %s -j MARK --xor-mark %s" % (POSTROUTING, MASQ_BIT),
                         '-A %s -m comment --comment "shepherd service traffic requiring SNAT" -j MASQUERADE'
                         % POSTROUTING]
    filt[FORWARD] += ["-A %s -m mark --mark %s/%s -j ACCEPT" % (FORWARD, MASQ_BIT, MASQ_BIT),
                      "-A %s -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT" % FORWARD]
    local = tuple("-d %s/32" % ip for ip in node_ips) or ("-m addrtype --dst-type LOCAL",)
    tables = {"nat": nat, "filter": filt}
    for sp in ports:
        key = (sp, local, cluster_cidr)
        piece = cache.get(key) if cache is not None else None
        if piece is None:
            piece = _port_rules(sp, local, cluster_cidr)
        if cache is not None:
            cache[key] = piece
        appended, owned = piece
        for table, chain, line in appended:
            tables[table][chain].append(line)
        for chain, rules in owned:
            nat[chain] = rules
    nat[SERVICES] += ["-A %s %s -j %s" % (SERVICES, dest, NODEPORTS) for dest in local]
    return tables


def _port_rules(sp, local, cluster_cidr):
    """One Service port's rules: ([(table, shared chain, rule)], [(own nat chain, rules)])."""
    appended, owned = [], []
    proto = sp.protocol.lower()
    match = "-p %s -m %s --dport %d" % (proto, proto, sp.port)
    comment = '-m comment --comment "%s"' % sp.id
    if not sp.endpoints:
        appended.append(("filter", SERVICES, "-A %s -d %s/32 %s %s -j REJECT --reject-with icmp-port-unreachable"
                         % (SERVICES, sp.cluster_ip, match, comment)))
        if sp.node_port:
            for dest in local:
                appended.append(("filter", EXTERNAL, "-A %s %s -p %s -m %s --dport %d %s -j REJECT --reject-with "
                                 "icmp-port-unreachable" % (EXTERNAL, dest, proto, proto, sp.node_port, comment)))
        return appended, owned
    svc = svc_chain(sp)
    appended.append(("nat", SERVICES, "-A %s -d %s/32 %s %s -j %s" % (SERVICES, sp.cluster_ip, match, comment, svc)))
    if sp.node_port:
        ext = ext_chain(sp)
        appended.append(("nat", NODEPORTS, "-A %s -p %s -m %s --dport %d %s -j %s"
                         % (NODEPORTS, proto, proto, sp.node_port, comment, ext)))
        owned.append((ext, ["-A %s -j %s" % (ext, MARK_MASQ), "-A %s -j %s" % (ext, svc)]))
    rules = []
    owned.append((svc, rules))
    if cluster_cidr:
        rules.append("-A %s ! -s %s -d %s/32 %s -j %s" % (svc, cluster_cidr, sp.cluster_ip, match, MARK_MASQ))
    count = len(sp.endpoints)
    for i, endpoint in enumerate(sp.endpoints):
        sep = sep_chain(sp, endpoint)
        pick = "" if i == count - 1 else "-m statistic --mode random --probability %.10f " % (1.0 / (count - i))
        rules.append("-A %s %s-j %s" % (svc, pick, sep))
        owned.append((sep, ["-A %s -s %s/32 -j %s" % (sep, endpoint[0], MARK_MASQ),
                            "-A %s -p %s -m %s -j DNAT --to-destination %s:%d" % (sep, proto, proto, *endpoint)]))
    return appended, owned


class Renderer:
    """render() with a cache of the Service ports of the previous call only (so it
    holds what exists now, not everything ever rendered)."""

    def __init__(self):
        self._cache = {}

    def render(self, ports, node_ips=(), cluster_cidr=None, owner=None):
        fresh = _Reuse(self._cache)
        ruleset = render(ports, node_ips, cluster_cidr, fresh, owner)
        self._cache = fresh.kept
        return ruleset


class _Reuse:
    """A cache that reads the old entries and keeps only those used (or added) now."""

    def __init__(self, old):
        self.old, self.kept = old, {}

    def get(self, key):
        return self.old.get(key)

    def __setitem__(self, key, value):
        self.kept[key] = value


def restore_text(new, old=None, present=None):
    """iptables-restore --noflush input taking the kernel from `old` (what was applied
    last, {table: {chain: rules}}; None: unknown, write everything) to `new`.
    `present`: {table: {chain names of ours seen in the kernel}} (stale ones are
    deleted too). Empty string when nothing changed."""
    out = []
    for table in TABLES:
        chains = new.get(table, {})
        before = (old or {}).get(table)
        gone = set(before or ()) | set((present or {}).get(table, ()))
        gone -= set(chains)
        changed = [c for c in chains if before is None or before.get(c) != chains[c]]
        if not changed and not gone:
            continue
        out.append("*" + table)
        out += [":%s - [0:0]" % c for c in changed]
        out += [":%s - [0:0]" % c for c in sorted(gone)]      # flushed first: -X needs an empty chain
        for chain in changed:
            out += chains[chain]
        out += ["-X %s" % c for c in sorted(gone)]
        out.append("COMMIT")
    return "\n".join(out) + "\n" if out else ""


def count_rules(ruleset):
    return sum(len(rules) for table in ruleset.values() for rules in table.values())
