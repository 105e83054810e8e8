"""Validation of a pod's dnsPolicy and dnsConfig, with Kubernetes' limits (pure)."""
import ipaddress

from ._checks import join
from .names import show

DNS_POLICIES = ("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None")
MAX_NAMESERVERS = 3          # glibc reads 3 (MAXNS)
MAX_SEARCHES = 32            # Kubernetes' MaxDNSSearchPaths
MAX_SEARCH_CHARS = 2048      # Kubernetes' MaxDNSSearchListChars


def validate_pod_dns(causes, prefix, spec):
    policy = causes.enum(join(prefix, "dnsPolicy"), spec.get("dnsPolicy"), DNS_POLICIES)
    f = join(prefix, "dnsConfig")
    config = causes.dict(f, spec.get("dnsConfig"))
    nameservers = causes.string_list(f + ".nameservers", (config or {}).get("nameservers")) or []
    if len(nameservers) > MAX_NAMESERVERS:
        causes.add(f + ".nameservers", "at most %d nameservers (a resolver reads no more), got %d"
                   % (MAX_NAMESERVERS, len(nameservers)))
    for i, ns in enumerate(nameservers):
        try:
            ipaddress.ip_address(ns)
        except ValueError:
            causes.add("%s.nameservers[%d]" % (f, i), "%s is not an IP address" % show(ns))
    searches = causes.string_list(f + ".searches", (config or {}).get("searches")) or []
    if len(searches) > MAX_SEARCHES or len(" ".join(searches)) > MAX_SEARCH_CHARS:
        causes.add(f + ".searches", "at most %d search domains of %d characters in all"
                   % (MAX_SEARCHES, MAX_SEARCH_CHARS))
    for i, search in enumerate(searches):
        if not search or any(c.isspace() for c in search):
            causes.add("%s.searches[%d]" % (f, i), "%s is not a domain name" % show(search))
    for i, option in enumerate(causes.list(f + ".options", (config or {}).get("options")) or []):
        fo = "%s.options[%d]" % (f, i)
        if not isinstance(option, dict):
            causes.add(fo, "must be an object with a name (and an optional value), got %s" % show(option))
            continue
        name = causes.string(fo + ".name", option.get("name"), required=True, non_empty=True)
        value = causes.string(fo + ".value", option.get("value"))
        if name and any(c.isspace() or c == ":" for c in name):
            causes.add(fo + ".name", "%s is not a resolver option name (e.g. ndots, timeout, edns0)" % show(name))
        if value and any(c.isspace() for c in value):
            causes.add(fo + ".value", "%s must not contain spaces" % show(value))
    if policy == "None" and not nameservers:
        causes.add(f + ".nameservers", 'dnsPolicy "None" needs at least one nameserver in dnsConfig')
