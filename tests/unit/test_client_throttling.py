"""The client under 429 Too Many Requests: it waits as long as Retry-After asks (bounded)
or moves to a replica that did not refuse, for reads, writes and watches; the agent's
lease renewal, which uses it, keeps working. The real API app over the in-memory store
(tests/unit/real_api.py) on 127.0.0.1, with injected 429s."""
import threading
import time

import pytest

from agent.node import LEASE_NAMESPACE, NodeManager
from agent.runtime.hollow_runtime import HollowRuntime
from shepherd_ha.client import ApiError, Client
from shepherd_ha.client.failover import RETRY_AFTER_MAX, retry_after_seconds

POD = {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}


@pytest.mark.parametrize("header,seconds", [("3", 3.0), ("0.25", 0.25), ("0", 0.0), ("-4", 0.0),
                                            ("9999", RETRY_AFTER_MAX), (None, 1.0), ("soon", 1.0),
                                            ("Wed, 21 Oct 2026 07:28:00 GMT", 1.0), ("nan", 1.0)])
def test_retry_after_is_read_and_bounded(header, seconds):
    assert retry_after_seconds(header) == seconds


def test_a_429_is_sent_again_after_retry_after(replicas):
    server = replicas()
    server.fail_next(2, code=429, retry_after="0.3")
    c = Client(server.url)
    start = time.monotonic()
    c.create("pods", POD)
    waited = time.monotonic() - start
    posts = server.keys_seen("POST")
    assert len(posts) == 3 and len(set(posts)) == 1       # one logical write, one key
    assert waited >= 0.6                                    # it waited as asked, twice
    assert c.get("pods", "web")["metadata"]["name"] == "web"


def test_a_429_moves_to_a_replica_that_did_not_refuse(replicas):
    a, b = replicas(), replicas()
    a.fail_next(1, code=429, retry_after="8")
    c = Client([a.url, b.url])
    start = time.monotonic()
    assert c.version()["replica"] == "r2"
    assert time.monotonic() - start < 8                    # did not sit out a's Retry-After
    assert c.last_server == b.url


def test_429_until_the_deadline_raises_the_429(replicas):
    server = replicas()
    server.fail_next(1000, code=429, retry_after="0.2", message="too many requests: priority level bulk")
    c = Client(server.url, retry_deadline=0.7)
    with pytest.raises(ApiError) as exc:
        c.list("pods")
    assert exc.value.code == 429 and exc.value.reason == "TooManyRequests"
    assert "priority level bulk" in str(exc.value)
    assert 2 <= len(server.requests) <= 5                  # paced by Retry-After, not a busy loop


def test_a_write_without_idempotency_key_is_retried_after_a_429(replicas, store):
    server = replicas()
    server.fail_next(1, code=429, retry_after="0.1", methods=["POST"])
    c = Client(server.url)
    c.request("POST", "/api/v1/namespaces/default/pods", body=POD, idempotent_write=False)
    assert len(server.keys_seen("POST")) == 2
    assert store.get_obj("pods", "web") is not None


def test_a_watch_refused_with_429_starts_after_retry_after(replicas, store):
    server = replicas()
    store.put("pods", dict(POD, metadata={"name": "before"}))
    rv = store.revision()
    server.fail_next(1, code=429, retry_after="0.2", methods=["GET"])
    c = Client(server.url)
    stop = threading.Event()
    got = []

    def run():
        for event in c.watch("pods", "default", resource_version=rv, stop=stop):
            if event["type"] == "ADDED":
                got.append(event["object"]["metadata"]["name"])
                return
    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while len([r for r in server.requests if r["query"].get("watch")]) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    store.put("pods", dict(POD, metadata={"name": "after"}))
    t.join(10)
    stop.set()
    assert got == ["after"]


def test_lease_renewal_keeps_working_under_429(replicas, store):
    server = replicas()
    c = Client(server.url, timeout=5.0, retry_deadline=10.0)       # as the agent makes it
    node = NodeManager(c, HollowRuntime("n1"), "n1", "10.0.0.7", threading.Event(), cpu_millicores=2000,
                       memory_bytes=4 << 30)
    node.renew_lease()                                              # creates the lease
    first = store.get_obj("leases", "n1", LEASE_NAMESPACE)["spec"]["renewTime"]
    server.fail_next(3, code=429, retry_after="0.1", methods=["PATCH"])
    time.sleep(0.01)                                                # renewTime has microseconds
    node.renew_lease()
    assert node.lease_renewals == 2
    assert len([r for r in server.requests if r["method"] == "PATCH"]) >= 4
    assert store.get_obj("leases", "n1", LEASE_NAMESPACE)["spec"]["renewTime"] > first
