"""The agent's Events (agent/events.py): shape, aggregation in the queue and in the
API, the bounded queue while the API is unreachable, and the events the pod
manager posts for a started, a crash-looping and a badly configured pod."""
import logging
import threading
import time

import pytest

from agent import labels as L
from agent.events import COMPONENT, EventSink, event_name, pod_reference
from agent.pods import PodManager
from agent.runtime.base import CreateError
from agent.runtime.hollow_runtime import HollowRuntime
from shepherd_ha.client import Client
from real_api import ApiServer, ApiStore
from shepherd_ha.model.validation import validate_object

NODE = "node-ev"


def make_pod(name="web", uid=None, namespace="default", containers=None, **spec):
    body = {"nodeName": NODE, "restartPolicy": "Always", "terminationGracePeriodSeconds": 1,
            "containers": containers or [{"name": "main", "image": "shepherd/busybox:1"}]}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": uid or "uid-" + name,
                         "resourceVersion": "7"},
            "spec": body, "status": {"phase": "Pending"}}


class Clock:
    def __init__(self):
        self.t = 0

    def __call__(self):
        self.t += 1
        return "2026-11-29T10:00:%02dZ" % self.t


@pytest.fixture
def api():
    store = ApiStore()
    server = ApiServer(store).start()
    client = Client([server.url], timeout=2.0, retry_deadline=1.0)
    yield server, store, client
    client.close()
    server.stop()


def events_in(store, namespace="default"):
    return sorted(store.list("events", namespace),
                  key=lambda e: e["metadata"]["name"])


def test_an_event_has_the_kubelet_shape_and_validates(api):
    server, store, client = api
    sink = EventSink(client, NODE, threading.Event(), now=Clock())
    pod = make_pod(namespace="team-a")
    store.put("namespaces", {"metadata": {"name": "team-a"}})    # the real API refuses events of a missing one
    sink.emit(pod, "Started", "Started container main", "Normal", "main")
    sink.flush()
    [ev] = events_in(store, "team-a")
    assert ev["involvedObject"] == {"kind": "Pod", "apiVersion": "v1", "name": "web", "namespace": "team-a",
                                    "uid": "uid-web", "resourceVersion": "7", "fieldPath": "spec.containers{main}"}
    assert ev["reason"] == "Started" and ev["message"] == "Started container main" and ev["type"] == "Normal"
    assert ev["source"] == {"component": COMPONENT, "host": NODE}
    assert ev["count"] == 1 and ev["firstTimestamp"] == ev["lastTimestamp"]
    assert ev["metadata"]["name"].startswith("web.")
    assert validate_object("events", ev) == []      # what the real API server checks


def test_an_event_about_the_node_goes_to_default_as_the_kubelets_do(api):
    server, store, client = api
    sink = EventSink(client, NODE, threading.Event(), now=Clock())
    sink.emit_node("ServiceProxyStoodDown", "Service proxy stands down: another cluster", "Warning")
    sink.emit_node("ServiceProxyStoodDown", "Service proxy stands down: another cluster", "Warning")
    sink.flush()
    [ev] = events_in(store, "default")
    assert ev["involvedObject"] == {"kind": "Node", "apiVersion": "v1", "name": NODE, "uid": NODE}
    assert ev["type"] == "Warning" and ev["count"] == 2 and ev["source"]["host"] == NODE
    assert validate_object("events", ev) == []


def test_repeats_are_one_event_with_a_count(api):
    server, store, client = api
    clock = Clock()
    sink = EventSink(client, NODE, threading.Event(), now=clock)
    pod = make_pod()
    for _ in range(3):
        sink.emit(pod, "BackOff", "Back-off restarting failed container main", "Warning", "main")
    assert sink.pending() == [("BackOff", "Back-off restarting failed container main", "Warning", 3)]
    sink.flush()
    [ev] = events_in(store)
    assert ev["count"] == 3 and ev["firstTimestamp"] == "2026-11-29T10:00:01Z"
    assert ev["lastTimestamp"] == "2026-11-29T10:00:03Z"
    posts = [r for r in server.requests if r["method"] == "POST"]
    assert len(posts) == 1
    sink.emit(pod, "BackOff", "Back-off restarting failed container main", "Warning", "main")
    sink.emit(pod, "BackOff", "Back-off restarting failed container main", "Warning", "main")
    sink.flush()
    [ev] = events_in(store)
    assert ev["count"] == 5 and ev["lastTimestamp"] == "2026-11-29T10:00:05Z"
    assert ev["firstTimestamp"] == "2026-11-29T10:00:01Z"
    patches = [r for r in server.requests if r["method"] == "PATCH"]
    assert len(patches) == 1 and "merge-patch" in patches[0]["content_type"]
    # something else about the same pod is another event
    sink.emit(pod, "Started", "Started container main", "Normal", "main")
    sink.flush()
    assert len(events_in(store)) == 2


