"""Cluster DNS with the pod network (--pod-network bridge, --dns-address auto): the pod
network tells its listeners the node's block and its bridge's gateway before any pod may
attach; the node DNS waits for that gateway, then serves there (again elsewhere when the
block changes); pods asking meanwhile are refused with the reason, and a hostNetwork pod
on the Default policy does not wait for it."""
import threading

import pytest
from dnslib import DNSRecord

from agent.dns import node_dns
from agent.dns.pod_dns import resolver_config
from agent.network.bridge import gateway_of
from agent.network.pod_network import PodNetwork
from agent.runtime.base import CreateError
from dns_kit import loopback_ip, wait, web_client_and_resolv
from test_agent_pod_network import FakeIptables


class FakeBridge:
    name = "shepherd-pods-w1"

    def __init__(self):
        self.ensured = []

    def ensure(self, cidr):
        self.ensured.append(cidr)

    def attached(self):
        return {}


class FakeRoutes:
    def local_addresses(self):
        return set()

    def sync(self, desired):
        self.desired = desired


def node(name, cidr):
    return {"metadata": {"name": name}, "spec": {"podCIDR": cidr},
            "status": {"addresses": [{"type": "InternalIP", "address": "192.168.56.21"}]}}


def test_the_pod_network_tells_its_listeners_the_block_and_gateway_before_pods_may_attach():
    net = PodNetwork(client=None, docker_api=None, node="w1", cluster_cidr="10.244.0.0/16", stop=None,
                     route_table=FakeRoutes(), iptables=FakeIptables())
    net.bridge = FakeBridge()
    heard = []
    net.block_listeners.append(lambda cidr, gateway: heard.append((cidr, gateway, net.ready.is_set())))
    net.block_listeners.append(lambda cidr, gateway: 1 / 0)     # a broken listener stops nothing
    net._nodes = {"w1": node("w1", "")}
    net.sync()
    assert heard == [] and net.gateway is None and not net.ready.is_set()
    net._nodes = {"w1": node("w1", "10.244.3.0/24")}
    net.sync()
    assert heard == [("10.244.3.0/24", "10.244.3.1", False)], "told before pods may attach"
    assert net.ready.is_set() and net.gateway == "10.244.3.1" == gateway_of("10.244.3.0/24")
    net.sync()
    assert len(heard) == 1, "the same block is told once"


def test_auto_dns_waits_for_the_bridge_gateway_then_serves_there_and_follows_a_new_block(replicas, tmp_path):
    api = replicas()
    client, resolv = web_client_and_resolv(api, tmp_path)

    class Settings:     # port 0: the loopback stands for the bridge, no root needed
        dns_address, dns_port, cluster_domain, dns_resolv_conf = "auto", 0, "cluster.local", str(resolv)

    class PodNetworkStandIn:
        block_listeners = []
        error = "block 10.244.3.0/24 is already used on this Docker engine by pod network x"

    stop = threading.Event()
    dns = node_dns.build(Settings, runtime=None, client=client, stop=stop, pod_network=PodNetworkStandIn)
    assert dns is not None and dns.cluster_dns is None and len(PodNetworkStandIn.block_listeners) == 1
    dns.start()
    try:
        # the pod network's own reason, not only that it waits (a pod's event is all a user sees)
        with pytest.raises(CreateError, match="waits for the pod network .*: block 10.244.3.0/24 is already"):
            dns.pod_cluster_dns()
        pod = {"metadata": {"namespace": "shop"}, "spec": {}}
        with pytest.raises(CreateError):
            resolver_config(pod, dns.pod_cluster_dns)
        host_pod = {"metadata": {"namespace": "shop"}, "spec": {"hostNetwork": True}}
        assert resolver_config(host_pod, dns.pod_cluster_dns) is None, "Default does not wait for the DNS"
        assert not dns.serving.is_set()

        first = loopback_ip()
        PodNetworkStandIn.block_listeners[0]("10.244.3.0/24", first)
        assert dns.serving.wait(5) and dns.pod_cluster_dns().nameserver == first
        config = resolver_config(pod, dns.pod_cluster_dns)
        assert config.nameservers == (first,) and config.searches[0] == "shop.svc.cluster.local"
        assert wait(lambda: dns.zone.synced)
        old_port = dns.server.port

        def ask(host, port):
            return DNSRecord.parse(DNSRecord.question("web.default.svc.cluster.local").send(host, port, timeout=1))
        assert [str(rr.rdata) for rr in ask(first, old_port).rr] == ["10.96.0.10"]

        second = loopback_ip()
        while second == first:
            second = loopback_ip()
        PodNetworkStandIn.block_listeners[0]("10.244.7.0/24", second)
        assert dns.serving.wait(5) and dns.pod_cluster_dns().nameserver == second
        assert [str(rr.rdata) for rr in ask(second, dns.server.port).rr] == ["10.96.0.10"]
        with pytest.raises(OSError):      # the old address no longer answers (timeout or refused)
            ask(first, old_port)
    finally:
        stop.set()
        dns.shutdown()
        client.close()


def test_with_the_pod_network_dns_off_or_an_explicit_address_keep_their_meaning():
    class Settings:
        dns_address, dns_port, cluster_domain, dns_resolv_conf = "off", 0, "cluster.local", "/etc/resolv.conf"

    class PodNetworkStandIn:
        block_listeners = []
        error = "block 10.244.3.0/24 is already used on this Docker engine by pod network x"

    assert node_dns.build(Settings, None, None, threading.Event(), pod_network=PodNetworkStandIn) is None
    Settings.dns_address = "127.0.0.1"
    dns = node_dns.build(Settings, None, None, threading.Event(), pod_network=PodNetworkStandIn)
    assert dns.pod_cluster_dns().nameserver == "127.0.0.1" and PodNetworkStandIn.block_listeners == []


def test_may_bind_tells_a_port_not_allowed_from_one_taken(monkeypatch):
    import errno
    import socket

    class Refusing(socket.socket):
        def bind(self, address):
            raise OSError(errno.EACCES, "Permission denied")

    class Taken(socket.socket):
        def bind(self, address):
            raise OSError(errno.EADDRINUSE, "Address already in use")

    assert node_dns.may_bind(0)
    monkeypatch.setattr(node_dns.socket, "socket", Taken)
    assert node_dns.may_bind(53), "taken on the loopback says nothing against the bridge's address"
    monkeypatch.setattr(node_dns.socket, "socket", Refusing)
    assert not node_dns.may_bind(53)
