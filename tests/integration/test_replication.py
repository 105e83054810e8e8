"""Writes through any replica, linearizable reads everywhere, leader failover, full restarts."""
import time

import pytest

from .helpers import (POD, PODS, call, deployment, describe, ensure_namespace, expect, pod, service,
                      unique, write_with_retry)

pytestmark = pytest.mark.integration

MERGE = {"Content-Type": "application/merge-patch+json"}


def test_write_through_follower_reads_linearizably_everywhere(cluster):
    leader = cluster.leader()
    followers = cluster.followers(leader)
    assert len(followers) == 2 and leader not in followers
    ns = unique("lin")
    ensure_namespace(cluster.url(followers[0]), ns)
    for i in range(8):
        writer = cluster.url(followers[i % 2])
        name = "p%d" % i
        created = expect(call("POST", writer + PODS.format(ns=ns), json=pod(name, {"i": str(i)})), 201)
        for ident in cluster.ids:   # immediately, no resourceVersion: linearizable on every replica
            got = expect(call("GET", cluster.url(ident) + POD.format(ns=ns, name=name)), 200)
            assert got["metadata"]["uid"] == created["metadata"]["uid"], ident
            assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"], ident
            listed = expect(call("GET", cluster.url(ident) + PODS.format(ns=ns)), 200)
            assert name in [o["metadata"]["name"] for o in listed["items"]], ident
            assert int(listed["metadata"]["resourceVersion"]) >= int(created["metadata"]["resourceVersion"])

        patched = expect(call("PATCH", writer + POD.format(ns=ns, name=name), headers=MERGE,
                              json={"metadata": {"labels": {"i": "x%d" % i}}}), 200)
        assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
        for ident in cluster.ids:
            got = expect(call("GET", cluster.url(ident) + POD.format(ns=ns, name=name)), 200)
            assert got["metadata"]["labels"] == {"i": "x%d" % i}, ident
            assert got["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"], ident

        if i % 2:
            deleter = cluster.url(followers[(i + 1) % 2])
            expect(call("DELETE", deleter + POD.format(ns=ns, name=name)), 200)
            for ident in cluster.ids:
                resp = call("GET", cluster.url(ident) + POD.format(ns=ns, name=name))
                assert resp.status_code == 404, "%s still serves a deleted pod: %s" % (ident, describe(resp))


def _pod_names(cluster, ident, ns):
    body = expect(call("GET", cluster.url(ident) + PODS.format(ns=ns)), 200)
    return {o["metadata"]["name"]: o for o in body["items"]}


