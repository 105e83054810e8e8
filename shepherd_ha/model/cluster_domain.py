"""The cluster's DNS domain: its one default and its check (pure).

Services answer as `<service>.<namespace>.svc.<domain>`; agents (--cluster-domain)
serve the zone and give pods the search path below it."""
import re

DEFAULT_CLUSTER_DOMAIN = "cluster.local"

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def cluster_domain_error(domain):
    """None when `domain` can be the cluster domain, else why not (for a person)."""
    if not isinstance(domain, str) or not domain:
        return "the cluster domain must be a DNS name such as %s" % DEFAULT_CLUSTER_DOMAIN
    if len(domain) > 200:
        return "the cluster domain %r is too long (200 characters at most, so that service names fit)" % domain
    labels = domain.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        return ("the cluster domain %r is not a DNS name: lowercase letters, digits and '-', labels "
                "separated by '.', no leading or trailing dot (e.g. %s)" % (domain, DEFAULT_CLUSTER_DOMAIN))
    return None
