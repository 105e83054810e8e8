"""The table, watch, status, deletion and housekeeping parts of the agent's pod
machinery (agent/pods.py wires them) built alone, with fakes of only what each
constructor names; the container parts: test_agent_container_parts.py."""
import signal
import threading
import time

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
from shepherd_ha.client import ApiError, NoReplicaReachable

NODE = "node-a"


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

class WatchClient:
    def __init__(self, items, events, stop, fail=False):
        self.items, self.events, self.stop, self.fail = items, events, stop, fail

    def list(self, resource, namespace, field_selector=None, consistent=True):
        assert field_selector == "spec.nodeName=%s" % NODE
        if self.fail:
            self.stop.set()
            raise NoReplicaReachable("no replica answers")
        return {"items": self.items, "metadata": {"resourceVersion": "10"}}

    def watch(self, resource, namespace, resource_version=None, field_selector=None, stop=None):
        assert resource_version == "10"
        yield from self.events
        self.stop.set()


def test_pod_watch_lists_then_follows_the_watch_into_the_table():
    stop = threading.Event()
    table = PodTable(NODE)
    table.observe(make_pod("stale", rv="3"))          # gone from the list: forgotten
    client = WatchClient([make_pod("a")], [{"type": "ADDED", "object": make_pod("b")},
                                           {"type": "DELETED", "object": make_pod("a")}], stop)
    PodWatch(client, table, stop).run()
    assert table.synced.is_set() and table.api_reachable
    assert table.pod_of("uid-b") is not None
    assert table.pod_of("uid-a") is None and table.pod_of("uid-stale") is None


def test_pod_watch_marks_the_api_unreachable_and_keeps_the_pods():
    stop = threading.Event()
    table = PodTable(NODE)
    table.observe(make_pod("a"))
    table.api_reachable = True
    PodWatch(WatchClient([], [], stop, fail=True), table, stop).run()
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

class DeleteClient:
    def __init__(self):
        self.requests = []

    def request(self, method, path, params=None, body=None):
        self.requests.append((method, path, body))


class StopperFake:
    def __init__(self, runtime):
        self.runtime = runtime
        self.stopped = []

    def stop_containers(self, ids, deadline_fn):
        self.stopped.append(list(ids))
        for cid in ids:
            self.runtime.signal(cid, signal.SIGKILL)


def test_terminator_stops_removes_deletes_for_good_and_tombstones():
    runtime = HollowRuntime(NODE)
    table = PodTable(NODE)
    table.observe(make_pod(deletionTimestamp="2026-01-01T00:00:00Z", deletionGracePeriodSeconds=0))
    state = table.get("uid-web")
    cid = run_container(runtime, state.uid)
    client, stopper, events, dropped = DeleteClient(), StopperFake(runtime), Events(), []
    terminator = Terminator(client, runtime, NodeContainers(runtime, NODE), stopper, events, table,
                            dropped.append, threading.Event())
    terminator.terminate(state)
    state.terminator.join(5)
    assert stopper.stopped == [[cid]] and runtime.list({}) == [] and events.reasons() == ["Killing"]
    (method, path, body), = client.requests
    assert method == "DELETE" and path.endswith("/pods/web") and body["preconditions"] == {"uid": "uid-web"}
    assert not table.knows("uid-web") and dropped == ["uid-web"]
    table.observe(make_pod(rv="9"))                    # a late event: ignored
    assert not table.knows("uid-web")


# ------------------------------------------------------------------ OrphanCleaner

class GetClient:
    def __init__(self, pod=None):
        self.pod = pod

    def get(self, resource, name, namespace=None):
        if self.pod is None:
            raise ApiError({"code": 404, "reason": "NotFound", "message": "not found"})
        return self.pod


def test_orphan_cleaner_removes_only_what_no_pod_of_this_node_owns():
    runtime = HollowRuntime(NODE)
    table = PodTable(NODE)
    cid = run_container(runtime, "uid-web")
    containers = runtime.list({L.POD_UID: "uid-web"})
    OrphanCleaner(GetClient(make_pod()), runtime, table).remove_orphans("uid-web", containers)
    assert runtime.inspect(cid) is not None and table.knows("uid-web")      # ours after all: adopted
    OrphanCleaner(GetClient(), runtime, table).remove_orphans("uid-web", containers)
    assert runtime.inspect(cid) is not None                                 # known now: left alone
    OrphanCleaner(GetClient(), runtime, PodTable(NODE)).remove_orphans("uid-web", containers)
    assert runtime.inspect(cid) is None


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
