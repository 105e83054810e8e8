"""A short form of the hollow fleet (bench/bench_scale.py): 200 hollow nodes renewing
their leases every 5 s and posting status, a kubelet simulator driven by a watch of
each node's pods (as agents hold them: bench/hollow_node_watch.py), and 5 Deployments
of 1,000 pods on a real 3-replica cluster.

Behaviour, not timings: every pod reaches Running, no replica's term moves (no
election, no leader change), no hollow node is marked NotReady while it renews its
lease, and no replica logs PySyncObj's `failed _onTick` (a tick-thread failure, e.g.
a chunked transmission of an oversized Raft entry).
"""
import os
import sys
import time
import uuid

from .helpers import call, describe, wait_for, write_with_retry

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench")
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

from fleet_checks import ReplicaSampler  # noqa: E402
from hollow_fleet import FleetProcess  # noqa: E402

NODES = 200
DEPLOYMENTS, REPLICAS = 5, 1000
CONVERGE_TIMEOUT = 240.0     # seconds; generous for a noisy 2-core machine (this is not a timing test)
# Every hollow node connects from 127.0.0.1: lift the per-address connection cap meant for real clients.
FLEET_SERVER_OPTIONS = {"max_connections_per_address": 0, "max_connections": 0}
AFTER = 20.0                 # keep the fleet running past the node grace period (15 s) after convergence


def deployment(name, replicas, tag):
    labels = {"app": name, "fleet-run": tag}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0",
                                                           "resources": {"requests": {"cpu": "10m",
                                                                                      "memory": "16Mi"}}}]}}}}


def tick_failures(cluster):
    found = []
    for ident in cluster.ids:
        with open(os.path.join(cluster.lc.dir, ident, "server.log"), errors="replace") as fh:
            found += ["%s: %s" % (ident, line.strip()) for line in fh if "failed _onTick" in line]
    return found


def test_hollow_fleet_converges_without_elections_or_false_not_ready(make_cluster):
    cluster = make_cluster(server_options=FLEET_SERVER_OPTIONS)
    urls = [cluster.url(i) for i in cluster.ids]
    tag = uuid.uuid4().hex[:6]
    sampler = ReplicaSampler(urls).start()
    # Two child processes (nodes; kubelet): a starved single process fell behind on its own renewals.
    fleet = FleetProcess(urls=urls, nodes=NODES, prefix="hollow-" + tag, count_label=("fleet-run", tag),
                         node_watches=True).start()
    try:
        stats = fleet.stats()
        assert stats["registered"] == NODES, stats
        for i in range(DEPLOYMENTS):
            resp, _ = write_with_retry("POST", urls, "/apis/apps/v1/namespaces/default/deployments",
                                       deadline_s=30, json=deployment("fleet-%s-%d" % (tag, i), REPLICAS, tag))
            assert resp.status_code == 201, describe(resp)
        want = DEPLOYMENTS * REPLICAS
        deadline = time.monotonic() + CONVERGE_TIMEOUT
        while time.monotonic() < deadline:
            pods = fleet.stats()["pods"]      # (not counting terminating pods)
            if pods["running"] >= want and pods["total"] == want:
                break
            time.sleep(1.0)
        converged = fleet.stats()
        time.sleep(AFTER)
        final = fleet.stats()
    finally:
        fleet.stop()
        terms = sampler.stop()
    readiness = final["readiness"]
    summary = ("pods at convergence %s, %.0fs later %s; terms %s; readiness %s; fleet: %d renewals, %d failed, "
               "loop lag max %.1fs" % (converged["pods"], AFTER, final["pods"], terms, readiness, final["renewals"],
                                       final["renew_failures"], final["loop_lag_max"]))
    assert converged["pods"]["running"] == want and converged["pods"]["total"] == want, (
        "not every pod reached Running within %.0fs: %s\n%s" % (CONVERGE_TIMEOUT, summary, cluster.log_tails(15)))
    assert terms["elections"] == 0 and terms["leader_changes"] == 0, "leader changes under load: %s" % summary
    assert all(r["leadership_losses"] == 0 for r in terms["per_replica"].values()), summary
    assert readiness["false_not_ready"] == 0, "nodes marked NotReady while renewing: %s" % summary
    assert final["renewals"] > 0 and final["never_renewed"] == 0, summary
    # Only the node watches drive the status writes: every pod Running is their doing.
    watches = final["node_watches"]
    assert watches["opened"] >= NODES and watches["events"] >= want and watches["relists"] == 0, watches
    assert watches["crashes"] == 0, watches
    # Every pod created once: none left over or terminating, and no ReplicaSet deleted one
    # (it would have had more than its replicas: a creation retried under a new name). The
    # kubelet's watch saw no pod of the run deleted; the SuccessfulDelete events below say
    # so too, as long as the controller manager's --event-qps let them through.
    assert final["pods"]["total"] == want and final["pods"]["terminating"] == 0, summary
    assert final["pods_deleted"] == 0, "pods of the run deleted: %s" % summary
    scale_downs = call("GET", urls[0] + "/api/v1/namespaces/default/events",
                       params={"fieldSelector": "reason=SuccessfulDelete,involvedObject.kind=ReplicaSet"}).json()
    assert not scale_downs["items"], "ReplicaSets deleted pods they had too many of: %s" % [
        e.get("message") for e in scale_downs["items"]][:5]
    failures = tick_failures(cluster)
    assert not failures, "%d PySyncObj tick failures:\n%s" % (len(failures), "\n".join(failures[:10]))


def test_hollow_kubelet_deletes_terminating_pods_for_good_as_an_agent_does(make_cluster):
    """A scale-down marks bound pods terminating; the hollow kubelet then deletes them for
    good (grace 0, uid precondition), so they leave the count and the store."""
    cluster = make_cluster(server_options=FLEET_SERVER_OPTIONS)
    urls = [cluster.url(i) for i in cluster.ids]
    tag = uuid.uuid4().hex[:6]
    name = "shrink-" + tag
    fleet = FleetProcess(urls=urls, nodes=4, prefix="hollow-" + tag, count_label=("fleet-run", tag),
                         node_watches=True).start()
    try:
        resp, _ = write_with_retry("POST", urls, "/apis/apps/v1/namespaces/default/deployments",
                                   json=deployment(name, 8, tag))
        assert resp.status_code == 201, describe(resp)
        wait_for("8 pods Running", lambda: fleet.stats()["pods"]["running"] == 8, timeout=60, interval=0.5)
        resp, _ = write_with_retry("PATCH", urls, "/apis/apps/v1/namespaces/default/deployments/" + name,
                                   json={"spec": {"replicas": 3}},
                                   headers={"Content-Type": "application/merge-patch+json"})
        assert resp.status_code == 200, describe(resp)
        stats = wait_for("5 pods deleted for good", lambda: (lambda s: s if s["pods_deleted"] == 5 and
                                                             s["pods"]["terminating"] == 0 else None)(fleet.stats()),
                         timeout=60, interval=0.5)
    finally:
        fleet.stop()
    assert stats["pods"]["total"] == stats["pods"]["running"] == 3, stats["pods"]
    assert stats["pods_finalized"] + stats["pod_gone"] >= 5, stats       # the hollow kubelet's doing
    left = call("GET", urls[0] + "/api/v1/namespaces/default/pods", params={"labelSelector": "app=" + name}).json()
    assert len(left["items"]) == 3 and not any(p["metadata"].get("deletionTimestamp") for p in left["items"]), left
