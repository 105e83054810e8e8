"""Cluster IPs and node ports of Services, allocated inside the FSM (pure, deterministic).

Nothing is kept beside the stored Services: what is allocated is what the other
Services hold, so a delete frees its addresses and ports by itself, a snapshot holds
everything, and every replica picks the same values. The choice is the lowest free
one (the first address of the range only for default/kubernetes), which costs one
pass over the stored Services per Service write: thousands of Services, not millions.

Rules (Kubernetes' where it has one):
- spec.clusterIP empty: allocated; "None": headless (nothing allocated); an address:
  honoured when free and inside the service CIDR, else refused. Immutable once set:
  an update that leaves it out keeps it, one that changes it is refused.
- spec.clusterIPs follows clusterIP (one IPv4 address, or ["None"]); ipFamilies
  ["IPv4"], ipFamilyPolicy SingleStack.
- type NodePort (and LoadBalancer): every port gets a nodePort from the NodePort
  range; a requested one is honoured when free, an update keeps the ones it leaves
  out. type ClusterIP takes none: carried-over node ports are dropped (the type
  changed), requested ones refused.
"""
import ipaddress

from shepherd_ha.model.service_network import KUBERNETES_SERVICE, NODE_PORT_RANGE, parse_ipv4

NODE_PORT_TYPES = ("NodePort", "LoadBalancer")


class AllocationError(Exception):
    def __init__(self, field, message):
        super().__init__("%s: %s" % (field, message))
        self.field, self.message = field, message


def _spec(obj):
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def _owner(svc):
    meta = svc.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace") or "", meta.get("name"))


def allocated(others):
    """({cluster IP: owner}, {node port: owner}) held by `others` (stored Services)."""
    ips, ports = {}, {}
    for svc in others:
        spec = _spec(svc)
        ip = spec.get("clusterIP")
        if isinstance(ip, str) and ip not in ("", "None"):
            ips[ip] = _owner(svc)
        for port in spec.get("ports") or []:
            if isinstance(port, dict) and isinstance(port.get("nodePort"), int):
                ports[port["nodePort"]] = _owner(svc)
    return ips, ports


def allocate(service, previous, others, cidr):
    """`service` (a create, or an update of `previous`) with its cluster IP and node
    ports filled in; AllocationError(field, message) when a request cannot be met.
    `others`: every other stored Service; `cidr`: an IPv4Network."""
    obj = dict(service)
    spec = obj["spec"] = dict(_spec(service))
    if spec.get("type") == "ExternalName":
        return obj
    used_ips, used_ports = allocated(others)
    _cluster_ip(obj, spec, _spec(previous), used_ips, cidr)
    _node_ports(spec, _spec(previous), used_ports)
    return obj


def _cluster_ip(obj, spec, old, used, cidr):
    wanted = spec.get("clusterIP")
    ips = spec.get("clusterIPs")
    if ips is not None:
        if not isinstance(ips, list) or not all(isinstance(i, str) for i in ips):
            raise AllocationError("spec.clusterIPs", "must be a list of addresses")
        if len(ips) > 1:
            raise AllocationError("spec.clusterIPs", "only one (IPv4) cluster IP is supported, got %d" % len(ips))
        if ips and wanted not in (None, "") and ips[0] != wanted:
            raise AllocationError("spec.clusterIPs", "must start with spec.clusterIP (%s), got %s" % (wanted, ips[0]))
        if ips and wanted in (None, ""):
            wanted = ips[0]
    families = spec.get("ipFamilies")
    if families is not None and families != ["IPv4"]:
        raise AllocationError("spec.ipFamilies", "only [IPv4] is supported, got %r" % (families,))
    before = old.get("clusterIP") or None
    if wanted in (None, ""):
        wanted = before
    elif before is not None and wanted != before:
        raise AllocationError("spec.clusterIP", "is immutable: the service has %s; delete and re-create it to "
                              "get another address" % before)
    if wanted is None:
        wanted = _lowest_free_ip(obj, used, cidr)
    elif wanted != "None" and wanted != before:
        _check_requested_ip(wanted, used, cidr)
    spec["clusterIP"] = wanted
    spec["clusterIPs"] = [wanted]
    spec["ipFamilies"] = ["IPv4"]
    spec.setdefault("ipFamilyPolicy", "SingleStack")


