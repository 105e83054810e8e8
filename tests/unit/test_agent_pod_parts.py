"""The table, watch, status, deletion and housekeeping parts of the agent's pod
machinery (agent/pods.py wires them) built alone, with fakes of only what each
constructor names; the container parts: test_agent_container_parts.py."""
import json
import signal
import threading
import time
import types

import pytest

from agent import labels as L
from agent.housekeeping import Housekeeper
from agent.node_containers import NodeContainers
from agent.orphan_cleanup import OrphanCleaner
from agent.pod_state import ContainerState, PodState, PodTable
from agent.pod_termination import Terminator
from agent.pod_watch import PodWatch
from agent.runtime.base import ContainerConfig, RuntimeFailure
from agent.runtime.hollow_runtime import HollowRuntime
from agent.status_report import StatusReporter
from real_api import free_port, token_for, token_table
from shepherd_ha.client import ApiError, Client
from tests.waiting import wait_for

NODE = "node-a"
NODE_USER = "system:node:" + NODE
PODS = "/api/v1/pods"


@pytest.fixture
def api(store, replicas):
    """The real API over an in-memory store, and the agent's real client with this node's
    identity (the node authorizer answers as it would the agent)."""
    server = replicas(tokens=token_table({NODE_USER: ["system:nodes"]}))
    client = Client([server.url], timeout=2.0, retry_deadline=1.0, token=token_for(NODE_USER))
    yield types.SimpleNamespace(store=store, server=server, client=client)
    client.close()


def sent(server, method):
    return [r for r in list(server.requests) if r["method"] == method]


def make_pod(name="web", uid=None, rv="5", containers=None, node=NODE, **meta):
    metadata = {"name": name, "namespace": "default", "uid": uid or "uid-" + name, "resourceVersion": rv}
    metadata.update(meta)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"nodeName": node, "restartPolicy": "Always", "terminationGracePeriodSeconds": 1,
                     "containers": containers or [{"name": "main", "image": "img:1"}]},
            "status": {"phase": "Pending"}}


def run_container(runtime, uid, cname="main", pod="web", sandbox=False):
    labels = {L.NODE: NODE, L.POD_UID: uid, L.POD_NAME: pod, L.POD_NAMESPACE: "default",
              L.CONTAINER_NAME: cname}
    if sandbox:
        labels = dict(labels, **{L.SANDBOX: "true"})
    cid = runtime.create(ContainerConfig(name="%s-%s-%s" % (pod, cname, uid), image="img:1", labels=labels))
    runtime.start(cid)
    return cid


class Events:
    def __init__(self):
        self.emitted = []

    def emit(self, pod, reason, message, kind="Normal", container=None):
        self.emitted.append((reason, message))

    def reasons(self):
        return [r for r, _ in self.emitted]


# ------------------------------------------------------------------ PodTable

def test_pod_table_keeps_the_newest_version_and_tombstones_a_removed_pod():
    table = PodTable(NODE)
    dropped = []
    table.on_forget(dropped.append)
    table.observe(make_pod(rv="5"))
    assert table.queue.get(0) == "uid-web"
    table.queue.done("uid-web")
    table.observe(make_pod(rv="4"))                   # older: ignored, not queued
    assert table.pod_of("uid-web")["metadata"]["resourceVersion"] == "5" and len(table.queue) == 0
    table.observe(make_pod(node="node-b", rv="6"))    # bound elsewhere now: forgotten
    assert table.pod_of("uid-web") is None and dropped == ["uid-web"] and table.knows("uid-web")
    table.remove(table.get("uid-web"))
    table.observe(make_pod(rv="7"))                   # a late event of a pod deleted for good
    assert not table.knows("uid-web")
    table.expire_tombstones(60.0, now=time.monotonic() + 61)
    table.observe(make_pod(rv="8"))
    assert table.knows("uid-web")


# ------------------------------------------------------------------ PodWatch

def run_pod_watch(client, table, stop):
    watch = threading.Thread(target=PodWatch(client, table, stop).run, name="pod-watch", daemon=True)
    watch.start()
    return watch


