"""The proxy as the agent starts it (--proxy-mode iptables): node setup, then the
watches and the sync loop."""
import ipaddress
import logging

from .iptables import Iptables
from .node_setup import ensure_service_route, prepare_node
from .proxier import ServiceProxy
from .rules import owner

log = logging.getLogger(__name__)


def build_proxy(settings, client, stop, iptables=None, events=None):
    """A started-later ServiceProxy, or None when --proxy-mode is none. `events`: the
    agent's EventSink, for the Events about the node when its proxy stands down."""
    if settings.proxy_mode != "iptables":
        return None
    iptables = iptables or Iptables()

    def setup():                # on every full sync: a cleanup or a reboot of the bridge is repaired
        prepare_node(iptables)
        if settings.service_route_dev:
            ensure_service_route(iptables, settings.service_cidr, settings.service_route_dev)
    # Node ports answer on the node's address; on loopback (one machine), on every local one.
    node_ips = () if ipaddress.ip_address(settings.address).is_loopback else (settings.address,)
    log.info("service proxy: iptables, service CIDR %s, node ports on %s", settings.service_cidr,
             ", ".join(node_ips) or "every local address")
    return ServiceProxy(client, iptables, stop, node_ips, settings.cluster_cidr or None, setup=setup,
                        owner=owner(settings.cluster_id, settings.service_cidr, settings.node_name),
                        report=events.emit_node if events is not None else None)
