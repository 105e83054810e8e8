"""The cluster zone (pure): Services and Endpoints -> DNS records, and the answer to a
question. No sockets, no clock, no dnslib: the server (server.py) turns an Answer
into a packet.

Names, as Kubernetes' DNS specification and CoreDNS's kubernetes plugin answer them:
- `<svc>.<ns>.svc.<zone>`  A: the clusterIP; headless (clusterIP None): the ready
  endpoint IPs; ExternalName: a CNAME to spec.externalName.
- `<host>.<svc>.<ns>.svc.<zone>`  A of one endpoint of a headless Service; <host> is
  the endpoint's hostname, else its IP with dashes (10-244-1-5).
- `_<port>._<proto>.<svc>.<ns>.svc.<zone>`  SRV for each named port: the Service
  name and port (headless: each ready endpoint's name and its port).
- `<a-b-c-d>.<ns>.pod.<zone>`  A a.b.c.d (CoreDNS's `pods insecure`, its default).
- `<d.c.b.a>.in-addr.arpa`  PTR of a clusterIP (the Service's name) and of a headless
  endpoint (its own name); other reverse names are forwarded like any outside name.
- a name inside the zone that does not exist: NXDOMAIN; an existing name (or one
  that only has names below it, such as `<ns>.svc.<zone>`) asked for a type it does
  not have (AAAA of an IPv4 Service): NOERROR and no answer. Both carry the zone's
  SOA in the authority section, so resolvers cache the negative answer for TTL s.
- anything outside the zone: Answer.forward, the server asks the node's resolver.
Names compare case-insensitively (RFC 4343); answers echo the question's spelling.
"""
import collections
import dataclasses
import ipaddress
import threading
from typing import List, Optional

from shepherd_ha.model.cluster_domain import DEFAULT_CLUSTER_DOMAIN

TTL = 5                  # seconds, as CoreDNS's kubernetes plugin: endpoints move often
SOA_REFRESH, SOA_RETRY, SOA_EXPIRE = 7200, 1800, 86400


@dataclasses.dataclass(frozen=True)
class Record:
    name: str            # owner name, lowercase, no trailing dot
    rtype: str           # A, AAAA, SRV, CNAME, SOA, NS, PTR
    value: object        # A/AAAA: "10.96.0.10"; CNAME/NS/PTR: a name; SRV: (prio, weight, port, target);
    ttl: int = TTL       # SOA: (mname, rname, serial, refresh, retry, expire, minimum)


@dataclasses.dataclass
class Answer:
    rcode: str = "NOERROR"        # NOERROR, NXDOMAIN, SERVFAIL (not synced yet)
    answers: List[Record] = dataclasses.field(default_factory=list)
    authority: List[Record] = dataclasses.field(default_factory=list)
    forward: bool = False         # outside the zone: ask the upstream resolver


def normalize(name):
    """'Web.Default.svc.cluster.local.' -> 'web.default.svc.cluster.local'."""
    return name.rstrip(".").lower()


def dashed(ip):
    return ip.replace(".", "-").replace(":", "-")


def reverse_name(ip):
    """'10.96.0.10' -> '10.0.96.10.in-addr.arpa' (IPv6: nibbles under ip6.arpa)."""
    return ipaddress.ip_address(ip).reverse_pointer


def _address_type(ip):
    try:
        return "AAAA" if ipaddress.ip_address(ip).version == 6 else "A"
    except ValueError:
        return None


def _ready_addresses(service, endpoints):
    """[(ip, hostname or None, {port name: (port, protocol)})] of the endpoints that
    serve (ready ones; notReady too with spec.publishNotReadyAddresses)."""
    spec = service.get("spec") or {}
    groups = ("addresses", "notReadyAddresses") if spec.get("publishNotReadyAddresses") else ("addresses",)
    out = []
    for subset in ((endpoints or {}).get("subsets") or []):
        if not isinstance(subset, dict):
            continue
        ports = {}
        for p in subset.get("ports") or []:
            if isinstance(p, dict) and isinstance(p.get("port"), int):
                ports[p.get("name") or ""] = (p["port"], (p.get("protocol") or "TCP").lower())
        for group in groups:
            for addr in subset.get(group) or []:
                if isinstance(addr, dict) and isinstance(addr.get("ip"), str) and _address_type(addr["ip"]):
                    host = addr.get("hostname") if isinstance(addr.get("hostname"), str) else None
                    out.append((addr["ip"], host or None, ports))
    return out