def test_pod_watch_lists_then_follows_the_watch_into_the_table(api):
    stop = threading.Event()
    table = PodTable(NODE)
    table.observe(make_pod("stale", rv="1"))          # gone from the list: forgotten
    api.store.put("pods", make_pod("a"))
    api.store.put("pods", make_pod("elsewhere", node="node-b"))
    listed_at = api.store.fsm.revision
    watch = run_pod_watch(api.client, table, stop)
    try:
        wait_for("the list", table.synced.is_set, 10)
        assert table.api_reachable and table.pod_of("uid-a") is not None
        assert table.pod_of("uid-stale") is None and table.pod_of("uid-elsewhere") is None
        api.store.put("pods", make_pod("b"))          # after the list: the watch brings them
        api.store.remove("pods", "a")
        wait_for("b added and a deleted through the watch",
                 lambda: table.pod_of("uid-b") is not None and table.pod_of("uid-a") is None, 10)
    finally:
        stop.set()
        watch.join(5)
    assert not watch.is_alive()
    selector = "spec.nodeName=%s" % NODE
    gets = [(r["path"], r["query"]) for r in sent(api.server, "GET")]
    assert gets[0] == (PODS, {"fieldSelector": selector, "resourceVersion": "0"})       # the list, any replica
    assert gets[1] == (PODS, {"fieldSelector": selector, "watch": "1", "allowWatchBookmarks": "true",
                              "resourceVersion": str(listed_at)})                      # the watch from its revision
    assert table.synced.is_set() and table.api_reachable
    assert table.pod_of("uid-b") is not None and table.pod_of("uid-a") is None


def test_pod_watch_marks_the_api_unreachable_and_keeps_the_pods():
    stop = threading.Event()
    table = PodTable(NODE)
    table.observe(make_pod("a"))
    table.api_reachable = True
    client = Client(["http://127.0.0.1:%d" % free_port()], timeout=0.5, retry_deadline=0.2)   # nothing listens
    watch = run_pod_watch(client, table, stop)
    try:
        wait_for("the list to fail", lambda: not table.api_reachable, 10)
    finally:
        stop.set()
        watch.join(5)
        client.close()
    assert not watch.is_alive()
    assert not table.api_reachable and not table.synced.is_set() and table.pod_of("uid-a") is not None


# ------------------------------------------------------------------ NodeContainers

def test_node_containers_are_this_nodes_by_pod():
    runtime = HollowRuntime(NODE)
    a = run_container(runtime, "uid-a", pod="a")
    run_container(runtime, "uid-a", cname="pause", pod="a", sandbox=True)
    run_container(runtime, "uid-b", pod="b")
    containers = NodeContainers(runtime, NODE)
    assert len(containers.all()) == 3
    assert {i.id for i in containers.of_pod("uid-a")} >= {a} and len(containers.of_pod("uid-a")) == 2
    assert containers.running_count() == 2                 # the sandbox does not count
    containers.remove_named("a-main-uid-a")
    assert runtime.inspect(a) is None

    class Broken(HollowRuntime):
        def list(self, labels):
            raise RuntimeFailure("docker is down")
    assert NodeContainers(Broken(NODE), NODE).running_count() is None


# ------------------------------------------------------------------ StatusReporter

class Writer:
    def __init__(self):
        self.submitted, self.dropped = [], []

    def submit(self, uid, status):
        self.submitted.append((uid, status))

    def drop(self, uid):
        self.dropped.append(uid)


def test_status_reporter_hands_a_changed_status_to_the_writer():
    runtime = HollowRuntime(NODE)
    writer = Writer()
    reporter = StatusReporter(writer, "hollow", "10.1.2.3")
    pod = make_pod()
    state = PodState(pod)
    cs = state.containers["main"] = ContainerState("main", 0.2, 1.0)
    cs.instance = runtime.inspect(run_container(runtime, state.uid))
    reporter.report(state, pod, "Always")
    (uid, status), = writer.submitted
    assert uid == "uid-web" and status["phase"] == "Running" and status["hostIP"] == "10.1.2.3"
    assert status["containerStatuses"][0]["containerID"] == "hollow://" + cs.instance.id
    pod["status"] = status                             # as stored: nothing to write
    reporter.report(state, pod, "Always")
    assert len(writer.submitted) == 1 and writer.dropped == ["uid-web"]


# ------------------------------------------------------------------ Terminator

class StopperFake:
    def __init__(self, runtime):
        self.runtime = runtime
        self.stopped = []

    def stop_containers(self, ids, deadline_fn):
        self.stopped.append(list(ids))
        for cid in ids:
            self.runtime.signal(cid, signal.SIGKILL)


def terminator_of(api, runtime, table, dropped):
    stopper, events = StopperFake(runtime), Events()
    terminator = Terminator(api.client, runtime, NodeContainers(runtime, NODE), stopper, events, table,
                            dropped.append, threading.Event())
    return terminator, stopper, events


def test_terminator_stops_removes_deletes_for_good_and_tombstones(api):
    runtime = HollowRuntime(NODE)
    table = PodTable(NODE)
    api.store.put("pods", make_pod())
    table.observe(api.store.delete_gracefully("web", seconds=1))      # as the API marks it
    state = table.get("uid-web")
    cid = run_container(runtime, state.uid)
    dropped = []
    terminator, stopper, events = terminator_of(api, runtime, table, dropped)
    terminator.terminate(state)
    state.terminator.join(5)
    assert not state.terminator.is_alive()
    assert stopper.stopped == [[cid]] and runtime.list({}) == [] and events.reasons() == ["Killing"]
    [delete] = sent(api.server, "DELETE")
    assert delete["path"] == "/api/v1/namespaces/default/pods/web"
    assert json.loads(delete["body"])["preconditions"] == {"uid": "uid-web"}
    assert api.store.get_obj("pods", "web") is None                   # deleted for good
    assert not table.knows("uid-web") and dropped == ["uid-web"]
    table.observe(make_pod(rv="9"))                    # a late event: ignored
    assert not table.knows("uid-web")