def _check_requested_ip(wanted, used, cidr):
    address = parse_ipv4(wanted)
    if address is None:
        raise AllocationError("spec.clusterIP", "%r is not an IPv4 address (or None for a headless service)" % wanted)
    if address not in cidr:
        raise AllocationError("spec.clusterIP", "%s is not in the service CIDR %s: leave it out to get one "
                              "allocated" % (wanted, cidr))
    if address in (cidr.network_address, cidr.broadcast_address):
        raise AllocationError("spec.clusterIP", "%s is the %s address of the service CIDR %s" % (
            wanted, "network" if address == cidr.network_address else "broadcast", cidr))
    if wanted in used:
        raise AllocationError("spec.clusterIP", "%s is already allocated to service %s: leave it out to get a "
                              "free one" % (wanted, used[wanted]))


def _lowest_free_ip(obj, used, cidr):
    meta = obj.get("metadata") or {}
    first = int(cidr.network_address) + 1
    if (meta.get("namespace"), meta.get("name")) != KUBERNETES_SERVICE:
        first += 1              # the first address is kept for default/kubernetes
    last = int(cidr.broadcast_address) - 1
    # At most len(used) + 1 steps: every step past the first hits an allocated address.
    for value in range(first, last + 1):
        candidate = str(ipaddress.IPv4Address(value))
        if candidate not in used:
            return candidate
    raise AllocationError("spec.clusterIP", "the service CIDR %s is full (%d addresses allocated): delete "
                          "services or give the servers a wider --service-cidr" % (cidr, len(used)))


def _node_ports(spec, old, used):
    ports = spec.get("ports")
    if not isinstance(ports, list):
        return
    wants = spec.get("type") in NODE_PORT_TYPES
    kept = {}            # (name, protocol) and (port, protocol) -> the previous node port
    for port in old.get("ports") or []:
        if isinstance(port, dict) and isinstance(port.get("nodePort"), int):
            protocol = port.get("protocol") or "TCP"
            kept.setdefault(("name", port.get("name") or "", protocol), port["nodePort"])
            kept.setdefault(("port", port.get("port"), protocol), port["nodePort"])
    previous = set(kept.values())
    mine = {}            # node port -> protocols this service already uses it for
    spec["ports"] = ports = [dict(p) if isinstance(p, dict) else p for p in ports]
    pending = []
    for i, port in enumerate(ports):
        if not isinstance(port, dict):
            continue
        field = "spec.ports[%d].nodePort" % i
        protocol = port.get("protocol") or "TCP"
        number = port.get("nodePort")
        if number is not None and not wants:
            if number in previous:
                del port["nodePort"]        # type changed to ClusterIP: it gives its node ports back
                continue
            raise AllocationError(field, "may not be used when type is %s (use type NodePort)"
                                  % (spec.get("type") or "ClusterIP"))
        if not wants:
            continue
        if number is None:
            pending.append((port, protocol))
            continue
        if number not in previous:
            low, high = NODE_PORT_RANGE
            if not (isinstance(number, int) and low <= number <= high):
                raise AllocationError(field, "%s is outside the NodePort range %d-%d" % (number, low, high))
            if number in used:
                raise AllocationError(field, "%d is already allocated to service %s: leave it out to get a free "
                                      "one" % (number, used[number]))
        if protocol in mine.get(number, ()):
            raise AllocationError(field, "%d is used twice for %s in this service" % (number, protocol))
        mine.setdefault(number, set()).add(protocol)
    for port, protocol in pending:
        number = kept.get(("name", port.get("name") or "", protocol)) or kept.get(("port", port.get("port"), protocol))
        if number is None or protocol in mine.get(number, ()):
            number = _lowest_free_port(used, mine)
        port["nodePort"] = number
        mine.setdefault(number, set()).add(protocol)


def _lowest_free_port(used, mine):
    low, high = NODE_PORT_RANGE
    for number in range(low, high + 1):
        if number not in used and number not in mine:
            return number
    raise AllocationError("spec.ports.nodePort", "every node port in %d-%d is allocated: delete NodePort "
                          "services" % (low, high))
