"""`shepherd-agent network cleanup`, the Services part: the jumps from the built-in
chains, every SHEP-* chain in nat and filter, and the service CIDR route. The pod
network's part (bridge, routes) is agent/network/'s; the command calls both."""
import logging

from .iptables import Iptables
from .node_setup import remove_service_routes

log = logging.getLogger(__name__)


def cleanup_services(iptables=None):
    """Remove what the proxy added; returns a sentence saying what went."""
    iptables = iptables or Iptables()
    chains = iptables.cleanup()
    remove_service_routes(iptables)
    return "service rules removed: %d chain(s) and their jumps, the service CIDR route" % chains