def test_leader_sigkill_writes_resume_within_two_seconds(make_cluster):
    c = make_cluster()
    old_leader = c.leader()
    old_term = [r for r in c.view(old_leader)["replicas"] if r["id"] == old_leader][0]["term"]
    survivors = c.followers(old_leader)
    ns = unique("failover")
    ensure_namespace(c.url(survivors[0]), ns)
    before = {}
    for i in range(5):
        before["pre%d" % i] = expect(call("POST", c.url(survivors[i % 2]) + PODS.format(ns=ns),
                                          json=pod("pre%d" % i)), 201)

    killed_at = time.monotonic()
    c.kill(old_leader)
    resp, _ = write_with_retry("POST", [c.url(s) for s in survivors], PODS.format(ns=ns), deadline_s=15.0,
                               attempt_timeout=5.0, json=pod("after-kill"))
    first_success = time.monotonic() - killed_at
    assert resp.status_code == 201, describe(resp)
    assert first_success < 2.0, "first acknowledged write %.2fs after SIGKILL of the leader (want < 2 s)" \
        % first_success

    new_leader = c.leader(via=survivors[0])
    assert new_leader in survivors
    view = c.view(survivors[1])
    assert view["leader"] == new_leader
    new_term = [r for r in view["replicas"] if r["id"] == new_leader][0]["term"]
    assert new_term > old_term, "new leader %s reports term %s, old term was %s" % (new_leader, new_term, old_term)
    dead = [r for r in view["replicas"] if r["id"] == old_leader][0]
    assert dead["reachable"] is False, dead

    for ident in survivors:     # nothing acknowledged before or after the kill is lost
        names = _pod_names(c, ident, ns)
        assert set(names) == set(before) | {"after-kill"}, ident
        for name, obj in before.items():
            assert names[name]["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


def _workload(c, ns):
    """200 pods plus some services and deployments, some updated, some deleted.
    Returns {(collection path, name): last acknowledged object} and the last revision."""
    urls = [c.url(i) for i in c.ids]
    ensure_namespace(urls[0], ns)
    expected = {}
    last = 0
    pods_path = PODS.format(ns=ns)

    def ack(key, obj):
        nonlocal last
        expected[key] = obj
        last = max(last, int(obj["metadata"]["resourceVersion"]))

    for i in range(200):
        name = "p%03d" % i
        ack((pods_path, name), expect(call("POST", urls[i % 3] + pods_path, json=pod(name, {"n": str(i % 5)})), 201))
    svc_path = "/api/v1/namespaces/%s/services" % ns
    dep_path = "/apis/apps/v1/namespaces/%s/deployments" % ns
    for i in range(6):
        ack((svc_path, "s%d" % i), expect(call("POST", urls[i % 3] + svc_path, json=service("s%d" % i)), 201))
        ack((dep_path, "d%d" % i), expect(call("POST", urls[i % 3] + dep_path, json=deployment("d%d" % i)), 201))
    for i in range(0, 200, 4):      # label updates
        name = "p%03d" % i
        ack((pods_path, name), expect(call("PATCH", urls[i % 3] + pods_path + "/" + name, headers=MERGE,
                                           json={"metadata": {"labels": {"updated": "yes"}}}), 200))
    for i in range(0, 200, 10):     # status updates
        name = "p%03d" % i
        ack((pods_path, name), expect(call("PATCH", urls[i % 3] + pods_path + "/" + name + "/status",
                                           headers=MERGE, json={"status": {"phase": "Running"}}), 200))
    for i in range(6):              # scale
        ack((dep_path, "d%d" % i), expect(call("PATCH", urls[i % 3] + dep_path + "/d%d" % i, headers=MERGE,
                                               json={"spec": {"replicas": i + 2}}), 200))
    for i in range(0, 200, 7):      # deletes
        name = "p%03d" % i
        gone = expect(call("DELETE", urls[(i + 2) % 3] + pods_path + "/" + name), 200)
        last = max(last, int(gone["metadata"]["resourceVersion"]))
        del expected[(pods_path, name)]
    gone = expect(call("DELETE", urls[0] + svc_path + "/s0"), 200)
    last = max(last, int(gone["metadata"]["resourceVersion"]))
    del expected[(svc_path, "s0")]
    return expected, last


def _comparable(path, obj):
    """Pods and services: the whole object. Deployments: what the client wrote (the leader's
    deployment controller keeps their status and revision annotation, bumping resourceVersion)."""
    if not path.endswith("/deployments"):
        return obj
    meta = obj["metadata"]
    return {"uid": meta["uid"], "generation": meta["generation"], "labels": meta.get("labels"),
            "creationTimestamp": meta["creationTimestamp"], "spec": obj["spec"]}


def _assert_state(c, ns, expected, last):
    paths = sorted({p for p, _ in expected})
    for ident in c.ids:
        for path in paths:
            body = expect(call("GET", c.url(ident) + path), 200)
            # (objects a controller made for our deployments, if any, are not ours to compare)
            got = {o["metadata"]["name"]: o for o in body["items"] if not o["metadata"].get("ownerReferences")}
            want = {name: obj for (p, name), obj in expected.items() if p == path}
            missing = sorted(set(want) - set(got))
            extra = sorted(set(got) - set(want))
            assert not missing and not extra, "%s %s: missing %s, unexpected %s" % (ident, path, missing, extra)
            changed = [n for n in want if _comparable(path, got[n]) != _comparable(path, want[n])]
            assert not changed, "%s %s: objects differ after restart, e.g. %s: %s != %s" % (
                ident, path, changed[0], got[changed[0]], want[changed[0]])
            assert int(body["metadata"]["resourceVersion"]) >= last, \
                "%s: store revision went back to %s, last acknowledged write was %d" % (
                    ident, body["metadata"]["resourceVersion"], last)


@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_full_restart_keeps_every_acknowledged_write(make_cluster, how):
    c = make_cluster()
    ns = unique("persist")
    expected, last = _workload(c, ns)
    _assert_state(c, ns, expected, last)

    if how == "sigkill":
        for ident in c.ids:
            c.kill(ident)
    else:
        c.stop_all()
    assert c.running() == []
    c.start()
    c.wait_ready(ids=c.ids)
    _assert_state(c, ns, expected, last)

    # The revision continues from where it was: watchers resuming by revision depend on it.
    resp, _ = write_with_retry("POST", [c.url(i) for i in c.ids], PODS.format(ns=ns), json=pod("after-restart"))
    assert resp.status_code == 201, describe(resp)
    assert int(resp.json()["metadata"]["resourceVersion"]) > last
