"""Early refusal (shepherd_ha/api/early_refusal.py): a request whose priority level is
full is answered 429 before Flask, with the very answer the app's own admission gives;
everything else (a level with room, a watch, an exempt path, a bad token) reaches the
app as before. The real app over a fake replica, through Flask's WSGI test client."""
import threading
import time

import pytest
from werkzeug.test import Client

from shepherd_ha.api import auth
from shepherd_ha.api.app import create_app
from shepherd_ha.api.early_refusal import EarlyRefusal
from shepherd_ha.api.flow_control import SYSTEM, WORKLOAD, FlowControl
from test_api_flow_control import SlowReplica

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
MERGE = {"Content-Type": "application/merge-patch+json"}


def fill(level):
    """Every seat of `level` taken and no queue left: its next request is refused."""
    for _ in range(level.seats):
        assert level.acquire(0) == (True, None)
    level.queue_length = 0


@pytest.fixture
def saturate():
    """saturate(level): every seat taken and the queue full of waiting requests (threads
    blocked in acquire), as a fleet leaves it; all given back after the test."""
    held = []

    def run(level):
        for _ in range(level.seats):
            assert level.acquire(0) == (True, None)
        waiters = [threading.Thread(target=level.acquire, args=(30,), daemon=True) for _ in range(level.queue_length)]
        for t in waiters:
            t.start()
        deadline = time.monotonic() + 5
        while level.queued < level.queue_length:
            assert time.monotonic() < deadline, "the queue never filled"
            time.sleep(0.005)
        held.append((level, waiters))
    yield run
    for level, waiters in held:
        for _ in range(level.seats + len(waiters)):
            level.release()
        for t in waiters:
            t.join(5)


class Handled:
    """Counts the requests that reached Flask's hooks (the first before_request)."""

    def __init__(self, app):
        self.count = 0
        app.before_request_funcs.setdefault(None, []).insert(0, self._seen)

    def _seen(self):
        self.count += 1


@pytest.fixture
def served():
    replica = SlowReplica()
    replica.gate.set()
    flow = FlowControl(max_inflight=8, max_watches=4, queue_wait=10.0, replica_id="r1")
    app = create_app(replica, flow=flow)
    return app, flow, Handled(app)


def test_a_request_of_a_full_level_is_refused_before_flask_with_the_apps_own_answer(served, saturate):
    app, flow, handled = served
    saturate(flow.levels[SYSTEM])
    assert isinstance(app.wsgi_app, EarlyRefusal)

    early = Client(app).patch(LEASE, data='{"spec": {}}', headers=MERGE)
    assert early.status_code == 429 and handled.count == 0, "Flask never saw it"
    assert flow.levels[SYSTEM].rejected["queue-full"] == 1

    # The same request through the app alone (its admit hook refuses it): the same answer.
    inner = Client(app.wsgi_app.wsgi_app).patch(LEASE, data='{"spec": {}}', headers=MERGE)
    assert inner.status_code == 429 and handled.count == 1
    assert early.get_json() == inner.get_json()
    for header in ("Retry-After", "Shepherd-Outcome", "Content-Type"):
        assert early.headers[header] == inner.headers[header], header
    body = early.get_json()
    assert body["kind"] == "Status" and body["reason"] == "TooManyRequests" and body["details"] == \
        {"retryAfterSeconds": 1}
    assert "priority level system" in body["message"] and "a full queue" in body["message"]
    assert "replica r1" in body["message"]

    head = Client(app).open(LEASE, method="HEAD")
    assert head.status_code == 429 and head.get_data() == b"", "a HEAD answer carries no body"
    assert int(head.headers["Content-Length"]) == len(early.get_data())

    metrics = Client(app).get("/metrics").get_data(as_text=True)
    assert 'shepherd_api_requests_total{code="429",resource="leases",verb="PATCH"} 2.0' in metrics
    assert 'shepherd_flowcontrol_rejected_requests_total{priority_level="system",reason="queue-full"} 3.0' \
        in metrics


def test_an_early_429_on_a_plain_path_keeps_its_metric_label(served):
    app, flow, handled = served
    fill(flow.levels["status"])
    assert Client(app).get("/shepherd/v1/replica").status_code == 429 and handled.count == 0
    fill(flow.levels[SYSTEM])
    assert Client(app).get("/api/v1/nodes/n1/unknown-sub/x").status_code == 429
    flow.levels["status"].queue_length, flow.levels["status"].in_flight = 2, 0
    metrics = Client(app).get("/metrics").get_data(as_text=True)
    assert 'shepherd_api_requests_total{code="429",resource="/shepherd/v1/replica",verb="GET"} 1.0' in metrics
    assert 'shepherd_api_requests_total{code="429",resource="nodes",verb="GET"} 1.0' in metrics


