"""Cluster DNS on the pod network, as root: two nodes as network namespaces with their own
dockerd (bench/netns_nodes.py), a real one-replica control plane, real agents with
`--pod-network bridge` and the default `--dns-address auto` (their DNS sockets made in
the node's namespace, as an agent running there would: tests/integration/test_pod_network.py's
make_agent), two of them on node 1's engine.

Checked: each agent's DNS listens on its own bridge's gateway (two bridges on one engine,
two servers, no clash) and nowhere else; a pod on the agent's network gets Docker's
embedded resolver (127.0.0.11) with our search path and ndots:5, and through it resolves a
Service by its short, namespaced and full names, a headless Service to a pod on the other
node (which it then reaches by name), and an outside name through our forwarder to the
node's upstream; a pod with a sandbox on the second agent resolves through that agent's
server. Needs root: fails without it.
"""
import os

from dnslib import DNSRecord

from agent.network.bridge import gateway_of
from shepherd_ha.client import Client
from tests.unit.dns_kit import FakeUpstream

from .helpers import start_cluster
from .test_pod_network import exec_in, make_agent, pod, running_ip, wait_for
from bench.netns_nodes import NodePair

CLUSTER_IP = "10.96.77.20"


def resolved(agent, pod_name, name):
    """The address busybox ping's libc lookup gives for `name` (search path, ndots), or None."""
    code, out = exec_in(agent, pod_name, "ping", "-c", "1", "-W", "1", name)
    first = out.decode(errors="replace").splitlines()[0] if out else ""
    return first.split("(", 1)[1].split(")", 1)[0] if first.startswith("PING ") and "(" in first else None


def answers(node, server, name):
    """What the DNS server at `server` answers for `name`, asked from inside `node`."""
    reply = node.call(lambda: DNSRecord.parse(DNSRecord.question(name).send(server, 53, timeout=2)))
    return [str(rr.rdata) for rr in reply.rr]


def test_pods_on_the_pod_network_resolve_services_through_their_nodes_dns_on_the_bridge_gateway(tmp_path):
    assert os.geteuid() == 0, "this test needs root (network namespaces, dockerd, iptables); run it as root"
    cluster = start_cluster(tmp_path / "cp", replicas=1)
    agents, upstreams = {}, []
    try:
        url = list(cluster.urls.values())[0]
        client = Client([url], timeout=5.0)
        with NodePair("pd") as pair:
            try:
                _exercise(pair, client, url, agents, upstreams, tmp_path)
            finally:
                for agent in agents.values():
                    agent.shutdown(1.0)
                agents.clear()
    finally:
        for upstream in upstreams:
            upstream.close()
        cluster.stop_all()


def _exercise(pair, client, url, agents, upstreams, tmp_path):
    n1, n2 = pair.nodes
    # the node's own resolver for outside names, inside node 1's namespace
    upstream = n1.call(FakeUpstream, 53)
    upstreams.append(upstream)
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver %s\n" % upstream.host)
    state = str(tmp_path / "agents")
    extra = ["--dns-resolv-conf", str(resolv)]
    agents["pd-w1"] = make_agent(url, n1, "pd-w1", state, extra)
    agents["pd-w2"] = make_agent(url, n2, "pd-w2", state, extra)
    agents["pd-w3"] = make_agent(url, n1, "pd-w3", state, extra)      # a second agent on node 1's engine
    gateways = {}
    for name, agent in agents.items():
        wait_for(agent.pod_network.ready.is_set, "%s's pod network" % name)
        block = client.get("nodes", name)["spec"]["podCIDR"]
        gateways[name] = gateway_of(block)
        assert agent.pod_network.gateway == gateways[name]
        wait_for(agent.dns.serving.is_set, "%s's DNS serving" % name, timeout=20)
        assert (agent.dns.host, agent.dns.server.port) == (gateways[name], 53)
        assert agent.dns.pod_cluster_dns().nameserver == gateways[name]
    assert len(set(gateways.values())) == 3

    backend_labels = {"app": "pd-web"}
    backend = pod("pd-backend", "pd-w2")
    backend["metadata"]["labels"] = backend_labels
    client.create("pods", backend, namespace="default")
    for name, spec in (("web", {"clusterIP": CLUSTER_IP}), ("db", {"clusterIP": "None"})):
        client.create("services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                                   "spec": dict(spec, selector=backend_labels, ports=[{"name": "http", "port": 80}])},
                      namespace="default")
    client.create("pods", pod("pd-client", "pd-w1"), namespace="default")
    client.create("pods", pod("pd-sandboxed", "pd-w3", containers=2), namespace="default")
    ips = {p: wait_for(lambda p=p: running_ip(client, p), "pod %s running" % p, timeout=90)
           for p in ("pd-backend", "pd-client", "pd-sandboxed")}

    # every node's server answers on its own gateway, from the same watch of the API
    for name in agents:
        node = n2 if name == "pd-w2" else n1
        wait_for(lambda: answers(node, gateways[name], "web.default.svc.cluster.local") == [CLUSTER_IP],
                 "the Service in %s's DNS" % name, timeout=30)
        wait_for(lambda: answers(node, gateways[name], "db.default.svc.cluster.local") == [ips["pd-backend"]],
                 "the headless endpoints in %s's DNS" % name, timeout=30)

    a, c = agents["pd-w1"], agents["pd-w3"]
    conf = exec_in(a, "pd-client", "cat", "/etc/resolv.conf")[1].decode()
    # a user-defined network: Docker's embedded resolver, forwarding to ours (--dns)
    assert "nameserver 127.0.0.11" in conf, conf
    assert "search default.svc.cluster.local svc.cluster.local cluster.local" in conf, conf
    assert "ndots:5" in conf, conf
    for name in ("web", "web.default", "web.default.svc.cluster.local"):
        got = wait_for(lambda: resolved(a, "pd-client", name), "%s to resolve in pd-client" % name, timeout=20)
        assert got == CLUSTER_IP, (name, got)
    assert resolved(a, "pd-client", "db") == ips["pd-backend"], "headless: the pod on the other node"
    code, out = exec_in(a, "pd-client", "ping", "-c", "1", "-W", "2", "db")
    assert code == 0, out          # reached by name across nodes
    assert resolved(a, "pd-client", "example.com") == "93.184.216.34", "outside: our forwarder, the upstream"
    assert ("example.com.", "udp") in upstream.asked
    assert resolved(a, "pd-client", "nope-pd") is None
    # busybox nslookup asks our server on the gateway directly
    code, out = exec_in(a, "pd-client", "nslookup", "web.default.svc.cluster.local", gateways["pd-w1"])
    assert "Address: %s" % CLUSTER_IP in out.decode() and gateways["pd-w1"] in out.decode(), out

    # the second agent's pod (a sandbox and a joined container) asks the second agent's server
    conf = exec_in(c, "pd-sandboxed", "cat", "/etc/resolv.conf")[1].decode()
    assert "nameserver 127.0.0.11" in conf and "ndots:5" in conf, conf
    got = wait_for(lambda: resolved(c, "pd-sandboxed", "web"), "web to resolve in pd-sandboxed", timeout=20)
    assert got == CLUSTER_IP
    served = c.dns.server.counts["queries"]
    assert resolved(c, "pd-sandboxed", "web.default") == CLUSTER_IP
    assert c.dns.server.counts["queries"] > served, "the query went to pd-w3's own server"
