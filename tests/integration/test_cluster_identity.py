"""Cluster identity on real processes: a replica started with another cluster's id is
refused by its peers (and both sides log why), a data dir of another cluster refuses to
start, and an agent configured for another cluster is refused with a message saying so."""
import os
import subprocess
import sys
import time

import requests
import yaml

from shepherd_ha.client import ApiError, Client
from shepherd_ha.cluster_identity import new_cluster_id

from .helpers import call, expect


def _log(cluster, ident):
    with open(os.path.join(cluster.lc.dir, ident, "server.log"), errors="replace") as fh:
        return fh.read()


def _set_server_option(cluster, ident, **options):
    path = os.path.join(cluster.lc.dir, ident, "server.yaml")
    with open(path) as fh:
        server = yaml.safe_load(fh)
    server.update(options)
    with open(path, "w") as fh:
        yaml.safe_dump(server, fh)


def _answers(url):
    try:
        return call("GET", url + "/healthz", timeout=2.0).status_code == 200
    except requests.RequestException:
        return False


def _wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("not within %.0fs: %s" % (timeout, what))


def test_a_replica_of_another_cluster_is_refused_by_its_peers(make_cluster):
    cluster = make_cluster()
    ours = cluster.lc.cluster_id()
    data = os.path.join(cluster.lc.dir, "r3", "data")
    assert open(os.path.join(data, "cluster-id")).read().strip() == ours
    cluster.lc.stop("r3")
    os.rename(data, data + ".ours")
    os.makedirs(data)
    theirs = new_cluster_id()
    _set_server_option(cluster, "r3", cluster_id=theirs)       # a replica of another cluster, at r3's address
    cluster.lc.start("r3")
    refusal = "refused a Raft connection: its messages belong to cluster %s, this replica to cluster %s"
    for ident in ("r1", "r2"):
        _wait(lambda: (refusal % (theirs, ours)) in _log(cluster, ident), 20, "%s logs the refusal" % ident)
    # PySyncObj dials from the higher address only, so r3's peers never send it a message to
    # refuse: r3 learns it from their APIs, in its cluster view.
    _wait(lambda: _answers(cluster.url("r3")), 20, "r3's API answers")
    seen_by_r3 = {r["id"]: r for r in cluster.view("r3")["replicas"]}
    for ident in ("r1", "r2"):
        assert seen_by_r3[ident]["reachable"] is False, seen_by_r3[ident]
        assert "names cluster %s, but this is cluster %s" % (theirs, ours) in seen_by_r3[ident]["error"]
    # It never joins: no leader, nothing replicated; the others keep their quorum and serve.
    ready = call("GET", cluster.url("r3") + "/readyz", timeout=3.0)
    assert ready.status_code == 503, ready.text
    me = expect(call("GET", cluster.url("r3") + "/shepherd/v1/replica"), 200)
    assert me["clusterId"] == theirs and me["revision"] == 0 and me["leader"] is None
    expect(call("POST", cluster.url("r1") + "/api/v1/namespaces", json={"metadata": {"name": "still-writing"}}), 201)
    view = cluster.view("r1")
    r3 = [r for r in view["replicas"] if r["id"] == "r3"][0]
    assert r3["reachable"] is False and "another cluster" in r3["error"], r3

    # The data dir now belongs to `theirs`: configured back to `ours`, the server refuses to start.
    cluster.lc.stop("r3")
    _set_server_option(cluster, "r3", cluster_id=ours)
    config = os.path.join(cluster.lc.dir, "r3", "server.yaml")
    done = subprocess.run([sys.executable, "-m", "shepherd_ha.cli.main", "server", "--config", config],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "belongs to cluster %s, but --cluster-id says %s" % (theirs, ours) in done.stderr, done.stderr

    # Its own data back: it rejoins and catches up.
    os.rename(data, data + ".theirs")
    os.rename(data + ".ours", data)
    cluster.lc.start("r3")
    cluster.wait_ready(ids=["r1", "r2", "r3"])
    got = _wait(lambda: call("GET", cluster.url("r3") + "/api/v1/namespaces/still-writing",
                             params={"resourceVersion": "0"}).status_code == 200, 20, "r3 catches up")
    assert got


def test_an_agent_configured_for_another_cluster_is_refused(cluster, tmp_path):
    ours = expect(call("GET", cluster.url("r1") + "/version"), 200)["clusterId"]
    theirs = new_cluster_id()
    servers = ",".join(cluster.url(i) for i in cluster.ids)
    base = [sys.executable, "-m", "agent.main", "--servers", servers, "--runtime", "hollow",
            "--state-dir", str(tmp_path / "state")]
    done = subprocess.run(base + ["--node-name", "bk-wrong", "--cluster-id", theirs], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "this agent's config names cluster %s, but this is cluster %s" % (theirs, ours) in done.stderr
    assert call("GET", cluster.url("r1") + "/api/v1/nodes/bk-wrong").status_code == 404

    # The API refuses a client configured for another cluster on every request, any replica.
    with Client([cluster.url("r2")], cluster_id=theirs) as client:
        try:
            client.list("pods")
        except ApiError as exc:
            assert exc.code == 421 and "another cluster" in str(exc), exc
        else:
            raise AssertionError("a client of another cluster was served")

    # With the right id the same agent registers its node.
    proc = subprocess.Popen(base + ["--node-name", "bk-right", "--cluster-id", ours], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        _wait(lambda: call("GET", cluster.url("r1") + "/api/v1/nodes/bk-right").status_code == 200, 30,
              "the agent with the right cluster id registers")
    finally:
        proc.terminate()
        proc.wait(15)


def test_data_dirs_from_before_cluster_ids_adopt_one_alike_and_say_so(make_cluster):
    cluster = make_cluster()
    expect(call("POST", cluster.url("r1") + "/api/v1/namespaces", json={"metadata": {"name": "old-data"}}), 201)
    cluster.stop_all()
    for ident in cluster.ids:           # as a release before cluster ids left them
        os.remove(os.path.join(cluster.lc.dir, ident, "data", "cluster-id"))
        path = os.path.join(cluster.lc.dir, ident, "server.yaml")
        with open(path) as fh:
            server = yaml.safe_load(fh)
        del server["cluster_id"]
        with open(path, "w") as fh:
            yaml.safe_dump(server, fh)
    cluster.start()
    from shepherd_ha.cluster_identity import derived_cluster_id
    adopted = derived_cluster_id(cluster.lc.spec()["raft_password"])
    for ident in cluster.ids:
        assert "has no cluster id and none is configured (--cluster-id): adopting %s" % adopted in _log(cluster, ident)
        assert expect(call("GET", cluster.url(ident) + "/version"), 200)["clusterId"] == adopted
    assert call("GET", cluster.url("r3") + "/api/v1/namespaces/old-data").status_code == 200
