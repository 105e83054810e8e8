"""/healthz, /readyz, /metrics, /version and the cluster view on a healthy cluster,
then the view after a replica is killed (last test: it degrades this module's cluster)."""
import os
import re
import socket
import time

import pytest
import requests

from .helpers import PODS, Cluster, assert_no_internal_errors, call, expect, pod

pytestmark = pytest.mark.integration

REPLICA_FIELDS = {"id": str, "api": str, "raft": str, "role": str, "term": int, "commitIndex": int,
                  "appliedIndex": int, "reachable": bool}
METRICS = ("shepherd_raft_term", "shepherd_raft_commit_index", "shepherd_raft_applied_index",
           "shepherd_raft_is_leader", "shepherd_api_requests_total", "shepherd_store_revision",
           "shepherd_store_objects")


def _metric(text, name):
    m = re.search(r"^%s(?:\{[^}]*\})?\s+([0-9.e+-]+)$" % re.escape(name), text, re.M)
    assert m, "metric %s missing" % name
    return float(m.group(1))


def test_healthz_and_readyz(cluster):
    for ident in cluster.ids:
        health = call("GET", cluster.url(ident) + "/healthz")
        assert health.status_code == 200 and health.text.strip() == "ok"
        ready = call("GET", cluster.url(ident) + "/readyz")
        assert ready.status_code == 200, (ident, ready.text)


def test_metrics(cluster):
    leader = cluster.leader()
    expect(call("POST", cluster.url(leader) + PODS.format(ns="default"), json=pod("metered")), 201)
    texts = {ident: call("GET", cluster.url(ident) + "/metrics").text for ident in cluster.ids}
    for ident, text in texts.items():
        for name in METRICS:
            assert re.search(r"^%s(\{| )" % name, text, re.M), "%s: %s missing from /metrics" % (ident, name)
        assert _metric(text, "shepherd_raft_applied_index") >= 1
        assert _metric(text, "shepherd_raft_commit_index") >= 1
        assert _metric(text, "shepherd_raft_term") >= 1
    assert sum(_metric(t, "shepherd_raft_is_leader") for t in texts.values()) == 1
    assert _metric(texts[leader], "shepherd_raft_is_leader") == 1
    assert re.search(r'^shepherd_api_requests_total\{[^}]*code="201"[^}]*\} [1-9]', texts[leader], re.M), \
        "the create is not counted on the replica that served it"
    assert len({_metric(t, "shepherd_raft_term") for t in texts.values()}) == 1


def test_version_and_replica(cluster):
    for ident in cluster.ids:
        version = expect(call("GET", cluster.url(ident) + "/version"), 200)
        assert version["replica"] == ident and version["version"]
        me = expect(call("GET", cluster.url(ident) + "/shepherd/v1/replica"), 200)
        assert me["id"] == ident and me["reachable"] is True and me["api"] == cluster.url(ident)


def test_cluster_view_from_every_replica(cluster):
    leader = cluster.leader()
    spec = {r["id"]: r for r in cluster.lc.spec()["replicas"]}
    for ident in cluster.ids:
        view = cluster.view(ident)
        assert view["self"] == ident
        assert view["leader"] == leader
        assert [r["id"] for r in view["replicas"]] == sorted(cluster.ids)
        for r in view["replicas"]:
            for field, kind in REPLICA_FIELDS.items():
                assert isinstance(r.get(field), kind), "%s: %s.%s = %r" % (ident, r.get("id"), field, r.get(field))
            assert r["reachable"] is True
            assert r["api"] == spec[r["id"]]["api"] and r["raft"] == spec[r["id"]]["raft"]
        leaders = [r["id"] for r in view["replicas"] if r["role"] == "leader"]
        assert leaders == [leader], "%s sees leaders %s" % (ident, leaders)
        assert {r["role"] for r in view["replicas"] if r["id"] != leader} == {"follower"}
        assert len({r["term"] for r in view["replicas"]}) == 1


def test_no_request_was_answered_500(cluster):
    assert_no_internal_errors(cluster)


def test_killed_replica_is_listed_unreachable(cluster):
    leader = cluster.leader()
    victim = cluster.followers(leader)[0]
    cluster.kill(victim)
    for ident in [i for i in cluster.ids if i != victim]:
        view = cluster.view(ident)
        row = [r for r in view["replicas"] if r["id"] == victim][0]
        assert row["reachable"] is False, row
        assert row["api"] == cluster.url(victim)
        assert [r["id"] for r in view["replicas"] if r["role"] == "leader" and r["reachable"]] == [leader]
        assert view["leader"] == leader
    # Two of three still form a quorum: writes and linearizable reads keep working.
    start = time.monotonic()
    expect(call("POST", cluster.url(leader) + PODS.format(ns="default"), json=pod("two-of-three")), 201)
    assert time.monotonic() - start < 2.0
    other = [i for i in cluster.ids if i not in (victim, leader)][0]
    expect(call("GET", cluster.url(other) + PODS.format(ns="default") + "/two-of-three"), 200)
    assert call("GET", cluster.url(other) + "/readyz").status_code == 200


def test_replica_that_cannot_bind_its_raft_port_says_so(tmp_path, request):
    """A replica whose Raft port is taken (here by an ordinary outgoing connection using it as
    its local port, as any ephemeral client socket can) must not pass for a healthy member that
    merely waits for an election: it exits, or logs the bind failure, or /readyz names it."""
    c = Cluster(tmp_path / "bind")
    raft_port = int(c.lc.replica("r1")["raft"].rsplit(":", 1)[1])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", raft_port))
    squatter.connect(listener.getsockname())
    request.addfinalizer(lambda: (squatter.close(), listener.close()))
    c.lc.start_all()
    request.addfinalizer(c.stop_all)
    c.wait_ready(ids=["r2", "r3"])       # the other two form a cluster

    log_path = os.path.join(c.lc.dir, "r1", "server.log")
    said = None
    deadline = time.monotonic() + 6.0
    while time.monotonic() < deadline and said is None:
        if c.lc.pid("r1") is None:
            said = "exited"
            break
        with open(log_path, errors="replace") as fh:
            log = fh.read()
        later = "\n".join(line for line in log.splitlines() if "shepherd_ha.server: replica r1:" not in line)
        if str(raft_port) in later and re.search(r"bind|in use", later, re.I):
            said = "logged"
            break
        try:
            ready = requests.get(c.url("r1") + "/readyz", timeout=2)
            if str(raft_port) in ready.text or re.search(r"bind|in use", ready.text, re.I):
                said = "readyz"
        except requests.RequestException:
            pass
        time.sleep(0.2)
    assert said, "r1 cannot bind Raft port %d but neither exits, logs it nor reports it in /readyz " \
        "(readyz: %r)" % (raft_port, call("GET", c.url("r1") + "/readyz").text.strip())