def service_records(service, endpoints, domain=DEFAULT_CLUSTER_DOMAIN):
    """Every record one Service (with its Endpoints, or None) puts in the zone."""
    meta = service.get("metadata") or {}
    spec = service.get("spec") or {}
    base = normalize("%s.%s.svc.%s" % (meta.get("name"), meta.get("namespace") or "default", domain))
    records = []
    if spec.get("type") == "ExternalName":
        if isinstance(spec.get("externalName"), str) and spec["externalName"]:
            records.append(Record(base, "CNAME", normalize(spec["externalName"])))
        return base, records
    cluster_ip = spec.get("clusterIP")
    ports = [p for p in spec.get("ports") or [] if isinstance(p, dict) and isinstance(p.get("port"), int)]
    if cluster_ip == "None":
        hosts = set()
        for ip, host, ep_ports in _ready_addresses(service, endpoints):
            target = "%s.%s" % ((host or dashed(ip)).lower(), base)
            rtype = _address_type(ip)
            records.append(Record(base, rtype, ip))
            if target not in hosts:
                hosts.add(target)
                records.append(Record(target, rtype, ip))
                records.append(Record(reverse_name(ip), "PTR", target))
            for name, (port, proto) in ep_ports.items():
                if name:
                    records.append(Record("_%s._%s.%s" % (name, proto, base), "SRV", (0, 100, port, target)))
    elif isinstance(cluster_ip, str) and _address_type(cluster_ip):
        records.append(Record(base, _address_type(cluster_ip), cluster_ip))
        records.append(Record(reverse_name(cluster_ip), "PTR", base))
        for p in ports:
            if p.get("name"):
                proto = (p.get("protocol") or "TCP").lower()
                records.append(Record("_%s._%s.%s" % (p["name"].lower(), proto, base), "SRV",
                                      (0, 100, p["port"], base)))
    # no clusterIP yet (not allocated): the name exists with no address
    return base, _unique(records)


def _unique(records):
    seen, out = set(), []
    for r in records:
        if r not in seen:
            seen.add(r)
            out.append(r)
    return out


