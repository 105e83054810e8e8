"""Overload gets backpressure (shepherd_ha/api/flow_control.py) on a real 3-replica
cluster with a small limit (--max-requests-inflight 8: system 2 seats, workload 6,
bulk 1, queues as long; --max-watches 8: agents 6, others 2):

- 16 threads list 1,500 pods (about 2 MB each) without a selector on one replica, over
  and over: some lists are answered, the rest get 429 with Retry-After and a Status
  body, and meanwhile every lease renewal and node status write on that replica is
  answered 200 (none refused), every answered list is complete, nothing is lost and
  nothing answers 500;
- watches of people beyond their pool get 429 at once, while an agent's watch opens.
"""
import json
import threading
import time

import pytest
import requests

from shepherd_ha.client import Client

from .helpers import assert_no_internal_errors, assert_status, call, describe, expect, start_cluster, write_with_retry

pytestmark = pytest.mark.integration

OPTIONS = {"max_requests_inflight": 8, "max_watches": 8, "request_queue_wait": 0.5,
           # the node must stay as it is while the test renews its lease at its own pace
           "node_grace_period": 600.0, "pod_eviction_timeout": 600.0, "orphan_pod_grace": 600.0}
PODS = 1500
NAMESPACE = "load"
LISTERS = 16
LOAD_SECONDS = 10.0
MERGE = {"Content-Type": "application/merge-patch+json"}
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
NODE_STATUS = "/api/v1/nodes/n1/status"
PAD = "x" * 1000          # makes each pod about 1.4 KB, each list about 2 MB


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """A cluster holding node n1, its lease, and PODS pods bound to it."""
    cluster = start_cluster(tmp_path_factory.mktemp("flow-control"), server_options=OPTIONS)
    try:
        urls = [cluster.url(i) for i in cluster.ids]
        expect(call("POST", urls[0] + "/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}}), 201)
        expect(call("POST", urls[0] + "/api/v1/nodes", json={
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "5000"},
                       "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "5000"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}), 201)
        expect(call("POST", urls[0] + LEASE.rsplit("/", 1)[0], json={
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "n1"},
            "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40,
                     "renewTime": "2026-01-01T00:00:00.000000Z"}}), 201)
        client = Client(urls, timeout=10.0, retry_deadline=60.0)       # honours 429 while we fill the store
        failures = []

        def create(start):
            for i in range(start, PODS, 6):
                try:
                    client.create("pods", {"metadata": {"name": "p%04d" % i, "annotations": {"pad": PAD}},
                                           "spec": {"nodeName": "n1",
                                                    "containers": [{"name": "c", "image": "nginx:1.25"}]}},
                                  namespace=NAMESPACE)
                except Exception as exc:     # noqa: BLE001 - reported below
                    failures.append(repr(exc))
        threads = [threading.Thread(target=create, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert not failures, failures[:5]
        yield cluster, urls
    finally:
        cluster.stop_all()


def metric(url, line_start):
    text = call("GET", url + "/metrics").text
    for line in text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.split()[-1])
    raise AssertionError("no metric %s in /metrics of %s" % (line_start, url))


def pods_listed(resp):
    items = json.loads(resp.content)["items"]
    return sorted(o["metadata"]["name"] for o in items if o["metadata"].get("namespace") == NAMESPACE)


def test_bulk_lists_wait_or_get_429_while_leases_and_node_status_pass(loaded):
    cluster, urls = loaded
    target = urls[0]
    expected = ["p%04d" % i for i in range(PODS)]
    stop = threading.Event()
    lock = threading.Lock()
    lists = {"ok": 0, "incomplete": [], "refused": [], "other": []}
    renewals = []            # (what, response or exception)
    last_renew = {}

    def lister():
        session = requests.Session()
        while not stop.is_set():
            try:
                resp = session.get(target + "/api/v1/pods", params={"resourceVersion": "0"}, timeout=60)
            except requests.RequestException as exc:
                with lock:
                    lists["other"].append(repr(exc))
                continue
            with lock:
                if resp.status_code == 200:
                    lists["ok"] += 1
                    if pods_listed(resp) != expected:
                        lists["incomplete"].append(len(pods_listed(resp)))
                elif resp.status_code == 429:
                    lists["refused"].append(resp)
                else:
                    lists["other"].append(describe(resp))
            if resp.status_code == 429:
                stop.wait(0.05)      # keep the pressure up, but not a pure spin

    def renewer():
        n = 0
        while not stop.is_set():
            n += 1
            stamp = "2026-01-01T00:00:%02d.%06dZ" % (n // 1000000 % 60, n % 1000000)
            for what, path, body in (("lease", LEASE, {"spec": {"renewTime": stamp}}),
                                     ("node status", NODE_STATUS, {"status": {"conditions": [
                                         {"type": "Ready", "status": "True", "message": "beat %d" % n}]}})):
                if what == "node status" and n % 4:
                    continue
                try:
                    # retried on 503 only (an election under this load is not what is tested here)
                    resp, _ = write_with_retry("PATCH", [target], path, deadline_s=20.0, attempt_timeout=10.0,
                                               headers=MERGE, data=json.dumps(body))
                except AssertionError as exc:
                    resp = exc
                renewals.append((what, resp))
                if getattr(resp, "status_code", None) == 200 and what == "lease":
                    last_renew["lease"] = stamp
            stop.wait(0.25)

    threads = [threading.Thread(target=lister, daemon=True) for _ in range(LISTERS)]
    threads.append(threading.Thread(target=renewer, daemon=True))
    for t in threads:
        t.start()
    time.sleep(LOAD_SECONDS)
    stop.set()
    for t in threads:
        t.join(90)
    assert not any(t.is_alive() for t in threads), "a load thread is stuck"

    # the lease and the node status went through every time, none refused
    bad = [(what, describe(r) if hasattr(r, "request") else repr(r)) for what, r in renewals
           if getattr(r, "status_code", None) != 200]
    assert len(renewals) >= 5 and not bad, "renewals: %d, failed: %s" % (len(renewals), bad[:5])
    # bulk lists were answered in full, or refused with a Status, Retry-After and details
    assert lists["ok"] >= 1 and not lists["incomplete"] and not lists["other"], \
        (lists["ok"], lists["incomplete"][:5], lists["other"][:5])
    assert len(lists["refused"]) >= LISTERS, "only %d lists refused: the limit never bit" % len(lists["refused"])
    for resp in lists["refused"][:50]:
        body = assert_status(resp, 429, "TooManyRequests")
        assert "priority level bulk" in body["message"] and "--max-requests-inflight" in body["message"]
        assert resp.headers["Retry-After"].isdigit() and int(resp.headers["Retry-After"]) >= 1
        assert body["details"]["retryAfterSeconds"] == int(resp.headers["Retry-After"])
    # the replica's metrics say the same
    rejected = 'shepherd_flowcontrol_rejected_requests_total{priority_level="%s",reason="%s"}'
    bulk_rejected = sum(metric(target, rejected % ("bulk", r)) for r in ("queue-full", "time-out"))
    system_rejected = sum(metric(target, rejected % ("system", r)) for r in ("queue-full", "time-out"))
    assert bulk_rejected >= len(lists["refused"]) and system_rejected == 0
    # nothing lost: every pod, and the last lease renewal, read linearizably on another replica
    final = expect(call("GET", urls[1] + "/api/v1/namespaces/%s/pods" % NAMESPACE), 200)
    assert sorted(o["metadata"]["name"] for o in final["items"]) == expected
    lease = expect(call("GET", urls[1] + LEASE), 200)
    assert lease["spec"]["renewTime"] == last_renew["lease"]
    assert_no_internal_errors(cluster)


def test_watches_of_people_beyond_their_pool_get_429_while_an_agent_watch_opens(loaded):
    cluster, urls = loaded
    target = urls[1]
    rv = expect(call("GET", target + "/api/v1/namespaces/default/services"), 200)["metadata"]["resourceVersion"]
    params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "30"}
    opened = []
    try:
        for _ in range(2):       # the people's pool: 8 - 6
            resp = requests.get(target + "/api/v1/namespaces/default/services", params=params, stream=True,
                                timeout=10)
            opened.append(resp)
            assert resp.status_code == 200, describe(resp)
        refused = requests.get(target + "/api/v1/namespaces/default/services", params=params, timeout=10)
        body = assert_status(refused, 429, "TooManyRequests")
        assert "--max-watches" in body["message"] and refused.headers.get("Retry-After")
        agent = requests.get(target + "/api/v1/pods", params=dict(params, fieldSelector="spec.nodeName=n1"),
                             stream=True, timeout=10)
        opened.append(agent)
        assert agent.status_code == 200, describe(agent)
        assert metric(target, 'shepherd_flowcontrol_current_inflight_requests{priority_level="long-running"}') == 2
    finally:
        for resp in opened:
            resp.close()
    assert_no_internal_errors(cluster)


def test_agents_renew_their_leases_through_429s(loaded):
    """30 agents renew at the same moment on one replica whose system level has 2 seats
    and 2 queue places: most are refused at first, and the client (which the agent uses)
    comes back after Retry-After until every renewal is through."""
    from agent.node import NodeManager
    from agent.runtime.hollow_runtime import HollowRuntime

    cluster, urls = loaded
    target = urls[2]
    rejected = 'shepherd_flowcontrol_rejected_requests_total{priority_level="system",reason="%s"}'
    before = sum(metric(target, rejected % r) for r in ("queue-full", "time-out"))
    agents = 30
    start = threading.Barrier(agents)
    failures, managers = [], []

    def agent(k):
        client = Client([target], timeout=5.0, retry_deadline=30.0)
        node = NodeManager(client, HollowRuntime("a%02d" % k), "a%02d" % k, "10.0.0.%d" % (k + 1), threading.Event(),
                           cpu_millicores=2000, memory_bytes=4 << 30)
        managers.append(node)
        start.wait(30)
        for _ in range(3):
            try:
                node.renew_lease()
            except Exception as exc:   # noqa: BLE001 - reported below
                failures.append(repr(exc))
    threads = [threading.Thread(target=agent, args=(k,), daemon=True) for k in range(agents)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a renewal is stuck"
    assert not failures, failures[:5]
    assert sorted(m.lease_renewals for m in managers) == [3] * agents
    after = sum(metric(target, rejected % r) for r in ("queue-full", "time-out"))
    assert after > before, "no renewal was refused: the test did not load the system level"
    leases = expect(call("GET", urls[0] + "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"), 200)
    assert {o["metadata"]["name"] for o in leases["items"]} >= {"a%02d" % k for k in range(agents)}
    assert_no_internal_errors(cluster)
