"""The pod network's address plan (pure): a cluster CIDR cut into one block per node.

The defaults live here once; `shepherd-ha server --cluster-cidr` and
`shepherd-agent --cluster-cidr` both read them. Blocks are numbered from 0 in
address order, so "the lowest free block" is the same on every replica.
"""
import ipaddress

CLUSTER_CIDR = "10.244.0.0/16"      # flannel's and kubeadm's usual pod CIDR
NODE_MASK = 24                      # one /24 per node: 254 pod addresses


class NetworkError(ValueError):
    """A cluster CIDR or node mask that cannot work; the message says why."""


def parse_plan(cluster_cidr, node_mask=NODE_MASK):
    """(IPv4Network, mask) or NetworkError with a message a person can act on."""
    try:
        net = ipaddress.IPv4Network(str(cluster_cidr), strict=True)
    except ValueError as exc:
        raise NetworkError("cluster CIDR %r is not an IPv4 network such as %s: %s"
                           % (cluster_cidr, CLUSTER_CIDR, exc))
    if isinstance(node_mask, bool) or not isinstance(node_mask, int) or not 8 <= node_mask <= 29:
        raise NetworkError("node CIDR mask /%s must be a whole number from 8 to 29" % (node_mask,))
    if node_mask < net.prefixlen:
        raise NetworkError("node CIDR mask /%d is larger than the cluster CIDR %s itself" % (node_mask, net))
    return net, node_mask


def block_count(net, mask):
    return 1 << (mask - net.prefixlen)


def block(net, mask, index):
    """Block number `index` as 'a.b.c.d/m'."""
    size = 1 << (32 - mask)
    return "%s/%d" % (ipaddress.IPv4Address(int(net.network_address) + index * size), mask)


def block_index(net, mask, cidr):
    """The number of block `cidr` in the plan, or None if it is not exactly one of its blocks."""
    try:
        sub = ipaddress.IPv4Network(str(cidr), strict=True)
    except ValueError:
        return None
    if sub.prefixlen != mask or not sub.subnet_of(net):
        return None
    return (int(sub.network_address) - int(net.network_address)) >> (32 - mask)


def pod_cidr_of(node):
    """A Node's pod CIDR ('' when it has none)."""
    spec = node.get("spec") if isinstance(node, dict) else None
    value = spec.get("podCIDR") if isinstance(spec, dict) else None
    return value if isinstance(value, str) else ""


def internal_ip_of(node):
    """A Node's InternalIP address ('' when it reports none)."""
    status = node.get("status") if isinstance(node, dict) else None
    for address in (status or {}).get("addresses") or [] if isinstance(status, dict) else []:
        if isinstance(address, dict) and address.get("type") == "InternalIP" and address.get("address"):
            return str(address["address"])
    return ""