class Zone:
    """The records of the cluster zone, updated from a watch of Services and
    Endpoints (thread-safe: one writer, many readers)."""

    def __init__(self, domain=DEFAULT_CLUSTER_DOMAIN, synced=True):
        self.domain = normalize(domain)
        # False until the watch has listed Services and Endpoints once: names in the
        # zone get SERVFAIL meanwhile (try again), never a wrong NXDOMAIN
        self.synced = synced
        self._lock = threading.Lock()
        self._services = {}            # (ns, name) -> Service
        self._endpoints = {}           # (ns, name) -> Endpoints
        self._owned = {}               # (ns, name) -> [Record] it put in the zone
        self._names = collections.defaultdict(list)      # name -> [Record]
        self._ancestors = collections.Counter()          # names with names below them
        self.serial = 1                # bumped on every change (SOA serial)
        for fixed in ("svc", "pod"):
            self._ancestors["%s.%s" % (fixed, self.domain)] += 1

    # ---- updates ----

    def set_service(self, namespace, name, service):
        """service None: deleted."""
        with self._lock:
            key = (namespace or "default", name)
            if service is None:
                self._services.pop(key, None)
            else:
                self._services[key] = service
            self._rebuild(key)

    def set_endpoints(self, namespace, name, endpoints):
        with self._lock:
            key = (namespace or "default", name)
            if endpoints is None:
                self._endpoints.pop(key, None)
            else:
                self._endpoints[key] = endpoints
            if key in self._services:
                self._rebuild(key)

    def replace_all(self, services=None, endpoints=None):
        """A fresh list of one kind (None: keep what is known of that kind)."""
        with self._lock:
            if services is not None:
                self._services = {_key(s): s for s in services}
            if endpoints is not None:
                self._endpoints = {_key(e): e for e in endpoints}
            for key in set(self._owned) | set(self._services):
                self._rebuild(key)

    def _rebuild(self, key):
        for record in self._owned.pop(key, []):
            rows = self._names.get(record.name)
            if rows is not None:
                if record in rows:
                    rows.remove(record)
                if not rows:
                    del self._names[record.name]
            self._count_ancestors(record.name, -1)
        service = self._services.get(key)
        if service is not None:
            base, records = service_records(service, self._endpoints.get(key), self.domain)
            owned = records or [Record(base, "NAME", None)]    # a name with no records still exists
            for record in owned:
                self._names[record.name].append(record)
                self._count_ancestors(record.name, +1)
            self._owned[key] = owned
        self.serial = (self.serial % 0xFFFFFFFF) + 1

    def _count_ancestors(self, name, delta):
        suffix = "." + self.domain
        while name.endswith(suffix):
            name = name.split(".", 1)[1]
            if name == self.domain:
                return
            self._ancestors[name] += delta
            if self._ancestors[name] <= 0:
                del self._ancestors[name]

    # ---- questions ----

    def soa(self):
        return Record(self.domain, "SOA", ("ns.dns." + self.domain, "hostmaster." + self.domain, self.serial,
                                           SOA_REFRESH, SOA_RETRY, SOA_EXPIRE, TTL))

    def answer(self, qname, qtype):
        """The Answer to `qtype` (A, AAAA, SRV, ANY, ...) for `qname` (any case)."""
        name = normalize(qname)
        if name != self.domain and not name.endswith("." + self.domain):
            if name.endswith(".arpa"):
                with self._lock:
                    rows = [r for r in self._names.get(name, ()) if r.rtype == "PTR"]
                if rows:
                    return Answer(answers=rows if qtype in ("PTR", "ANY") else [],
                                  authority=[] if qtype in ("PTR", "ANY") else [self.soa()])
            return Answer(forward=True)
        if not self.synced:
            return Answer(rcode="SERVFAIL")
        with self._lock:
            if name == self.domain:
                rows = [self.soa(), Record(self.domain, "NS", "ns.dns." + self.domain)]
                exists = True
            else:
                rows = [r for r in self._names.get(name, ()) if r.rtype != "NAME"]
                exists = bool(rows) or name in self._names or name in self._ancestors
                if not exists:
                    pod = _pod_record(name, self.domain)
                    if pod is not None:
                        rows, exists = [pod], True
            soa = self.soa()
        if not exists:
            return Answer(rcode="NXDOMAIN", authority=[soa])
        cname = [r for r in rows if r.rtype == "CNAME"]
        if cname and qtype != "CNAME":
            return Answer(answers=cname)
        matching = [r for r in rows if qtype == "ANY" or r.rtype == qtype]
        if not matching:
            return Answer(authority=[soa])
        return Answer(answers=matching)

    def sizes(self):
        with self._lock:
            return {"services": len(self._services), "endpoints": len(self._endpoints), "names": len(self._names)}


def _key(obj):
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "default", meta.get("name"))


def _pod_record(name, domain) -> Optional[Record]:
    """`a-b-c-d.<ns>.pod.<zone>` -> A a.b.c.d; None for anything else."""
    labels = name[:-len(domain) - 1].split(".")
    if len(labels) != 3 or labels[2] != "pod":
        return None
    parts = labels[0].split("-")
    if len(parts) != 4:
        return None
    try:
        ip = str(ipaddress.IPv4Address(".".join(parts)))
    except ValueError:
        return None
    return Record(name, "A", ip)


def search_names(name, namespace, domain=DEFAULT_CLUSTER_DOMAIN, ndots=5) -> List[str]:
    """The names a pod's resolver tries for `name`, in order (resolv.conf(5) with the
    search path pods get): the search domains first when the name has fewer than
    `ndots` dots, else the name itself first; a trailing dot means no search."""
    if name.endswith("."):
        return [name.rstrip(".")]
    expanded = ["%s.%s" % (name, s) for s in pod_search_path(namespace, domain)]
    return expanded + [name] if name.count(".") < ndots else [name] + expanded


def pod_search_path(namespace, domain=DEFAULT_CLUSTER_DOMAIN):
    """The search domains of a pod in `namespace` (dnsPolicy ClusterFirst)."""
    return ["%s.svc.%s" % (namespace, domain), "svc.%s" % domain, domain]