def test_a_restarted_agent_adds_to_the_existing_count(api):
    server, store, client = api
    pod = make_pod()
    first = EventSink(client, NODE, threading.Event(), now=Clock())
    first.emit(pod, "Pulled", 'Container image "x" already present on machine', "Normal", "main")
    first.flush()
    second = EventSink(client, NODE, threading.Event(), now=Clock())
    second.emit(pod, "Pulled", 'Container image "x" already present on machine', "Normal", "main")
    second.emit(pod, "Pulled", 'Container image "x" already present on machine', "Normal", "main")
    second.flush()
    [ev] = events_in(store)
    assert ev["count"] == 3


def test_an_event_pruned_meanwhile_is_created_again(api):
    server, store, client = api
    pod = make_pod()
    sink = EventSink(client, NODE, threading.Event(), now=Clock())
    sink.emit(pod, "Started", "Started container main", "Normal", "main")
    sink.flush()
    [ev] = events_in(store)
    store.remove("events", ev["metadata"]["name"], "default")
    sink.emit(pod, "Started", "Started container main", "Normal", "main")
    sink.flush()
    [ev] = events_in(store)
    # a fresh event, as after the pruner's TTL in Kubernetes
    assert ev["count"] == 1 and ev["firstTimestamp"] == "2026-11-29T10:00:02Z"


def test_a_full_queue_drops_the_oldest_with_a_log_line(caplog):
    sink = EventSink(None, NODE, threading.Event(), cap=3)
    pod = make_pod()
    with caplog.at_level(logging.WARNING, logger="agent.events"):
        for i in range(5):
            sink.emit(pod, "Unhealthy", "Readiness probe failed: try %d" % i, "Warning", "main")
    assert [p[1] for p in sink.pending()] == ["Readiness probe failed: try %d" % i for i in (2, 3, 4)]
    assert sink.dropped == 2
    assert "event queue full" in caplog.text and "try 0" in caplog.text and "try 1" in caplog.text


def test_emit_never_waits_for_an_unreachable_api_and_posts_once_it_answers(api):
    server, store, client = api
    server.stop()                       # no replica answers
    stop = threading.Event()
    sink = EventSink(client, NODE, stop, cap=50)
    sink.start()
    try:
        pod = make_pod()
        for i in range(20):
            sink.emit(pod, "Unhealthy", "Liveness probe failed: %d" % (i % 4), "Warning", "main")
        # the sink thread is stuck retrying, the producers are not: everything is queued
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sum(p[3] for p in sink.pending()) < 19:
            time.sleep(0.05)
        assert sum(p[3] for p in sink.pending()) >= 19 and len(sink.pending()) <= 4
        server.start()                  # the replica is back (same port)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (sink.pending() or len(events_in(store)) < 4):
            time.sleep(0.1)
        evs = events_in(store)
        assert len(evs) == 4 and sum(e["count"] for e in evs) == 20
    finally:
        stop.set()
        sink.join(5)


def test_a_refused_event_is_dropped_with_a_log_line(api, caplog):
    server, store, client = api
    sink = EventSink(client, NODE, threading.Event(), now=Clock())
    pod = make_pod()
    server.fail_next(1, code=422, reason="Invalid", message="involvedObject.kind: Required value",
                     methods=["POST"])
    sink.emit(pod, "Started", "Started container main", "Normal", "main")
    with caplog.at_level(logging.WARNING, logger="agent.events"):
        sink.flush()
    assert events_in(store) == [] and "refused by the API" in caplog.text
    assert event_name(pod_reference(pod, "main"), "Started", "Started container main", "Normal").startswith("web.")


# ---- the events the pod manager posts ----

class Runtime(HollowRuntime):
    name = "fake"
    simulated = False

    def __init__(self):
        super().__init__(NODE)
        self.start_errors = {}

    def start(self, container_id):
        info = self._containers[container_id]
        message = self.start_errors.get(info.labels.get(L.CONTAINER_NAME))
        if message:
            raise CreateError(message)
        super().start(container_id)

    def exit(self, container_id, code):
        with self._lock:
            info = self._containers[container_id]
            info.state, info.exit_code = "exited", code
            info.finished_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@pytest.fixture
def manager(api, tmp_path):
    server, store, client = api
    runtime = Runtime()
    stop = threading.Event()
    m = PodManager(client, runtime, NODE, "10.1.2.3", stop, backoff_base=0.2, backoff_cap=1.0, probes=False,
                   state_dir=str(tmp_path / "state"))
    m.synced.set()
    m.api_reachable = True
    yield m, runtime, store
    stop.set()


def reasons(store):
    return {(e["reason"], e["type"]): e for e in events_in(store)}


def test_a_started_pod_gets_pulled_created_started(manager):
    m, runtime, store = manager
    pod = store.put("pods", make_pod())
    m.observe(pod)
    m.sync(pod["metadata"]["uid"])
    m.events.flush()
    got = reasons(store)
    assert set(got) == {("Pulled", "Normal"), ("Created", "Normal"), ("Started", "Normal")}
    assert got[("Pulled", "Normal")]["message"] == 'Container image "shepherd/busybox:1" already present on machine'
    assert got[("Started", "Normal")]["involvedObject"]["uid"] == pod["metadata"]["uid"]
    assert got[("Started", "Normal")]["source"]["host"] == NODE


