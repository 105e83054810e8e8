"""Watches: cross-replica delivery, selectors, resume on another replica, 410 Gone."""
import threading
import time

import pytest
import requests

from .helpers import (POD, PODS, Watch, assert_status, call, collection_revision, describe, ensure_namespace,
                      expect, pod, rv_of, unique, write_with_retry)

pytestmark = pytest.mark.integration

MERGE = {"Content-Type": "application/merge-patch+json"}


def test_watch_on_one_replica_sees_writes_made_on_another(cluster):
    leader = cluster.leader()
    watched, writer = cluster.followers(leader)[0], leader
    ns = unique("watch")
    ensure_namespace(cluster.url(writer), ns)
    rev, _ = collection_revision(cluster.url(watched), PODS.format(ns=ns))
    w = Watch(cluster.url(watched), PODS.format(ns=ns), resource_version=rev, timeout=30)
    try:
        url = cluster.url(writer)
        created = expect(call("POST", url + PODS.format(ns=ns), json=pod("w1", {"v": "1"})), 201)
        patched = expect(call("PATCH", url + POD.format(ns=ns, name="w1"), headers=MERGE,
                              json={"metadata": {"labels": {"v": "2"}}}), 200)
        deleted = expect(call("DELETE", url + POD.format(ns=ns, name="w1")), 200)
        assert w.wait_for(lambda evs: len(evs) >= 3, 10.0), (w.status_code, w.error, w.events)
        events = w.changes()
        assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"], events
        rvs = [rv_of(e) for e in events]
        assert rvs == sorted(set(rvs)), rvs
        assert rvs == [rv_of(created), rv_of(patched), rv_of(deleted)]
        assert rvs[0] > rev
        assert events[0]["object"] == created
        assert events[1]["object"] == patched
        assert events[2]["object"]["metadata"]["uid"] == created["metadata"]["uid"]
        assert events[2]["object"]["metadata"]["labels"] == {"v": "2"}   # last state before the delete
    finally:
        w.close()


def test_watch_with_label_selector_sees_objects_enter_and_leave(cluster):
    ids = cluster.ids
    ns = unique("watchsel")
    ensure_namespace(cluster.url(ids[0]), ns)
    rev, _ = collection_revision(cluster.url(ids[2]), "/api/v1/pods")
    w = Watch(cluster.url(ids[2]), "/api/v1/pods", resource_version=rev, timeout=30,
              params={"labelSelector": "tier=web,suite=%s" % ns})
    try:
        url = cluster.url(ids[1])
        path = POD.format(ns=ns, name="s1")
        expect(call("POST", url + PODS.format(ns=ns), json=pod("other", {"tier": "db", "suite": ns})), 201)
        a = expect(call("POST", url + PODS.format(ns=ns), json=pod("s1", {"tier": "web", "suite": ns})), 201)
        b = expect(call("PATCH", url + path, headers=MERGE, json={"metadata": {"labels": {"tier": "db"}}}), 200)
        c = expect(call("PATCH", url + path, headers=MERGE, json={"metadata": {"labels": {"tier": "web"}}}), 200)
        d = expect(call("PATCH", url + path, headers=MERGE, json={"metadata": {"labels": {"x": "y"}}}), 200)
        e = expect(call("DELETE", url + path), 200)
        assert w.wait_for(lambda evs: len(evs) >= 5, 10.0), (w.status_code, w.error, w.events)
        got = [(ev["type"], ev["object"]["metadata"]["name"], rv_of(ev)) for ev in w.changes()]
        assert got == [("ADDED", "s1", rv_of(a)), ("DELETED", "s1", rv_of(b)), ("ADDED", "s1", rv_of(c)),
                       ("MODIFIED", "s1", rv_of(d)), ("DELETED", "s1", rv_of(e))], got
    finally:
        w.close()


def test_watch_response_starts_promptly(cluster):
    """A watcher learns at once whether its watch was accepted (200) or refused (410, 400):
    the response headers must not wait for the first event or the idle keep-alive."""
    url = cluster.url(cluster.ids[0])
    ns = unique("idle")
    ensure_namespace(url, ns)
    rev, _ = collection_revision(url, PODS.format(ns=ns))
    start = time.monotonic()
    try:
        resp = requests.get(url + PODS.format(ns=ns), params={"watch": "1", "resourceVersion": str(rev),
                                                              "timeoutSeconds": "10"},
                            stream=True, timeout=(3, 2.0))
    except requests.ReadTimeout:
        pytest.fail("no response headers within 2 s for a watch on an idle collection (took %.1fs+)"
                    % (time.monotonic() - start))
    try:
        assert resp.status_code == 200
    finally:
        resp.close()