def test_with_no_queue_wait_a_level_refuses_once_its_seats_are_busy():
    replica = SlowReplica()
    flow = FlowControl(max_inflight=8, max_watches=4, queue_wait=0.0, replica_id="r1")
    app = create_app(replica, flow=flow)
    handled = Handled(app)
    for _ in range(flow.levels[SYSTEM].seats):
        flow.levels[SYSTEM].acquire(0)                   # the queue is empty: nothing ever waits in it
    assert Client(app).patch(LEASE, data="{}", headers=MERGE).status_code == 429 and handled.count == 0
    assert flow.levels[SYSTEM].rejected["queue-full"] == 1


def test_a_level_with_room_or_another_full_level_lets_the_request_through(served):
    app, flow, handled = served
    fill(flow.levels[WORKLOAD])
    node = Client(app).get("/api/v1/nodes/n1")          # system: seats free
    assert node.status_code == 200 and node.get_json()["metadata"]["name"] == "n1"
    node.close()                                          # its seat comes back
    assert handled.count == 1
    system = flow.levels[SYSTEM]
    assert sum(system.rejected.values()) == 0 and system.in_flight == 0

    for _ in range(system.seats):                         # every seat busy, the queue empty
        assert system.acquire(0) == (True, None)
    assert system.refuse_if_full(1.0) is None, "a queue with room refuses nothing"
    assert sum(system.rejected.values()) == 0
    assert system.refuse_if_full(0.0) == "queue-full", "without a wait, busy seats are enough"
    assert system.rejected["queue-full"] == 1


def test_watches_and_exempt_paths_always_reach_the_app(served):
    app, flow, handled = served
    for level in flow.levels.values():
        fill(level)
    assert Client(app).get("/healthz").status_code == 200
    watch = Client(app).get("/api/v1/namespaces/default/services?watch=1&resourceVersion=5&timeoutSeconds=1")
    assert handled.count == 2
    # The watch's seat (workload) is full: the app refuses it, after its pool slot was taken and given back.
    assert watch.status_code == 429
    assert all(pool.in_flight == 0 for pool in flow.pools.values())


def test_impersonation_and_another_clusters_caller_are_the_apps_to_answer(served):
    app, flow, handled = served
    app.wsgi_app.cluster_id = "c-ours"
    fill(flow.levels[SYSTEM])
    for extra in ({"Impersonate-User": "system:node:n1"}, {"Impersonate-Group": "system:nodes"},
                  {"Shepherd-Cluster-Id": "c-theirs"}):
        Client(app).patch(LEASE, data="{}", headers=dict(MERGE, **extra))
    assert handled.count == 3, "each reached the app, which classifies (and refuses) it itself"
    assert Client(app).patch(LEASE, data="{}", headers=dict(MERGE, **{"Shepherd-Cluster-Id": "c-ours"})) \
        .status_code == 429 and handled.count == 3, "our own cluster's caller: refused early"


def test_with_tokens_a_bad_token_gets_the_apps_401_and_a_nodes_renewal_the_early_429():
    tokens = auth.TokenTable({"node-secret": auth.User("system:node:n1", "1", (auth.GROUP_NODES,)),
                              "user-secret": auth.User("alice", "2", (auth.GROUP_ADMIN,))})
    replica = SlowReplica()
    replica.gate.set()
    flow = FlowControl(max_inflight=8, max_watches=4, queue_wait=10.0, replica_id="r1")
    app = create_app(replica, tokens=tokens, flow=flow)
    handled = Handled(app)
    fill(flow.levels[SYSTEM])

    wrong = Client(app).patch(LEASE, data="{}", headers=dict(MERGE, Authorization="Bearer nope"))
    assert wrong.status_code == 401 and handled.count == 1, "an unknown token is the app's to answer"

    node = Client(app).patch(LEASE, data="{}", headers=dict(MERGE, Authorization="Bearer node-secret"))
    assert node.status_code == 429 and handled.count == 1, "a node's renewal: the system level, full"

    # A user's write goes to the workload level, which has room: it reaches the app.
    user = Client(app).patch(LEASE, data="{}", headers=dict(MERGE, Authorization="Bearer user-secret"))
    assert user.status_code != 429 and handled.count == 2
