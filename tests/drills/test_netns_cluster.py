"""NetnsCluster on real network namespaces: every replica and agent is its own host.

Needs root and `ip netns`; without them these tests FAIL (they never skip). Every wait
is bounded; processes are signalled only by the PIDs the cluster recorded.
"""
import os
import subprocess
import sys
import time
import uuid

import pytest
import requests

from shepherd_ha.cli import netns
from shepherd_ha.cli.netns_cluster import FORWARD_TAG, RESERVATIONS, NetnsCluster

from .conftest import netns_or_fail

WAIT = 30.0           # seconds for any election / readiness change (a noisy 2-core machine)


def _get(url, timeout=2.0, **kwargs):
    try:
        return requests.get(url, timeout=timeout, **kwargs)
    except requests.RequestException:
        return None


def _wait(what, predicate, timeout=WAIT, interval=0.2):
    """Poll predicate() until it returns something truthy; fail naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    pytest.fail("%s: not within %.0fs (last: %r)" % (what, timeout, last))


def _leaders(cluster, ids):
    """{id: term} of the replicas among ids that say they lead."""
    found = {}
    for ident in ids:
        state = cluster.replica_status(ident, timeout=1.0)
        if state and state["role"] == "leader":
            found[ident] = state["term"]
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    netns_or_fail()
    c = NetnsCluster(str(tmp_path_factory.mktemp("netns")))
    c.create(3)
    request.addfinalizer(c.destroy)
    c.start_all()
    c.wait_ready(WAIT)
    return c


def test_every_replica_has_its_own_namespace_and_address(cluster):
    addresses = set()
    for ident in cluster.ids():
        ns, address = cluster.netns(ident), cluster.address(ident)
        inside = netns.run(["ip", "-4", "-o", "addr", "show", "dev", "eth0"], namespace=ns).stdout
        assert address + "/24" in inside, "%s: %s not on eth0 in %s: %s" % (ident, address, ns, inside)
        addresses.add(address)
        # The process runs inside that namespace: its net namespace is the one `ip netns` names.
        pid = cluster.pid(ident)
        assert pid, "%s is not running" % ident
        assert os.readlink("/proc/%d/ns/net" % pid) == "net:[%d]" % os.stat("/run/netns/" + ns).st_ino, ident
    assert len(addresses) == 3


def test_api_reachable_from_root_namespace(cluster):
    for url in cluster.api_urls():
        assert url.startswith("https://"), "netns clusters serve TLS: %s" % url
        reply = _get(url + "/readyz", verify=cluster.verify)
        assert reply is not None and reply.status_code == 200, "%s/readyz from the root namespace: %r" % (
            url, reply and reply.text)
        assert not url.startswith("http://127."), "%s is loopback, not a namespace address" % url


def test_isolated_leader_loses_and_majority_elects_new_leader_then_heal(cluster):
    old = cluster.wait_ready(WAIT)
    others = [i for i in cluster.ids() if i != old]
    cluster.isolate(old)
    try:
        new = _wait("a new leader among %s after isolating %s" % (others, old),
                    lambda: _leaders(cluster, others))
        assert old not in new
        # The isolated replica still answers the root namespace but knows no leader any more.
        _wait("isolated %s reports not ready" % old,
              lambda: (lambda r: r is not None and r.status_code == 503)(
                  _get(cluster.replica(old)["api"] + "/readyz", verify=cluster.verify)))
        # Writes go on through the majority.
        name = "netns-%s" % uuid.uuid4().hex[:8]
        url = cluster.replica(others[0])["api"] + "/api/v1/namespaces"
        reply = requests.post(url, json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                              timeout=10, verify=cluster.verify)
        assert reply.status_code == 201, reply.text
    finally:
        removed = cluster.heal(old)
    assert removed >= 2, "heal removed %d rules" % removed
    assert not netns.tagged_rules(cluster.netns(old))
    cluster.wait_ready(WAIT, ids=cluster.ids())
    leaders = _wait("exactly one leader after heal", lambda: (lambda l: l if len(l) == 1 else None)(
        _leaders(cluster, cluster.ids())))
    assert len(leaders) == 1
    # The healed replica catches up with the write made while it was cut off.
    _wait("%s sees the namespace written during the cut" % old,
          lambda: (lambda r: r is not None and r.status_code == 200)(
              _get(cluster.replica(old)["api"] + "/api/v1/namespaces/" + name, verify=cluster.verify)))


def test_disconnect_cuts_the_root_namespace_too_and_reconnect_restores(cluster):
    ident = cluster.ids()[-1]
    url = cluster.replica(ident)["api"] + "/healthz"
    cluster.disconnect(ident)
    try:
        assert _get(url, timeout=1.0, verify=cluster.verify) is None, "%s still answers with its link down" % ident
    finally:
        cluster.reconnect(ident)
    _wait("%s answers after reconnect" % ident, lambda: _get(url, timeout=1.0, verify=cluster.verify))
    cluster.wait_ready(WAIT, ids=cluster.ids())


def test_agent_runs_in_its_own_namespace_and_registers_its_address(cluster):
    name = "w-%s" % uuid.uuid4().hex[:6]
    cluster.add_agent(name, "hollow", ["--lease-interval", "1"])
    cluster.start_agent(name)
    try:
        node = _wait("node %s registered" % name, lambda: (lambda r: r.json() if r is not None and r.ok else None)(
            _get(cluster.api_urls()[0] + "/api/v1/nodes/" + name, verify=cluster.verify)))
        addresses = [a["address"] for a in (node.get("status") or {}).get("addresses") or []]
        assert cluster.address(name) in addresses, addresses
        assert cluster.address(name) not in [cluster.address(i) for i in cluster.ids()]
    finally:
        cluster.stop_agent(name)


def test_two_clusters_get_different_subnets(tmp_path):
    netns_or_fail()
    a, b = NetnsCluster(str(tmp_path / "a")), NetnsCluster(str(tmp_path / "b"))
    a.create(1)
    try:
        b.create(1)
        try:
            assert a.network()["prefix"] != b.network()["prefix"]
            assert a.network()["bridge"] != b.network()["bridge"]
            assert a.netns("r1") != b.netns("r1")
        finally:
            b.teardown_network()
    finally:
        a.teardown_network()


def test_teardown_leaves_no_namespace_veth_bridge_or_rule(tmp_path):
    netns_or_fail()
    c = NetnsCluster(str(tmp_path / "t"))
    c.create(2)
    c.add_agent("w1", "hollow")
    c.setup_network()
    c.setup_network()   # idempotent
    c.isolate("r1")
    net = c.network()
    hosts = c.hosts()
    assert {h["netns"] for h in hosts} <= netns.namespaces()
    c.teardown_network()
    c.teardown_network()   # idempotent
    left_ns = {h["netns"] for h in hosts} & netns.namespaces()
    assert not left_ns, "namespaces left: %s" % left_ns
    for link in [h["veth"] for h in hosts] + [net["bridge"]]:
        assert not netns.link_exists(link), "link %s left behind" % link
    forward = netns.run(["iptables", "-S", "FORWARD"]).stdout
    ours = [line for line in forward.splitlines() if "-i %s " % net["bridge"] in line and FORWARD_TAG in line]
    assert not ours, "FORWARD rules left: %s" % ours
    assert not os.path.exists(os.path.join(RESERVATIONS, str(net["index"])))
    assert "%s.1" % net["prefix"] not in netns.root_addresses()


def test_local_up_netns_and_down(tmp_path):
    """`shepherd-ha local up --netns` starts a namespaced cluster with a hollow agent;
    `local down` stops it and removes its network."""
    netns_or_fail()
    directory = str(tmp_path / "cli")
    cmd = [sys.executable, "-m", "shepherd_ha.cli.main", "local"]
    up = subprocess.run(cmd + ["up", "--netns", "--agents", "1", "--dir", directory], capture_output=True,
                        text=True, timeout=180)
    c = NetnsCluster(directory)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "10.213." in up.stdout and "node node-1 Ready" in up.stdout, up.stdout
        hosts = c.hosts()
        assert len(hosts) == 4 and {h["netns"] for h in hosts} <= netns.namespaces()
    finally:
        down = subprocess.run(cmd + ["down", "--dir", directory], capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    assert not {h["netns"] for h in hosts} & netns.namespaces()
    assert not netns.link_exists(c.network()["bridge"])
    assert all(c.pid(i) is None for i in c.ids())


def test_without_root_create_and_local_up_say_so(monkeypatch, tmp_path, capsys):
    from shepherd_ha.cli import main as cli_main
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(netns.NetnsError, match="need root"):
        NetnsCluster(str(tmp_path / "a")).create(3)
    status = cli_main.main(["local", "up", "--netns", "--dir", str(tmp_path / "b")])
    assert status == 1
    assert "need root" in capsys.readouterr().err
    assert not os.path.exists(str(tmp_path / "b" / "cluster.yaml"))