def test_a_crash_looping_pod_gets_back_off_events(manager):
    m, runtime, store = manager
    pod = store.put("pods", make_pod("crash"))
    uid = pod["metadata"]["uid"]
    m.observe(pod)
    m.sync(uid)
    for _ in range(3):
        [c] = [c for c in runtime.list({L.POD_UID: uid}) if c.state == "running"]
        runtime.exit(c.id, 1)
        m.sync(uid)                      # exited: restart at once (first) or back off
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not [c for c in runtime.list({L.POD_UID: uid})
                                                   if c.state == "running"]:
            time.sleep(0.05)
            m.sync(uid)
    m.events.flush()
    got = reasons(store)
    backoff = got[("BackOff", "Warning")]
    assert backoff["message"] == "Back-off restarting failed container main in pod crash_default(%s)" % uid
    assert backoff["count"] >= 1
    assert got[("Started", "Normal")]["count"] == 4


def test_a_refused_start_is_a_failed_warning_with_the_runtime_message(manager):
    m, runtime, store = manager
    runtime.start_errors["main"] = "Bind for 10.1.2.3:80 failed: port is already allocated"
    pod = store.put("pods", make_pod("ports"))
    m.observe(pod)
    m.sync(pod["metadata"]["uid"])
    m.events.flush()
    failed = reasons(store)[("Failed", "Warning")]
    assert failed["message"] == "Error: Bind for 10.1.2.3:80 failed: port is already allocated"


def test_deleting_a_pod_posts_killing(manager):
    m, runtime, store = manager
    pod = store.put("pods", make_pod("bye"))
    uid = pod["metadata"]["uid"]
    m.observe(pod)
    m.sync(uid)
    pod = store.delete_gracefully("bye", seconds=1)
    m.observe(pod)
    m.sync(uid)
    state = m.states.get(uid)
    if state is not None and state.terminator is not None:
        state.terminator.join(10)
    m.events.flush()
    assert reasons(store)[("Killing", "Normal")]["message"] == "Stopping container main"


class ProbedRuntime(Runtime):
    """exec probes fail with a message while `healthy` is False."""

    def __init__(self):
        super().__init__()
        self.healthy = True

    def exec(self, container_id, command, timeout):
        return (0, b"") if self.healthy else (1, b"no /tmp/alive")


def test_failed_probes_post_unhealthy_and_a_liveness_kill_posts_killing(api, tmp_path):
    server, store, client = api
    runtime = ProbedRuntime()
    stop = threading.Event()
    m = PodManager(client, runtime, NODE, "10.1.2.3", stop, backoff_base=0.2, backoff_cap=1.0, probes=True,
                   state_dir=str(tmp_path))
    m.synced.set()
    m.api_reachable = True
    try:
        pod = store.put("pods", make_pod("sick", containers=[{
            "name": "main", "image": "shepherd/busybox:1",
            "livenessProbe": {"exec": {"command": ["cat", "/tmp/alive"]}, "periodSeconds": 1,
                              "failureThreshold": 2}}]))
        uid = pod["metadata"]["uid"]
        m.observe(pod)
        m.sync(uid)
        state = m.states[uid]
        cs = state.containers["main"]
        runtime.healthy = False
        for _ in range(2):               # two failed runs reach the failure threshold
            m.prober._probe(state, cs, cs.liveness, cs.instance.id)
        assert cs.liveness.result is False
        m.sync(uid)                      # the worker kills the container
        m.events.flush()
        got = reasons(store)
        unhealthy = got[("Unhealthy", "Warning")]
        assert unhealthy["message"].startswith("Liveness probe failed: ") and unhealthy["count"] == 2
        assert "no /tmp/alive" in unhealthy["message"]
        assert got[("Killing", "Normal")]["message"].startswith("Container main failed liveness probe, "
                                                                "will be restarted")
    finally:
        stop.set()
        m.prober.join(2)


def test_event_qps_zero_posts_nothing_and_a_low_rate_aggregates_meanwhile(api):
    server, store, client = api
    off = EventSink(client, NODE, threading.Event(), qps=0)
    off.emit(make_pod(), "Started", "Started container main")
    assert off.pending() == []
    stop = threading.Event()
    slow = EventSink(client, NODE, stop, qps=2)
    while slow._tokens.take():         # spend the burst
        pass
    pod = make_pod()
    for _ in range(10):                # repeats while the sink waits for a token: one entry
        slow.emit(pod, "Unhealthy", "Readiness probe failed: 503", "Warning", "main")
    slow.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and sum(e["count"] for e in events_in(store)) < 10:
            time.sleep(0.05)
        [ev] = events_in(store)
        assert ev["count"] == 10
        assert len([r for r in server.requests if r["method"] in ("POST", "PATCH")]) == 1
    finally:
        stop.set()
        slow.join(5)
