"""Client.watch: streaming, bookmarks, resumption on another replica, 410.

Against the real API app over the in-memory store (tests/unit/real_api.py, conftest's replicas)."""
import threading
import time

import pytest

from shepherd_ha.client import Client, NoReplicaReachable, WatchExpired, failover
from shepherd_ha.client.http_client import spread_order
from shepherd_ha.api import watch as watch_module
from real_api import free_port


@pytest.fixture(autouse=True)
def quick_bookmarks(monkeypatch):
    """The real server's idle keep-alive every 0.2 s instead of 5 s (timing only, not semantics)."""
    monkeypatch.setattr(watch_module, "BOOKMARK_INTERVAL", 0.2)


def pod(name, **labels):
    return {"metadata": {"name": name, "labels": labels or {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def collect(gen, until, timeout=10.0):
    """Events of gen (bookmarks skipped) until until(event) is true."""
    out = []
    box = {}

    def run():
        try:
            for ev in gen:
                if ev["type"] == "BOOKMARK":
                    continue
                out.append(ev)
                if until(ev):
                    return
        except Exception as exc:  # noqa: BLE001
            box["error"] = exc
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "watch did not deliver in time; got %r" % [names(out)]
    if "error" in box:
        raise box["error"]
    return out


def names(events):
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events]


def writer(store, steps, delay=0.05):
    """Run the (callable) steps in a thread, delay apart."""
    def run():
        for step in steps:
            time.sleep(delay)
            step()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_watch_from_revision_streams_changes_in_order(replicas, store):
    a = replicas()
    store.put("pods", pod("before"))
    rv = store.revision()
    c = Client(a.url)
    writer(store, [lambda: store.put("pods", pod("p1")),
                   lambda: store.put("pods", pod("p1", app="db")),
                   lambda: store.remove("pods", "p1")])
    events = collect(c.watch("pods", "default", resource_version=rv),
                     lambda e: e["type"] == "DELETED")
    assert names(events) == [("ADDED", "p1"), ("MODIFIED", "p1"), ("DELETED", "p1")]
    revs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert revs == sorted(revs) and revs[0] > rv
    assert a.requests[-1]["query"]["resourceVersion"] == str(rv)
    assert a.requests[-1]["query"]["allowWatchBookmarks"] == "true"


def test_watch_without_revision_lists_first(replicas, store):
    a = replicas()
    store.put("pods", pod("x"))
    store.put("pods", pod("y"))
    store.put("pods", pod("other", app="db"))
    c = Client(a.url)
    gen = c.watch("pods", "default", label_selector="app=web")
    first = [next(gen) for _ in range(3)]
    assert names(first[:2]) == [("ADDED", "x"), ("ADDED", "y")]
    assert first[2]["type"] == "BOOKMARK"
    assert first[2]["object"]["metadata"]["resourceVersion"] == str(store.revision())
    writer(store, [lambda: store.put("pods", pod("z"))])
    assert names(collect(gen, lambda e: True)) == [("ADDED", "z")]
    watch_req = [r for r in a.requests if r["query"].get("watch")][0]
    assert watch_req["query"]["labelSelector"] == "app=web"


def test_watch_resumes_on_the_next_replica_without_duplicates_or_gaps(replicas, store):
    a, b = replicas(), replicas()
    store.put("pods", pod("p0"))
    rv = store.revision()
    c = Client([a.url, b.url], retry_deadline=5)
    steps = [lambda i=i: store.put("pods", pod("p%d" % i)) for i in range(1, 4)]
    steps.append(a.stop)                                   # replica a dies mid-stream
    steps += [lambda i=i: store.put("pods", pod("p%d" % i)) for i in range(4, 8)]
    writer(store, steps)
    events = collect(c.watch("pods", "default", resource_version=rv),
                     lambda e: e["object"]["metadata"]["name"] == "p7")
    assert names(events) == [("ADDED", "p%d" % i) for i in range(1, 8)]
    assert c.last_server == b.url
    resumed = [r for r in b.requests if r["query"].get("watch")]
    assert resumed and int(resumed[0]["query"]["resourceVersion"]) >= rv + 3


def test_watch_resumes_after_a_silent_replica(replicas, store):
    a, b = replicas(), replicas()
    rv = store.revision()
    c = Client([a.url, b.url], retry_deadline=5)
    steps = [lambda: store.put("pods", pod("p1")),
             lambda: setattr(a, "frozen", True),          # a hangs: no events, no bookmarks
             lambda: store.put("pods", pod("p2")),
             lambda: store.put("pods", pod("p3"))]
    writer(store, steps)
    events = collect(c.watch("pods", "default", resource_version=rv, read_timeout=0.6),
                     lambda e: e["object"]["metadata"]["name"] == "p3")
    assert names(events) == [("ADDED", "p1"), ("ADDED", "p2"), ("ADDED", "p3")]
    assert c.last_server == b.url


def test_bookmarks_advance_the_resume_revision(replicas, store):
    a, b = replicas(), replicas()
    rv = store.revision()
    store.put("services", {"metadata": {"name": "unrelated"}})  # not a pod
    c = Client([a.url, b.url], retry_deadline=5)
    gen = c.watch("pods", "default", resource_version=rv)
    ev = next(gen)     # at once: the stream is established at rv
    assert ev["type"] == "BOOKMARK" and ev["object"]["metadata"]["resourceVersion"] == str(rv)
    ev = next(gen)     # the idle keep-alive: past the service change no pod watcher sees
    assert ev["type"] == "BOOKMARK"
    assert ev["object"]["metadata"]["resourceVersion"] == str(store.revision())
    a.stop()
    writer(store, [lambda: store.put("pods", pod("p1"))])
    assert names(collect(gen, lambda e: True)) == [("ADDED", "p1")]
    resumed = [r for r in b.requests if r["query"].get("watch")][0]
    assert resumed["query"]["resourceVersion"] == str(rv + 1)


def test_410_before_the_stream_raises_watch_expired(replicas, store):
    a = replicas()
    store.put("pods", pod("p1"))
    old = store.revision()
    store.put("pods", pod("p2"))
    store.compact()
    c = Client(a.url)
    with pytest.raises(WatchExpired) as ei:
        next(c.watch("pods", "default", resource_version=old))
    assert ei.value.code == 410


def test_410_error_event_inside_the_stream_raises_watch_expired(replicas, store):
    a = replicas()
    c = Client(a.url)
    gen = c.watch("pods", "default", resource_version=store.revision(), bookmarks=False)
    writer(store, [lambda: store.put("pods", pod("p1"))])
    assert names([next(gen)]) == [("ADDED", "p1")]
    store.install_snapshot(("pods", pod("p2")))   # the replica jumps past p2: the stream cannot go on
    with pytest.raises(WatchExpired):
        next(gen)


def test_stop_event_interrupts_a_blocked_read(replicas, store):
    a = replicas()
    c = Client(a.url)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    t0 = time.monotonic()
    assert list(c.watch("pods", "default", resource_version=store.revision(), bookmarks=False,
                        stop=stop)) == []
    assert time.monotonic() - t0 < 2


def test_watch_gives_up_when_every_replica_is_gone(replicas, store):
    a = replicas()
    c = Client([a.url, "http://127.0.0.1:%d" % free_port()], retry_deadline=0.5)
    gen = c.watch("pods", "default", resource_version=store.revision())
    assert next(gen)["type"] == "BOOKMARK"
    a.stop()
    with pytest.raises(NoReplicaReachable):
        for _ in gen:
            pass


def test_a_spread_watch_goes_home_when_its_stream_ends_and_leaves_calls_there(replicas, store, monkeypatch):
    """An agent's watch that failed over comes back to its first replica when a stream ends
    after RETURN_HOME_SECONDS, and while away it does not pull the agent's calls with it."""
    monkeypatch.setattr(failover, "RETURN_HOME_SECONDS", 0.3)
    a, b = replicas(), replicas()
    urls = [a.url, b.url]
    key = next("node-%d" % n for n in range(100) if spread_order(urls, "node-%d" % n)[0] == 1)    # home: b
    c = Client(urls, spread_key=key, retry_deadline=5)
    b.fail_next(1)                                   # the watch's first try: b refuses
    gen = c.watch("pods", "default", resource_version=store.revision(), timeout_seconds=1)
    writer(store, [lambda i=i: store.put("pods", pod("p%d" % i)) for i in range(1, 40)], delay=0.05)
    events = collect(gen, lambda e: e["object"]["metadata"]["name"] == "p39")
    assert names(events) == [("ADDED", "p%d" % i) for i in range(1, 40)]       # none lost, none twice
    watched_a = [r for r in a.requests if r["query"].get("watch")]
    watched_b = [r for r in b.requests if r["query"].get("watch")]
    # b refused the first; a served while b was away; b again once a stream ended
    assert watched_a and len(watched_b) >= 2, (len(watched_a), len(watched_b))
    assert c.version()["replica"] == "r2"            # the calls never left home
