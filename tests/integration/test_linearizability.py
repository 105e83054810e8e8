"""Linearizable reads never go back in time: not on a deposed leader that was paused while
the others moved on, and not on a replica restarted after missing writes."""
import signal
import time

import pytest
import requests

from .helpers import (POD, PODS, Watch, call, collection_revision, deployment, describe, ensure_namespace,
                      expect, pod, rv_of, unique, write_with_retry)

pytestmark = pytest.mark.integration

MERGE = {"Content-Type": "application/merge-patch+json"}


def test_paused_old_leader_never_serves_a_stale_linearizable_read(make_cluster, request):
    c = make_cluster()
    old = c.leader()
    others = c.followers(old)
    ns = unique("paused")
    ensure_namespace(c.url(old), ns)
    path = POD.format(ns=ns, name="x")
    expect(call("POST", c.url(old) + PODS.format(ns=ns), json=pod("x", {"v": "1"})), 201)
    for ident in others:   # make sure they have applied it (a PATCH's first read is local, see below)
        expect(call("GET", c.url(ident) + path), 200)

    assert c.lc.signal(old, signal.SIGSTOP)
    request.addfinalizer(lambda: c.lc.signal(old, signal.SIGCONT))   # before stop_all (finalizers run LIFO)
    resp, _ = write_with_retry("PATCH", [c.url(o) for o in others], path, deadline_s=15.0, headers=MERGE,
                               json={"metadata": {"labels": {"v": "2"}}})
    assert resp.status_code == 200, describe(resp)
    new_rv = rv_of(resp.json())
    assert c.leader(via=others[0]) in others

    assert c.lc.signal(old, signal.SIGCONT)
    answers = []
    deadline = time.monotonic() + 6.0
    while time.monotonic() < deadline:
        try:
            got = requests.get(c.url(old) + path, timeout=5)
        except requests.RequestException as exc:
            answers.append(type(exc).__name__)
            continue
        if got.status_code == 200:
            obj = got.json()
            assert obj["metadata"]["labels"] == {"v": "2"} and rv_of(obj) >= new_rv, \
                "stale linearizable read on the resumed old leader: %s" % obj["metadata"]
            answers.append(200)
            if answers.count(200) >= 3:
                break
        else:
            assert got.status_code == 503, describe(got)
            answers.append(503)
            time.sleep(0.05)
    assert 200 in answers, "the resumed old leader never answered the read: %s" % answers


def test_restarted_replica_never_serves_stale_reads_and_its_watch_has_no_gap(make_cluster):
    c = make_cluster()
    leader = c.leader()
    lagging = c.followers(leader)[0]
    ns = unique("catchup")
    ensure_namespace(c.url(leader), ns)
    rev_before, _ = collection_revision(c.url(leader), PODS.format(ns=ns))
    c.kill(lagging)

    acked = []
    expected = {}
    for i in range(40):
        name = "p%02d" % (i % 25)
        if name in expected:
            obj = expect(call("PATCH", c.url(leader) + POD.format(ns=ns, name=name), headers=MERGE,
                              json={"metadata": {"labels": {"i": str(i)}}}), 200)
            acked.append(("MODIFIED", name, rv_of(obj)))
        else:
            obj = expect(call("POST", c.url(leader) + PODS.format(ns=ns), json=pod(name)), 201)
            acked.append(("ADDED", name, rv_of(obj)))
        expected[name] = obj

    c.lc.start(lagging)
    url = c.url(lagging)
    served = 0
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline and served < 5:
        try:
            got = requests.get(url + PODS.format(ns=ns), timeout=5)
        except requests.RequestException:
            time.sleep(0.05)
            continue
        if got.status_code == 503:
            time.sleep(0.05)
            continue
        assert got.status_code == 200, describe(got)
        items = {o["metadata"]["name"]: o for o in got.json()["items"]}
        assert items == expected, "restarted replica served a stale linearizable list (%d of %d objects)" % (
            len(items), len(expected))
        served += 1
    assert served, "the restarted replica never served a linearizable read"

    # Its watch log after the restart: from before the kill either everything, in order, or 410.
    w = Watch(url, PODS.format(ns=ns), resource_version=rev_before, timeout=15)
    try:
        w.wait_for(lambda evs: len([e for e in evs if e.get("type") != "BOOKMARK"]) >= len(acked), 5.0)
        if w.status_code == 410:
            return
        assert w.status_code == 200, (w.status_code, w.error)
        seen = [(e["type"], e["object"]["metadata"]["name"], rv_of(e)) for e in w.changes()]
        assert seen == acked, "watch on the restarted replica: %d events, %d writes" % (len(seen), len(acked))
    finally:
        w.close()


def test_update_through_a_follower_right_after_a_create_through_the_leader(cluster):
    """An acknowledged create is visible to every later request on every replica, updates
    included: PATCH, PUT and the scale subresource on a follower must find the object
    (they are not allowed to start from the follower's possibly lagging local state)."""
    leader = cluster.leader()
    followers = cluster.followers(leader)
    ns = unique("rmw")
    ensure_namespace(cluster.url(leader), ns)
    lead = cluster.url(leader)
    wrong = []
    for i in range(30):
        follower = cluster.url(followers[i % 2])
        expect(call("POST", lead + PODS.format(ns=ns), json=pod("pa%d" % i)), 201)
        resp = call("PATCH", follower + POD.format(ns=ns, name="pa%d" % i), headers=MERGE,
                    json={"metadata": {"labels": {"patched": "yes"}}})
        if resp.status_code != 200:
            wrong.append(describe(resp))
        created = expect(call("POST", lead + PODS.format(ns=ns), json=pod("pu%d" % i)), 201)
        created["metadata"]["labels"] = {"put": "yes"}
        resp = call("PUT", follower + POD.format(ns=ns, name="pu%d" % i), json=created)
        if resp.status_code != 200:
            wrong.append(describe(resp))
        if i % 3 == 0:
            expect(call("POST", lead + "/apis/apps/v1/namespaces/%s/deployments" % ns,
                        json=deployment("d%d" % i)), 201)
            resp = call("PUT", follower + "/apis/apps/v1/namespaces/%s/deployments/d%d/scale" % (ns, i),
                        json={"spec": {"replicas": 0}})
            if resp.status_code != 200:
                wrong.append(describe(resp))
    assert not wrong, "%d updates on a follower did not find an object created just before:\n%s" % (
        len(wrong), "\n".join(wrong[:5]))