def test_terminator_leaves_a_new_pod_of_the_same_name_alone(api):
    runtime = HollowRuntime(NODE)
    table = PodTable(NODE)
    api.store.put("pods", make_pod())
    table.observe(api.store.delete_gracefully("web", seconds=1))
    state = table.get("uid-web")
    run_container(runtime, state.uid)
    api.store.remove("pods", "web")                    # gone, and a new pod of that name bound here
    api.store.put("pods", make_pod(uid="uid-web-2"))
    dropped = []
    terminator, _, _ = terminator_of(api, runtime, table, dropped)
    terminator.terminate(state)
    state.terminator.join(5)
    assert not state.terminator.is_alive()
    [delete] = sent(api.server, "DELETE")              # refused by its uid precondition, not retried
    assert json.loads(delete["body"])["preconditions"] == {"uid": "uid-web"}
    assert api.store.get_obj("pods", "web")["metadata"]["uid"] == "uid-web-2"
    assert runtime.list({}) == [] and not table.knows("uid-web") and dropped == ["uid-web"]


# ------------------------------------------------------------------ OrphanCleaner

def test_orphan_cleaner_removes_only_what_no_pod_of_this_node_owns(api):
    runtime = HollowRuntime(NODE)
    table = PodTable(NODE)
    cid = run_container(runtime, "uid-web")
    containers = runtime.list({L.POD_UID: "uid-web"})
    api.store.put("pods", make_pod())
    OrphanCleaner(api.client, runtime, table).remove_orphans("uid-web", containers)
    assert runtime.inspect(cid) is not None and table.knows("uid-web")      # ours after all: adopted
    api.store.remove("pods", "web")
    OrphanCleaner(api.client, runtime, table).remove_orphans("uid-web", containers)
    assert runtime.inspect(cid) is not None                                 # known now: left alone
    OrphanCleaner(api.client, runtime, PodTable(NODE)).remove_orphans("uid-web", containers)
    assert runtime.inspect(cid) is None                                     # 404: removed
    # a pod of that name bound to another node: NodeRestriction answers 403, not ours either
    api.store.put("pods", make_pod(node="node-b"))
    cid = run_container(runtime, "uid-web")
    OrphanCleaner(api.client, runtime, PodTable(NODE)).remove_orphans("uid-web", runtime.list({L.POD_UID: "uid-web"}))
    assert runtime.inspect(cid) is None
    # a linearizable read of the pod each time it was not known (the known one asked nothing)
    assert [(r["path"], r["query"]) for r in sent(api.server, "GET")] == \
        [("/api/v1/namespaces/default/pods/web", {})] * 3
    with pytest.raises(ApiError) as refused:          # the last one was the authorizer's refusal
        api.client.get("pods", "web")
    assert refused.value.code == 403


# ------------------------------------------------------------------ Housekeeper

class OrphansFake:
    def __init__(self):
        self.orphans, self.volume_passes = [], []

    def remove_orphans(self, uid, containers):
        self.orphans.append(uid)

    def remove_orphaned_volumes(self, with_containers):
        self.volume_passes.append(set(with_containers))


def test_housekeeper_queues_changed_pods_and_hands_orphans_on():
    runtime = HollowRuntime(NODE)
    table = PodTable(NODE)
    table.observe(make_pod())
    table.queue.get(0)
    table.queue.done("uid-web")
    cid = run_container(runtime, "uid-web")
    run_container(runtime, "uid-gone", pod="gone")
    orphans = OrphansFake()
    keeper = Housekeeper(runtime, NodeContainers(runtime, NODE), table, orphans, threading.Event())
    keeper.housekeeping()
    assert orphans.orphans == []                       # not listed yet: nothing is an orphan
    assert table.queue.get(0) == "uid-web"            # its containers are new to housekeeping
    table.queue.done("uid-web")
    table.synced.set()
    table.api_reachable = True
    keeper.housekeeping()
    assert orphans.orphans == ["uid-gone"] and len(table.queue) == 0     # unchanged: not queued
    runtime.signal(cid, signal.SIGKILL)                # killed outside the agent
    keeper.housekeeping(resync=True)
    assert table.queue.get(0) == "uid-web"
    assert orphans.volume_passes == [{"uid-web", "uid-gone"}]
