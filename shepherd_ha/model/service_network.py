"""The Service network's constants and checks, in one place: the default service CIDR
(the server's --service-cidr, the FSM's initial value, the agent's route and rules),
the NodePort range, and what a CIDR or a cluster IP must look like.

Pure (no I/O): the FSM, the API, the server's and the agent's options use it.
"""
import ipaddress

DEFAULT_SERVICE_CIDR = "10.96.0.0/12"          # Kubernetes' default
NODE_PORT_RANGE = (30000, 32767)               # inclusive, Kubernetes' default
KUBERNETES_SERVICE = ("default", "kubernetes")  # the one service that may get the first address


def parse_service_cidr(text):
    """An IPv4Network for `text`, or ValueError saying what is wrong. Host bits must be
    zero, and the range must hold at least a few addresses (a /30 or wider)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("a service CIDR is an IPv4 network such as %s" % DEFAULT_SERVICE_CIDR)
    try:
        net = ipaddress.ip_network(text.strip())
    except ValueError as exc:
        raise ValueError("%r is not a network in CIDR notation (e.g. %s): %s" % (text, DEFAULT_SERVICE_CIDR, exc))
    if net.version != 4:
        raise ValueError("%s: only IPv4 service CIDRs are supported" % text)
    if net.prefixlen > 30:
        raise ValueError("%s holds too few addresses for services: use a /30 or wider (e.g. /12)" % text)
    return net


def parse_ipv4(text):
    """An IPv4Address, or None when `text` is not one (IPv6 is not supported)."""
    try:
        address = ipaddress.ip_address(text)
    except (ValueError, TypeError):
        return None
    return address if address.version == 4 else None


def first_service_ip(cidr):
    """The address reserved for the `kubernetes` service (10.96.0.1 in the default range)."""
    return str(parse_service_cidr(cidr).network_address + 1)
