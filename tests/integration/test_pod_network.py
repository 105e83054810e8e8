"""The pod network end to end, as root: two nodes as network namespaces, each with its
own dockerd, joined by a veth; a real one-replica control plane (the FSM gives the
blocks); real agents (in this process: their HTTP is on 127.0.0.1, their ip/iptables
run in the node's namespace, their Docker is the node's engine) running real pods.

Checked: blocks per node, pod IPs from them; pods ping each other across nodes and,
with a second agent on node 1's engine (as `make up` runs two agents on one Docker),
across two bridges of one host; the receiver sees the sender's pod IP; traffic leaving
the cluster CIDR is masqueraded and pod-to-pod traffic is not; our routes are exactly
the other nodes' blocks (a stale one of ours goes, the host's own stays); restarting an agent keeps the running pod and its IP;
`shepherd-agent network cleanup` leaves nothing of ours behind. Needs root: fails
without it.
"""
import ipaddress
import json
import os
import time

import pytest

from agent import config as agent_config
from agent.main import Agent, build_parser
from agent.network import cleanup, rules
from agent.network.bridge import LABEL_NETWORK
from agent.network.routes import IpCommand, RouteTable
from shepherd_ha.client import ApiError, Client

from . import helpers
from .helpers import start_cluster
from bench.netns_nodes import IMAGE, NodePair

CLUSTER = "10.244.0.0/16"


def wait_for(check, what, timeout=60.0):
    """helpers.wait_for with the check first (as test_pod_network_dns calls it too), polled gently."""
    return helpers.wait_for(what, check, timeout, interval=0.2)


def make_agent(url, netns_node, name, state_root, extra=()):
    args = build_parser().parse_args([
        "--servers", url, "--node-name", name, "--address", netns_node.address, "--bind", "127.0.0.1",
        "--docker-url", netns_node.docker_url, "--state-dir", os.path.join(state_root, name),
        "--pod-network", "bridge", "--cluster-cidr", CLUSTER, "--status-interval", "5",
        "--housekeeping-interval", "1", "--backoff-base", "1", "--backoff-max", "2", "--lease-interval", "2"]
        + list(extra))
    agent = Agent(agent_config.settings(agent_config.resolve(args, environ={})))
    # This process is in the host's namespace: the node's routes and rules are in the node's.
    agent.pod_network.routes = RouteTable(IpCommand(prefix=netns_node.prefix))
    agent.pod_network.iptables = rules.Iptables(prefix=netns_node.prefix)
    if agent.dns is not None:      # the node's DNS listens on its bridge's gateway, in the node's namespace
        agent.dns.start_server = lambda server: netns_node.call(server.start)
    agent.start()
    return agent


