"""shepherd_ha.client: requests, failover, 503 retries, idempotency keys.

The real API app over the in-memory store (tests/unit/real_api.py, conftest's replicas) on 127.0.0.1.
"""
import json
import threading
import collections
import time

import pytest
import requests

from shepherd_ha.client import (ApiError, Client, NoReplicaReachable, OutcomeUnknown,
                                WatchExpired, normalize_servers)
from shepherd_ha.client import failover
from shepherd_ha.client.errors import error_from_response
from shepherd_ha.client.http_client import spread_order
from real_api import free_port


@pytest.fixture
def server(replicas):
    return replicas()


def closed_url():
    """A URL where nothing listens (connection refused)."""
    return "http://127.0.0.1:%d" % free_port()


POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web", "labels": {"app": "web"}},
       "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}


# -- basics ------------------------------------------------------------------

def test_normalize_servers():
    assert normalize_servers("127.0.0.1:8001, http://h:8002/ ,") == [
        "http://127.0.0.1:8001", "http://h:8002"]
    assert normalize_servers(["https://a:1"]) == ["https://a:1"]
    with pytest.raises(ValueError):
        normalize_servers(" , ")


def test_crud_round_trip(server, store):
    c = Client(server.url)
    created = c.create("pods", POD)
    assert created["metadata"]["namespace"] == "default"
    assert created["metadata"]["uid"]
    got = c.get("pods", "web")
    assert got["spec"]["containers"][0]["image"] == "nginx:1.25"
    assert c.get("po", "web", consistent=False)["metadata"]["name"] == "web"
    assert server.requests[-1]["query"] == {"resourceVersion": "0"}

    listed = c.list("pods", "default", label_selector="app=web")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["web"]
    assert listed["metadata"]["resourceVersion"] == str(store.revision())
    assert c.list("pods", label_selector="app=db")["items"] == []
    assert server.requests[-1]["path"] == "/api/v1/pods"

    patched = c.patch("pods", "web", {"metadata": {"labels": {"tier": "front"}}})
    assert patched["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert server.requests[-1]["content_type"] == "application/merge-patch+json"

    stale = dict(got)
    with pytest.raises(ApiError) as ei:
        c.replace("pods", stale)  # got's resourceVersion is older than the patch
    assert ei.value.code == 409 and ei.value.reason == "Conflict"
    assert "was modified" in str(ei.value)

    fresh = c.get("pods", "web")
    fresh["spec"]["containers"][0]["image"] = "nginx:1.26"
    assert c.replace("pods", fresh)["metadata"]["generation"] == 2

    c.delete("pods", "web", preconditions={"uid": created["metadata"]["uid"]},
             propagation_policy="Orphan")
    body = json.loads(server.requests[-1]["body"])
    assert body == {"apiVersion": "v1", "kind": "DeleteOptions",
                    "preconditions": {"uid": created["metadata"]["uid"]},
                    "propagationPolicy": "Orphan"}
    with pytest.raises(ApiError) as ei:
        c.get("pods", "web")
    assert (ei.value.code, ei.value.reason, str(ei.value)) == (404, "NotFound", 'pods "web" in namespace default not found')
    assert ei.value.status["kind"] == "Status"


def test_paths_for_cluster_scoped_apps_and_subresources(server):
    c = Client(server.url)
    c.create("namespaces", {"metadata": {"name": "team-a"}})
    assert server.requests[-1]["path"] == "/api/v1/namespaces"
    c.create("deployments", {"metadata": {"name": "web", "namespace": "team-a"},
                             "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                                      "template": {"metadata": {"labels": {"app": "web"}},
                                                   "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    assert server.requests[-1]["path"] == "/apis/apps/v1/namespaces/team-a/deployments"
    scale = c.scale("deployments", "web", 4, "team-a")
    assert server.requests[-1]["path"] == "/apis/apps/v1/namespaces/team-a/deployments/web/scale"
    assert scale["spec"]["replicas"] == 4
    assert c.get("deploy", "web", "team-a")["spec"]["replicas"] == 4
    assert c.cluster()["leader"] == "r1"
    assert c.version()["replica"] == "r1" and c.version()["gitVersion"].startswith("v1.")
    with pytest.raises(ValueError):
        c.get("widgets", "x")


def test_create_defaults_namespace_from_object(server):
    c = Client(server.url)
    for ns in ("ns1", "ns2"):
        c.create("namespaces", {"metadata": {"name": ns}})
    c.create("pods", dict(POD, metadata={"name": "a", "namespace": "ns1"}))
    assert server.requests[-1]["path"] == "/api/v1/namespaces/ns1/pods"
    c.create("pods", dict(POD, metadata={"name": "b"}), namespace="ns2")
    assert server.requests[-1]["path"] == "/api/v1/namespaces/ns2/pods"


def test_error_without_status_body():
    resp = requests.Response()
    resp.status_code = 502
    resp.reason = "Bad Gateway"
    resp._content = b"<html>oops</html>"
    err = error_from_response(resp)
    assert err.code == 502 and "oops" in err.message
    resp.status_code = 410
    assert isinstance(error_from_response(resp), WatchExpired)


# -- failover ----------------------------------------------------------------

def test_fails_over_from_a_closed_port_and_remembers(server):
    c = Client([closed_url(), server.url], retry_deadline=5)
    t0 = time.monotonic()
    c.create("pods", POD)
    assert c.get("pods", "web")["metadata"]["name"] == "web"
    assert c.last_server == server.url
    assert time.monotonic() - t0 < 2
    # the next call starts from the replica that answered: no backoff sleep
    t0 = time.monotonic()
    for _ in range(5):
        c.get("pods", "web")
    assert time.monotonic() - t0 < 1


def test_server_without_scheme(server):
    c = Client("127.0.0.1:%d" % server.port)
    assert c.version()["replica"] == "r1"


def test_no_replica_reachable_message():
    a, b = closed_url(), closed_url()
    c = Client("%s,%s" % (a, b), retry_deadline=0.3)
    t0 = time.monotonic()
    with pytest.raises(NoReplicaReachable) as ei:
        c.get("pods", "web")
    assert time.monotonic() - t0 < 3
    assert str(ei.value) == ("no replica reachable at %s, %s: connection refused (is the cluster up? "
                             "try `shepherd-ha local status --dir DIR`)" % (a, b))


def test_503_then_ok_is_retried(server):
    server.fail_next(2)
    c = Client(server.url)
    c.create("pods", POD)
    posts = server.keys_seen("POST")
    assert len(posts) == 3 and len(set(posts)) == 1


def test_503_moves_to_the_next_replica(replicas):
    a, b = replicas(), replicas()
    a.fail_next(1)
    c = Client([a.url, b.url])
    assert c.version()["replica"] == "r2"
    assert c.last_server == b.url


def test_spread_key_spreads_a_fleet_over_the_replicas(replicas):
    """Agents configured with one list of servers: each starts on the replica its node name
    picks (the same every time), so a fleet's requests and watches are not all on the first."""
    servers = [replicas() for _ in range(3)]
    urls = [s.url for s in servers]
    first = {}
    for n in range(60):
        with Client(urls, spread_key="node-%03d" % n) as c:
            c.version()
            first[n] = c.last_server
        with Client(urls, spread_key="node-%03d" % n) as again:
            again.version()
            assert again.last_server == first[n]
    counts = {url: sum(1 for u in first.values() if u == url) for url in urls}
    assert all(count >= 10 for count in counts.values()), counts       # 20 each if even
    with Client(urls) as plain:
        plain.version()
        assert plain.last_server == urls[0]


GOLDEN_ORDER = [1, 2, 0]    # node-0001 over 10.0.0.1-3 (blake2b); pinned: a new hash moves every agent


def test_a_failed_replicas_clients_spread_over_the_others():
    """Rendezvous order: the keys whose first replica is r1 go on to r2 and r3 in about
    equal parts (not all to the next in the list), and each key tries every replica."""
    urls = ["http://10.0.0.%d:6443" % i for i in range(1, 4)]
    orders = [spread_order(urls, "node-%04d" % n) for n in range(900)]
    assert all(sorted(order) == [0, 1, 2] for order in orders)
    firsts = collections.Counter(order[0] for order in orders)
    assert all(200 <= firsts[i] <= 400 for i in range(3)), firsts
    seconds = collections.Counter(order[1] for order in orders if order[0] == 0)
    assert seconds[1] >= 0.3 * firsts[0] and seconds[2] >= 0.3 * firsts[0], seconds
    # The same in every process and release: a restarted agent goes back to its replica.
    assert spread_order(urls, "node-0001") == GOLDEN_ORDER


def test_a_spread_client_waits_for_the_first_retry_after_in_its_own_order(replicas):
    """Every replica refuses with 429: the client waits for the one whose Retry-After ends
    first and asks it again (the replica, not its position in the list)."""
    servers = [replicas() for _ in range(3)]
    urls = [s.url for s in servers]
    key = next("node-%d" % n for n in range(200) if spread_order(urls, "node-%d" % n) == [2, 0, 1])
    servers[2].fail_next(1, code=429, retry_after="3")
    servers[0].fail_next(1, code=429, retry_after="1")
    servers[1].fail_next(1, code=429, retry_after="2")
    with Client(urls, spread_key=key, retry_deadline=10) as c:
        t0 = time.monotonic()
        assert c.version()["replica"] == "r1"
        assert 0.8 <= time.monotonic() - t0 < 2.5
    asked = [[r["path"] for r in s.requests] for s in servers]
    assert [len(x) for x in asked] == [2, 1, 1], asked


def test_a_spread_client_fails_over_and_goes_home_again(replicas, monkeypatch):
    monkeypatch.setattr(failover, "RETURN_HOME_SECONDS", 0.5)
    a, b = replicas(), replicas()
    urls = [a.url, b.url]
    key = next("node-%d" % n for n in range(100) if spread_order(urls, "node-%d" % n)[0] == 1)    # home: b
    with Client(urls, spread_key=key) as c:
        assert c.version()["replica"] == "r2"
        b.fail_next(1)
        assert c.version()["replica"] == "r1"         # its home refused: the next in its order
        assert c.version()["replica"] == "r1"         # and it stays there for a while
        time.sleep(0.6)
        assert c.version()["replica"] == "r2"         # then goes home again
        assert c.version()["replica"] == "r2"


def test_503_until_the_deadline_raises_the_503(server):
    server.fail_next(1000, message="no leader elected")
    c = Client(server.url, retry_deadline=0.4)
    with pytest.raises(ApiError) as ei:
        c.get("pods", "web")
    assert ei.value.code == 503 and str(ei.value) == "no leader elected"
    assert ei.value.outcome == "not-applied"
    assert 2 <= len(server.requests) < 20  # growing backoff, not a busy loop


def test_4xx_is_not_retried(server):
    c = Client(server.url)
    with pytest.raises(ApiError):
        c.get("pods", "missing")
    assert len(server.requests) == 1


def test_read_timeout_fails_over(replicas):
    slow, fast = replicas(), replicas()
    slow.hooks.append(lambda info: time.sleep(1.0))
    c = Client([slow.url, fast.url], timeout=0.3)
    assert c.version()["replica"] == "r2"


# -- idempotency keys --------------------------------------------------------

def test_idempotency_key_is_reused_on_retry_and_applied_once(server, store):
    # the write commits, but the answer is lost (503, outcome unknown); the
    # retry carries the same key and gets the first outcome
    server.fail_next(1, apply=True, methods=["POST"])
    c = Client(server.url)
    out = c.create("pods", POD)
    assert out["metadata"]["name"] == "web"
    keys = server.keys_seen("POST")
    assert len(keys) == 2 and keys[0] == keys[1] and len(keys[0]) == 32
    assert [m for m, _ in store.applied] == ["POST"]


def test_idempotency_key_is_reused_across_replicas(replicas, store):
    a, b = replicas(), replicas()
    a.fail_next(1, apply=True, methods=["PUT", "POST"])
    c = Client([a.url, b.url])
    c.create("pods", POD)
    (key_a,), (key_b,) = a.keys_seen("POST"), b.keys_seen("POST")
    assert key_a == key_b
    assert len(store.applied) == 1


def test_each_logical_write_gets_a_fresh_key_and_reads_none(server):
    c = Client(server.url)
    c.create("pods", POD)
    c.patch("pods", "web", {"metadata": {"labels": {"x": "1"}}})
    c.delete("pods", "web")
    c.list("pods")
    writes = [r["key"] for r in server.requests if r["method"] != "GET"]
    assert len(set(writes)) == 3 and all(writes)
    assert all(r["key"] is None for r in server.requests if r["method"] == "GET")


def test_non_idempotent_write_is_not_retried_when_outcome_unknown(server, store):
    server.fail_next(1, apply=True, methods=["POST"])
    c = Client(server.url)
    with pytest.raises(ApiError) as ei:
        c.request("POST", "/api/v1/namespaces/default/pods", body=POD, idempotent_write=False)
    assert ei.value.code == 503 and ei.value.outcome == "unknown"
    assert len(server.requests) == 1 and server.requests[0]["key"] is None
    # ... but it is retried when the server says it was not applied
    server.fail_next(1, outcome="not-applied")
    c.request("POST", "/api/v1/namespaces/default/pods",
              body=dict(POD, metadata={"name": "web2"}), idempotent_write=False)
    assert store.get_obj("pods", "web2") is not None


def test_non_idempotent_write_read_timeout_is_outcome_unknown(server):
    server.hooks.append(lambda info: time.sleep(0.6) if info["method"] == "POST" else None)
    c = Client(server.url, timeout=0.2)
    with pytest.raises(OutcomeUnknown):
        c.request("POST", "/api/v1/namespaces/default/pods", body=POD, idempotent_write=False)


# -- threads -----------------------------------------------------------------

def test_one_client_shared_by_threads(replicas):
    a, b = replicas(), replicas()
    c = Client([closed_url(), a.url, b.url])
    c.create("pods", POD)
    errors, sessions = [], []

    def work():
        try:
            for _ in range(15):
                assert c.get("pods", "web")["metadata"]["name"] == "web"
            sessions.append(c._http())
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert len({id(x) for x in sessions}) == 8  # one session per thread
    c.close()
    assert len(c._sessions) == 0
