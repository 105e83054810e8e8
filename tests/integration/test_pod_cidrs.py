"""Pod CIDRs on real replicas: `--cluster-cidr` reaches the FSM through the leader's node
IPAM controller, every replica holds the same blocks, a node left without one says why
(condition and Event), and a deleted node's block goes to it."""

from shepherd_ha.client import Client
from tests import waiting

from .helpers import start_cluster


def wait_for(check, what, timeout=30.0):
    return waiting.wait_for(what, check, timeout, interval=0.2)


def node(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {},
            "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.1"}]}}


def condition(obj, kind):
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def test_blocks_from_the_configured_cidr_and_the_node_left_without_one(tmp_path):
    cluster = start_cluster(tmp_path, replicas=3, server_options={"cluster_cidr": "10.250.0.0/23"})
    try:
        urls = list(cluster.urls.values())
        client = Client(urls, timeout=5.0)
        for name in ("pc-a", "pc-b", "pc-c"):
            client.create("nodes", node(name))
        cidrs = {n: wait_for(lambda n=n: client.get("nodes", n)["spec"].get("podCIDR"),
                             "a block for %s" % n) for n in ("pc-a", "pc-b")}
        assert sorted(cidrs.values()) == ["10.250.0.0/24", "10.250.1.0/24"]
        left = wait_for(lambda: condition(client.get("nodes", "pc-c"), "NetworkUnavailable"),
                        "pc-c's NetworkUnavailable condition")
        assert (left["status"], left["reason"]) == ("True", "CIDRNotAvailable")
        assert "10.250.0.0/23" in left["message"]
        events = client.list("events", "default")["items"]
        assert any(e["reason"] == "CIDRNotAvailable" and e["involvedObject"]["name"] == "pc-c" for e in events)
        for url in urls:     # every replica holds the same blocks
            one = Client([url], timeout=5.0)
            assert {n: one.get("nodes", n, consistent=False)["spec"].get("podCIDR") for n in cidrs} == cidrs
        freed = cidrs["pc-a"]
        client.delete("nodes", "pc-a")
        got = wait_for(lambda: client.get("nodes", "pc-c")["spec"].get("podCIDR"), "pc-c's block")
        assert got == freed
        cond = wait_for(lambda: (condition(client.get("nodes", "pc-c"), "NetworkUnavailable") or {}).get(
            "status") == "False" and condition(client.get("nodes", "pc-c"), "NetworkUnavailable"),
            "the condition cleared")
        assert cond["reason"] == "CIDRAssigned"
    finally:
        cluster.stop_all()