def pod(name, node, containers=1, command=("sleep", "3600")):
    spec = {"nodeName": node, "terminationGracePeriodSeconds": 0, "containers": [
        {"name": "c%d" % i, "image": IMAGE, "imagePullPolicy": "Never", "command": list(command)}
        for i in range(containers)]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def running_ip(client, name):
    obj = client.get("pods", name, namespace="default")
    status = obj.get("status") or {}
    return status.get("podIP") if status.get("phase") == "Running" and status.get("podIP") else None


def main_container(agent, pod_name):
    for c in agent.runtime.list({"shepherd.io/pod-name": pod_name}):
        if c.labels.get("shepherd.io/container-name") == "c0" and c.state == "running":
            return c.id
    return None


def exec_in(agent, pod_name, *command, timeout=20.0):
    cid = wait_for(lambda: main_container(agent, pod_name), "pod %s's container" % pod_name)
    return agent.runtime.exec(cid, list(command), timeout)


def ping(agent, pod_name, address):
    code, out = exec_in(agent, pod_name, "ping", "-c", "1", "-W", "2", address)
    return code == 0


def our_routes(node):
    return {r["dst"]: r.get("gateway") for r in json.loads(
        node.run("ip", "-j", "-4", "route", "show", "proto", "186").stdout or "[]")}


def masq_packets(node):
    out = node.run("iptables", "-w", "-t", "nat", "-L", rules.chains(CLUSTER).masq, "-v", "-x", "-n").stdout
    line = [ln for ln in out.splitlines() if "MASQUERADE" in ln][0]
    return int(line.split()[0])


def test_pods_reach_each_other_across_nodes_and_bridges_with_their_own_addresses(tmp_path):
    assert os.geteuid() == 0, "this test needs root (network namespaces, dockerd, iptables); run it as root"
    cluster = start_cluster(tmp_path / "cp", replicas=1)
    agents = {}
    try:
        url = list(cluster.urls.values())[0]
        client = Client([url], timeout=5.0)
        with NodePair("pn") as pair:
            try:
                _exercise(pair, url, client, agents, str(tmp_path / "agents"))
            finally:
                _stop(agents)
    finally:
        _stop(agents)
        cluster.stop_all()


def _stop(agents):
    for agent in agents.values():
        try:
            agent.shutdown(1.0)
        except Exception:  # noqa: BLE001
            pass
    agents.clear()


def _exercise(pair, url, client, agents, state):
    n1, n2 = pair.nodes
    agents["pn-w1"] = make_agent(url, n1, "pn-w1", state)
    agents["pn-w2"] = make_agent(url, n2, "pn-w2", state)
    agents["pn-w3"] = make_agent(url, n1, "pn-w3", state)       # a second agent on node 1's engine
    for name, agent in agents.items():
        wait_for(agent.pod_network.ready.is_set, "%s's pod network" % name)
    blocks = {name: client.get("nodes", name)["spec"]["podCIDR"] for name in agents}
    assert len(set(blocks.values())) == 3
    assert all(ipaddress.ip_network(b).subnet_of(ipaddress.ip_network(CLUSTER)) for b in blocks.values())
    with pytest.raises(ApiError) as refused:
        client.patch("nodes", "pn-w1", {"spec": {"podCIDR": "10.244.200.0/24"}})
    assert refused.value.code == 422 and "spec.podCIDR" in str(refused.value)

    client.create("pods", pod("pn-a", "pn-w1"), namespace="default")
    client.create("pods", pod("pn-b", "pn-w2", command=("sh", "-c", "while true; do nc -l -p 7000; done")),
                  namespace="default")
    client.create("pods", pod("pn-c", "pn-w3", containers=2), namespace="default")   # with a sandbox
    ips = {p: wait_for(lambda p=p: running_ip(client, p), "pod %s running with an IP" % p, timeout=90)
           for p in ("pn-a", "pn-b", "pn-c")}
    for p, node in (("pn-a", "pn-w1"), ("pn-b", "pn-w2"), ("pn-c", "pn-w3")):
        assert ipaddress.ip_address(ips[p]) in ipaddress.ip_network(blocks[node]), (p, ips[p], blocks)

    # routes: exactly the blocks of nodes on other hosts
    wait_for(lambda: our_routes(n2) == {blocks["pn-w1"]: n1.address, blocks["pn-w3"]: n1.address},
             "node 2's routes to both blocks on node 1")
    wait_for(lambda: our_routes(n1) == {blocks["pn-w2"]: n2.address}, "node 1's route to node 2's block")

    # the set is reconciled whole, and only routes with our tag are touched
    n1.run("ip", "route", "add", "10.244.250.0/24", "via", n2.address, "proto", "186")    # ours, stale
    n1.run("ip", "route", "add", "10.99.0.0/24", "via", n2.address)                       # the host's
    wait_for(lambda: our_routes(n1) == {blocks["pn-w2"]: n2.address}, "the stale route of ours removed",
             timeout=30)
    assert "10.99.0.0/24 via %s" % n2.address in n1.run("ip", "route", "show", "10.99.0.0/24").stdout

    a, b, c = agents["pn-w1"], agents["pn-w2"], agents["pn-w3"]
    before = masq_packets(n1)
    assert wait_for(lambda: ping(a, "pn-a", ips["pn-b"]), "a ping from pod a to pod b (across nodes)")
    assert ping(b, "pn-b", ips["pn-a"])
    assert ping(a, "pn-a", ips["pn-c"]), "same host, two bridges: DOCKER-USER must let it through"
    assert ping(b, "pn-b", ips["pn-c"])
    assert masq_packets(n1) == before, "pod-to-pod traffic must keep its source address"
    assert ping(a, "pn-a", n2.address)           # leaving the cluster CIDR: masqueraded
    assert masq_packets(n1) > before

    # the receiver sees the sender's pod IP
    exec_in(a, "pn-a", "sh", "-c", "(sleep 6 | nc %s 7000 >/dev/null 2>&1 &)" % ips["pn-b"])
    wait_for(lambda: ips["pn-a"] + ":" in exec_in(b, "pn-b", "netstat", "-tn")[1].decode(),
             "pod b to see a connection from pod a's own address", timeout=10)

    # an agent restart changes nothing for the running pod
    first_id = main_container(a, "pn-a")
    a.shutdown()
    agents["pn-w1"] = a = make_agent(url, n1, "pn-w1", state)
    wait_for(a.pod_network.ready.is_set, "the restarted agent's pod network")
    assert a.pod_network.addresses.assign(_uid(client, "pn-a")) == ips["pn-a"]
    time.sleep(2)
    assert main_container(a, "pn-a") == first_id and running_ip(client, "pn-a") == ips["pn-a"]
    client.create("pods", pod("pn-d", "pn-w1"), namespace="default")
    ip_d = wait_for(lambda: running_ip(client, "pn-d"), "pod d running", timeout=60)
    assert ip_d not in ips.values()
    assert ping(a, "pn-d", ips["pn-b"])

    # cleanup: stop the agents, remove node 1's pods, then everything of ours goes
    for agent in agents.values():
        agent.shutdown()
    agents.clear()
    n1.run("sh", "-c", "docker -H %s rm -f $(docker -H %s ps -aq) >/dev/null 2>&1 || true"
           % (n1.docker_url, n1.docker_url))
    removed, failures = cleanup.run(cleanup.CleanupContext(docker_url=n1.docker_url,
                                                           command_prefix=tuple(n1.prefix)))
    assert failures == [], failures
    assert our_routes(n1) == {}
    names = rules.chains(CLUSTER)
    assert n1.run("iptables", "-w", "-t", "nat", "-S", names.masq, check=False).returncode != 0
    assert n1.run("iptables", "-w", "-S", names.forward, check=False).returncode != 0
    assert names.forward not in n1.run("iptables", "-w", "-S", "DOCKER-USER").stdout
    left = n1.run("docker", "-H", n1.docker_url, "network", "ls", "-q", "--filter",
                  "label=" + LABEL_NETWORK).stdout.split()
    assert left == []
    assert any("network shepherd-pods-pn-w1" in r for r in removed)
    assert any("network shepherd-pods-pn-w3" in r for r in removed)


def _uid(client, name):
    return client.get("pods", name, namespace="default")["metadata"]["uid"]


if __name__ == "__main__":      # pragma: no cover
    pytest.main([__file__, "-q"])
