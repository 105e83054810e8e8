"""Flow control wired into the API (shepherd_ha/api/app.py): the real Flask app over a
fake replica, served by waitress on 127.0.0.1. A 429 is a Status with Retry-After,
seats come back when a handler returns, a watch keeps its slot until its stream ends,
and /metrics counts it all."""
import threading
import types

import pytest
import requests

from shepherd_ha.api.app import create_app
from shepherd_ha.api.flow_control import BULK, LONG_RUNNING_OTHER, WORKLOAD, FlowControl
from shepherd_ha.store import gc_tuning
from shepherd_ha.store.tick_gaps import TickGapMeter
from shepherd_ha.store.watch_log import WatchLog
from tests import waiting
from test_api_pod_logs import Served

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "resourceVersion": "3"}}


class SlowReplica:
    """Answers lists only once `gate` is set, so lists hold their seats meanwhile."""
    id = "r1"

    def __init__(self):
        self.gate = threading.Event()
        self.watch_log = WatchLog()
        self.barrier = types.SimpleNamespace(barriers_sent=0)

    def get(self, resource, namespace, name, consistent=True):
        return (NODE if (resource, name) == ("nodes", "n1") else None), 7

    def list(self, resource, namespace=None, consistent=True, selection=None):
        assert self.gate.wait(20), "the test never opened the gate"
        return [NODE] if resource == "nodes" else [], 7

    def revision(self):
        return 7

    def status(self):
        return {"term": 1, "commitIndex": 7, "appliedIndex": 7, "role": "leader", "connectedPeers": [],
                "revision": 7, "objects": 1, "fencedRejections": 0, "malformedCommands": 0,
                "gc": gc_tuning.status()}

    def tick_gaps(self):
        return TickGapMeter().snapshot()


def wait_until(predicate, timeout=10.0):
    return waiting.wait_for("condition", predicate, timeout, interval=0.01)


@pytest.fixture
def setup():
    replica = SlowReplica()
    flow = FlowControl(max_inflight=8, max_watches=4, queue_wait=10.0, replica_id="r1")  # bulk: 1 seat, 1 queued
    served = Served(create_app(replica, flow=flow), threads=flow.threads_needed())
    yield replica, flow, served.url
    replica.gate.set()
    served.stop()


def metric(url, line_start):
    for line in requests.get(url + "/metrics", timeout=5).text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.split()[-1])
    raise AssertionError("no metric %s" % line_start)


def test_a_full_bulk_level_answers_429_while_system_requests_pass(setup):
    replica, flow, url = setup
    answers = []
    lists = [threading.Thread(target=lambda: answers.append(requests.get(url + "/api/v1/pods", timeout=20)))
             for _ in range(2)]
    for t in lists:
        t.start()
    assert wait_until(lambda: flow.snapshot()[BULK]["inFlight"] == 1 and flow.snapshot()[BULK]["queued"] == 1)

    refused = requests.get(url + "/api/v1/namespaces/default/events", timeout=5)
    assert refused.status_code == 429
    body = refused.json()
    assert body["kind"] == "Status" and body["code"] == 429 and body["reason"] == "TooManyRequests"
    assert "priority level bulk" in body["message"] and "replica r1" in body["message"]
    assert body["details"] == {"retryAfterSeconds": 2}
    assert refused.headers["Retry-After"] == "2"
    assert refused.headers["Shepherd-Outcome"] == "not-applied"

    node = requests.get(url + "/api/v1/nodes/n1", timeout=5)       # system: its own seats
    assert node.status_code == 200 and node.json()["metadata"]["name"] == "n1"
    assert metric(url, 'shepherd_flowcontrol_rejected_requests_total{priority_level="bulk",reason="queue-full"}') == 1
    assert metric(url, 'shepherd_flowcontrol_current_inflight_requests{priority_level="bulk"}') == 1
    assert metric(url, 'shepherd_flowcontrol_current_inqueue_requests{priority_level="bulk"}') == 1
    assert metric(url, 'shepherd_flowcontrol_seats{priority_level="system"}') == 2

    replica.gate.set()
    for t in lists:
        t.join(20)
    assert [a.status_code for a in answers] == [200, 200]
    assert wait_until(lambda: all(level["inFlight"] == 0 and level["queued"] == 0
                                  for level in flow.snapshot().values()))
    assert metric(url, 'shepherd_api_requests_total{code="429",resource="events",verb="GET"}') == 1


def test_a_watch_gives_its_seat_back_when_it_starts_and_its_slot_when_it_ends(setup):
    replica, flow, url = setup
    params = {"watch": "1", "resourceVersion": "0", "allowWatchBookmarks": "true", "timeoutSeconds": "2"}
    replica.gate.set()
    first = requests.get(url + "/api/v1/namespaces/default/services", params=params, stream=True, timeout=10)
    assert first.status_code == 200
    lines = first.iter_lines()
    next(lines)                                                    # the stream is open
    snap = flow.snapshot()
    assert snap[WORKLOAD]["inFlight"] == 0 and snap[LONG_RUNNING_OTHER]["inFlight"] == 1

    second = requests.get(url + "/api/v1/namespaces/default/services", params=params, timeout=10)
    assert second.status_code == 429 and second.json()["reason"] == "TooManyRequests"
    assert "--max-watches" in second.json()["message"] and second.headers["Retry-After"] == "2"

    for _ in lines:                                                # the server ends it after 2 s
        pass
    first.close()
    assert wait_until(lambda: flow.snapshot()[LONG_RUNNING_OTHER]["inFlight"] == 0)
    again = requests.get(url + "/api/v1/namespaces/default/services", params=params, stream=True, timeout=10)
    assert again.status_code == 200
    again.close()


def test_a_refused_request_is_never_handled(setup):
    replica, flow, url = setup
    for level in flow.levels.values():                             # every seat taken, no queue left
        for _ in range(level.seats):
            level.acquire(0)
        level.queue_length = 0
    refused = requests.post(url + "/api/v1/namespaces/default/pods", json={"metadata": {"name": "x"}}, timeout=5)
    assert refused.status_code == 429 and refused.json()["reason"] == "TooManyRequests"
    assert requests.get(url + "/healthz", timeout=5).status_code == 200    # exempt


def test_a_seat_is_held_until_the_body_is_handed_over_a_watch_seat_only_until_it_starts():
    from werkzeug.test import create_environ, run_wsgi_app
    from shepherd_ha.api.flow_control import LONG_RUNNING_SYSTEM, SYSTEM
    replica = SlowReplica()
    flow = FlowControl(max_inflight=8, max_watches=4, queue_wait=0)
    app = create_app(replica, flow=flow)

    body, status, _ = run_wsgi_app(app, create_environ("/api/v1/nodes/n1"), buffered=False)
    assert status.startswith("200")
    assert flow.snapshot()[SYSTEM]["inFlight"] == 1            # the body is not handed over yet
    body.close()
    assert flow.snapshot()[SYSTEM]["inFlight"] == 0

    watch = create_environ("/api/v1/pods", query_string="watch=1&resourceVersion=0&fieldSelector=spec.nodeName=n1")
    replica.gate.set()
    body, status, _ = run_wsgi_app(app, watch, buffered=False)
    assert status.startswith("200")
    snap = flow.snapshot()
    assert snap[SYSTEM]["inFlight"] == 0 and snap[LONG_RUNNING_SYSTEM]["inFlight"] == 1
    body.close()
    assert flow.snapshot()[LONG_RUNNING_SYSTEM]["inFlight"] == 0
