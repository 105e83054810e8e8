"""The node's pod network: one Docker bridge network holding the node's block.

Named after the node (`shepherd-pods-<node>`), labelled as ours, with Docker's
masquerade off (rules.py masquerades only what leaves the cluster CIDR), the
block's first address as the gateway on a bridge interface `shp<8 hex>` (a Linux
interface name has at most 15 characters; two agents on one engine get two).
A network of ours with another subnet (the node got another block after being
deleted and registered again) is removed and made again once no container uses it.
"""
import hashlib
import ipaddress
import logging

import docker
import docker.errors
import docker.types

from .routes import inside

log = logging.getLogger(__name__)

LABEL_NETWORK = "shepherd.io/pod-network"   # on every network we make; its value is the node name
NAME_PREFIX = "shepherd-pods-"


def network_name(node):
    return NAME_PREFIX + node


def bridge_name(node):
    return "shp" + hashlib.sha1(node.encode()).hexdigest()[:8]


def gateway_of(pod_cidr):
    """The bridge's own address in a block: its first (also where the node's DNS listens)."""
    return str(next(ipaddress.IPv4Network(pod_cidr).hosts()))


def network_options(node, pod_cidr):
    """The arguments of create_network for `node`'s block (pure)."""
    net = ipaddress.IPv4Network(pod_cidr)
    gateway = gateway_of(net)
    return {
        "name": network_name(node), "driver": "bridge", "check_duplicate": True,
        "labels": {LABEL_NETWORK: node, "shepherd.io/pod-cidr": str(net)},
        "options": {"com.docker.network.bridge.name": bridge_name(node),
                    "com.docker.network.bridge.enable_ip_masquerade": "false",
                    "com.docker.network.bridge.enable_icc": "true"},
        "ipam": docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=str(net), gateway=gateway)]),
    }


def subnet_of(network):
    for config in ((network.get("IPAM") or {}).get("Config") or []):
        if config.get("Subnet"):
            return config["Subnet"]
    return ""


class BridgeNetwork:
    def __init__(self, api, node):
        self.api = api            # docker.APIClient
        self.node = node
        self.name = network_name(node)

    def find(self):
        for network in self.api.networks(names=[self.name]):
            if network.get("Name") == self.name:
                return self.api.inspect_network(network["Id"])
        return None

    def ensure(self, pod_cidr):
        """The network for `pod_cidr`, made if missing; raises RuntimeError when one of
        another subnet cannot be replaced yet (containers still on it)."""
        existing = self.find()
        if existing is not None:
            if subnet_of(existing) == str(ipaddress.IPv4Network(pod_cidr)):
                return existing
            if (existing.get("Labels") or {}).get(LABEL_NETWORK) != self.node:
                raise RuntimeError("a Docker network named %s exists and is not ours (no %s label): remove or "
                                   "rename it" % (self.name, LABEL_NETWORK))
            if existing.get("Containers"):
                raise RuntimeError("pod network %s has subnet %s but this node's block is now %s; %d container(s) "
                                   "still use it" % (self.name, subnet_of(existing), pod_cidr,
                                                     len(existing["Containers"])))
            log.warning("pod network %s: subnet %s replaced by this node's block %s", self.name,
                        subnet_of(existing), pod_cidr)
            self.api.remove_network(existing["Id"])
        self._remove_stale_overlap(pod_cidr)
        try:
            self.api.create_network(**network_options(self.node, pod_cidr))
        except docker.errors.APIError as exc:
            raise RuntimeError("cannot make the pod network %s (%s): %s" % (self.name, pod_cidr, exc.explanation
                                                                              or exc))
        log.info("pod network %s made: %s on bridge %s", self.name, pod_cidr, bridge_name(self.node))
        return self.find()

    def _remove_stale_overlap(self, pod_cidr):
        """Another network of ours holding this block with no container on it is left over
        (a cluster made again on this engine, `make up` after `local down`): it goes. One in use
        is another cluster's on this engine: say so."""
        want = ipaddress.IPv4Network(pod_cidr)
        for summary in our_networks(self.api):
            network = self.api.inspect_network(summary["Id"])
            subnet = subnet_of(network)
            if network.get("Name") == self.name or not subnet or not ipaddress.IPv4Network(subnet).overlaps(want):
                continue
            if network.get("Containers"):
                raise RuntimeError("block %s is already used on this Docker engine by pod network %s (node %s, "
                                   "with containers): another cluster shares this engine; give one of them another "
                                   "--cluster-cidr" % (pod_cidr, network["Name"],
                                                       (network.get("Labels") or {}).get(LABEL_NETWORK)))
            log.warning("removing the unused pod network %s (%s): this node's block %s overlaps it",
                        network["Name"], subnet, pod_cidr)
            self.api.remove_network(network["Id"])

    def attached(self):
        """{address: pod uid ('' when unknown)} of the containers on the network now (one call)."""
        found = {}
        for container in self.api.containers(all=False, filters={"network": self.name}):
            endpoint = ((container.get("NetworkSettings") or {}).get("Networks") or {}).get(self.name) or {}
            if endpoint.get("IPAddress"):
                found[endpoint["IPAddress"]] = (container.get("Labels") or {}).get("shepherd.io/pod-uid", "")
        return found


def our_networks(api, node=None, cluster_cidr=None):
    """Every pod network this agent code made on the engine (for one node, or all; with
    `cluster_cidr`, only those whose block lies in it)."""
    label = LABEL_NETWORK if node is None else "%s=%s" % (LABEL_NETWORK, node)
    found = api.networks(filters={"label": [label]})
    if cluster_cidr is None:
        return found
    within = ipaddress.ip_network(cluster_cidr, strict=False)
    return [n for n in found if any(inside(c.get("Subnet"), within)
                                    for c in ((n.get("IPAM") or {}).get("Config") or []))]
