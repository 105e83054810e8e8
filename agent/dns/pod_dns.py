"""A pod's resolver configuration (pure): dnsPolicy and dnsConfig as Kubernetes reads
them -> the nameservers, search domains and options Docker writes into the pod's
/etc/resolv.conf (its --dns, --dns-search and --dns-opt).

Only the container that owns the pod's network namespace gets them: Docker refuses
them on a container joining another's network (`conflicting options: dns and the
network mode`) and gives a joining container the owner's resolv.conf, so every
container of a multi-container pod reads the sandbox's file.

- ClusterFirst (the default): the node's DNS server, `<ns>.svc.<zone> svc.<zone>
  <zone>`, ndots:5. On hostNetwork it means Default, as in Kubernetes.
- ClusterFirstWithHostNet: ClusterFirst, hostNetwork or not.
- Default: the node's resolver (Docker copies the node's resolv.conf).
- None: dnsConfig alone.
dnsConfig is merged into any of them: nameservers and searches appended (duplicates
dropped; 3 and 32 at most), options replacing those of the same name.
"""
import dataclasses
from typing import Optional, Tuple

from shepherd_ha.model.cluster_domain import DEFAULT_CLUSTER_DOMAIN
from shepherd_ha.model.pod_dns_validation import MAX_NAMESERVERS, MAX_SEARCHES

from .records import pod_search_path

NDOTS = 5


@dataclasses.dataclass(frozen=True)
class ClusterDNS:
    """What this node's agent tells pods: its DNS server's address and the zone."""
    nameserver: str
    domain: str = DEFAULT_CLUSTER_DOMAIN


@dataclasses.dataclass(frozen=True)
class ResolverConfig:
    nameservers: Tuple[str, ...] = ()
    searches: Tuple[str, ...] = ()
    options: Tuple[str, ...] = ()          # "ndots:5", "edns0"


def _merge(base, config):
    config = config if isinstance(config, dict) else {}
    nameservers, searches, options = list(base.nameservers), list(base.searches), list(base.options)
    for ns in config.get("nameservers") or []:
        if isinstance(ns, str) and ns not in nameservers:
            nameservers.append(ns)
    for search in config.get("searches") or []:
        if isinstance(search, str) and search and search not in searches:
            searches.append(search)
    for option in config.get("options") or []:
        if not isinstance(option, dict) or not isinstance(option.get("name"), str) or not option["name"]:
            continue
        name = option["name"]
        options = [o for o in options if o.split(":", 1)[0] != name]
        value = option.get("value")
        options.append("%s:%s" % (name, value) if value not in (None, "") else name)
    return ResolverConfig(tuple(nameservers[:MAX_NAMESERVERS]), tuple(searches[:MAX_SEARCHES]), tuple(options))


def resolver_config(pod, cluster: Optional[ClusterDNS], node_resolver: Optional[ResolverConfig] = None):
    """The ResolverConfig of the pod, or None for Docker's own (the node's resolv.conf).
    cluster: None when this node serves no cluster DNS (ClusterFirst then means
    Default, as the kubelet without --cluster-dns), or a callable giving it, asked only
    for the cluster policies (it may raise while the node's DNS has no address yet: a
    hostNetwork pod on Default does not wait for it). node_resolver: the node's own
    resolv.conf, needed only when dnsConfig adds to the Default policy."""
    spec = pod.get("spec") or {}
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    config = spec.get("dnsConfig")
    if policy == "ClusterFirst" and spec.get("hostNetwork"):
        policy = "Default"
    if policy in ("ClusterFirst", "ClusterFirstWithHostNet"):
        if callable(cluster):
            cluster = cluster()
        if cluster is None:
            policy = "Default"
        else:
            namespace = (pod.get("metadata") or {}).get("namespace") or "default"
            base = ResolverConfig((cluster.nameserver,), tuple(pod_search_path(namespace, cluster.domain)),
                                  ("ndots:%d" % NDOTS,))
            return _merge(base, config)
    if policy == "None":
        return _merge(ResolverConfig(), config)
    if not config:
        return None                       # Default: Docker copies the node's resolv.conf
    return _merge(node_resolver or ResolverConfig(), config)


def parse_node_resolver(text):
    """The node's resolv.conf text -> ResolverConfig (the last search line wins, as in glibc)."""
    nameservers, searches, options = [], [], []
    for line in text.splitlines():
        parts = line.split("#", 1)[0].split(";", 1)[0].split()
        if len(parts) < 2:
            continue
        if parts[0] == "nameserver":
            nameservers.append(parts[1])
        elif parts[0] in ("search", "domain"):
            searches = parts[1:]
        elif parts[0] == "options":
            options.extend(parts[1:])
    return ResolverConfig(tuple(nameservers[:MAX_NAMESERVERS]), tuple(searches), tuple(options))