def _writer(urls, ns, count, acked, stop, pace=0.03):
    """Sequential writes (creates, label patches, deletes) with idempotent retries.
    Appends (type, name, revision) of each acknowledged write to `acked`."""
    path = PODS.format(ns=ns)
    live = []
    deadline = time.monotonic() + 25.0
    for i in range(count):
        if stop.is_set() or time.monotonic() > deadline:
            return
        if i % 5 == 3 and live:
            name = live[-1]
            resp, _ = write_with_retry("PATCH", urls, path + "/" + name, headers=MERGE,
                                       json={"metadata": {"labels": {"i": str(i)}}})
            kind = "MODIFIED"
        elif i % 7 == 6 and live:
            name = live.pop(0)
            resp, _ = write_with_retry("DELETE", urls, path + "/" + name)
            kind = "DELETED"
        else:
            name = "p%03d" % i
            resp, _ = write_with_retry("POST", urls, path, json=pod(name))
            live.append(name)
            kind = "ADDED"
        assert resp.status_code in (200, 201), describe(resp)
        acked.append((kind, name, rv_of(resp.json())))
        time.sleep(pace)


@pytest.mark.parametrize("watched_role", ["follower", "leader"])
def test_watch_resumes_on_another_replica_without_gap_or_duplicate(make_cluster, watched_role):
    c = make_cluster()
    leader = c.leader()
    followers = c.followers(leader)
    if watched_role == "follower":
        a, b = followers
        writer_urls = [c.url(leader)]
    else:
        a, b = leader, followers[0]
        writer_urls = [c.url(f) for f in followers]
    ns = unique("resume")
    ensure_namespace(writer_urls[0], ns)
    rev0, _ = collection_revision(c.url(a), PODS.format(ns=ns))

    acked, stop, failure = [], threading.Event(), []

    def run():
        try:
            _writer(writer_urls, ns, 90, acked, stop)
        except BaseException as exc:   # reported by the main thread
            failure.append(exc)
    writer = threading.Thread(target=run, daemon=True)
    w1 = Watch(c.url(a), PODS.format(ns=ns), resource_version=rev0, timeout=60)
    w2 = None
    try:
        writer.start()
        assert w1.wait_for(lambda evs: len(evs) >= 20, 15.0), (w1.status_code, w1.error, len(w1.events))
        c.kill(a)
        assert w1.ended.wait(5.0), "watch on a SIGKILLed replica did not end"
        first = w1.changes()
        last_seen = rv_of(first[-1])
        w2 = Watch(c.url(b), PODS.format(ns=ns), resource_version=last_seen, timeout=60)
        writer.join(30.0)
        assert not writer.is_alive(), "writer did not finish"
        assert not failure, failure
        final = acked[-1][2]
        assert len([x for x in acked if x[2] > last_seen]) >= 10, "too few writes after the kill to test resume"
        assert w2.wait_for(lambda evs: any(rv_of(e) >= final for e in evs if e.get("type") != "BOOKMARK"),
                           15.0), (w2.status_code, w2.error, len(w2.events), final)
        second = w2.changes()
    finally:
        stop.set()
        w1.close()
        if w2 is not None:
            w2.close()

    seen = [(e["type"], e["object"]["metadata"]["name"], rv_of(e)) for e in first + second]
    rvs = [x[2] for x in seen]
    dupes = sorted({r for r in rvs if rvs.count(r) > 1})
    assert not dupes, "revisions delivered twice across the resume: %s" % dupes
    assert rvs == sorted(rvs), "events out of revision order: %s" % rvs
    missing = sorted({x[2] for x in acked} - set(rvs))
    assert not missing, "acknowledged writes never delivered (gap): %s" % missing
    assert seen == acked, "events differ from the acknowledged writes"


def test_watch_from_expired_revision_is_410_then_list_and_watch_works(make_cluster):
    c = make_cluster(server_options={"watch_log_size": 20})
    url = c.url(c.ids[0])
    for i in range(50):
        expect(call("POST", c.url(c.ids[i % 3]) + PODS.format(ns="default"), json=pod("g%02d" % i)), 201)
    rev, items = collection_revision(url, PODS.format(ns="default"))
    assert len(items) == 50
    for ident in c.ids:
        for path in (PODS.format(ns="default"), "/api/v1/pods"):
            resp = requests.get(c.url(ident) + path, params={"watch": "1", "resourceVersion": "1"},
                                stream=True, timeout=(3, 10))
            try:
                body = assert_status(resp, 410)
                assert body["reason"] == "Expired", body
            finally:
                resp.close()

    # Inside the log: exactly the last 5 changes, in order.
    recent = Watch(c.url(c.ids[1]), PODS.format(ns="default"), resource_version=rev - 5, timeout=20)
    # From the list's revision: only what comes next.
    w = Watch(c.url(c.ids[2]), PODS.format(ns="default"), resource_version=rev, timeout=20)
    try:
        assert recent.wait_for(lambda evs: len(evs) >= 5, 10.0), (recent.status_code, recent.error)
        assert [rv_of(e) for e in recent.changes()][:5] == list(range(rev - 4, rev + 1))
        created = expect(call("POST", url + PODS.format(ns="default"), json=pod("after-list")), 201)
        assert w.wait_for(lambda evs: len(evs) >= 1, 10.0), (w.status_code, w.error)
        assert [(e["type"], rv_of(e)) for e in w.changes()] == [("ADDED", rv_of(created))]
        assert rv_of(created) == rev + 1
    finally:
        recent.close()
        w.close()
