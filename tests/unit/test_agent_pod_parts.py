"""Each part of the agent's pod machinery (agent/pods.py wires them) built alone,
with fakes of only what its constructor names."""
import signal
import threading
import time

from agent import labels as L
from agent.container_start import ContainerStarter
from agent.container_stop import ContainerStopper
from agent.container_sync import ContainerSync
from agent.dns.pod_dns import ClusterDNS
from agent.housekeeping import Housekeeper
from agent.node_containers import NodeContainers
from agent.orphan_cleanup import OrphanCleaner
from agent.pod_state import ContainerState, PodState, PodTable
from agent.pod_sync import ContainerRunner
from agent.pod_termination import Terminator
from agent.pod_watch import PodWatch
from agent.runtime.base import ContainerConfig, RuntimeFailure
from agent.runtime.hollow_runtime import HollowRuntime
from agent.sandbox import SandboxKeeper
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


# ------------------------------------------------------------------ ContainerStopper

class StubbornRuntime(HollowRuntime):
    """SIGTERM is ignored (a process that traps it); signals are recorded."""

    def __init__(self):
        super().__init__(NODE)
        self.signals = []

    def signal(self, container_id, signum):
        self.signals.append(signum)
        if signum != signal.SIGTERM:
            super().signal(container_id, signum)


def test_container_stopper_terms_waits_out_the_grace_then_kills():
    runtime = StubbornRuntime()
    cid = run_container(runtime, "uid-a")
    stopper = ContainerStopper(runtime, Events(), threading.Event(), requeue=lambda uid: None)
    start = time.monotonic()
    stopper.stop_containers([cid], lambda: start + 0.3)
    assert runtime.signals == [signal.SIGTERM, signal.SIGKILL] and time.monotonic() - start >= 0.3
    assert not runtime.inspect(cid).running


def test_container_stopper_kills_on_its_own_thread_then_requeues_the_pod():
    runtime = HollowRuntime(NODE)
    cid = run_container(runtime, "uid-web")
    events, requeued = Events(), []
    done = threading.Event()
    stopper = ContainerStopper(runtime, events, threading.Event(),
                               requeue=lambda uid: (requeued.append(uid), done.set()))
    state = PodState(make_pod())
    cs = ContainerState("main", 0.2, 1.0)
    stopper.kill_async(state, cs, runtime.inspect(cid), "Error", "liveness probe failed")
    assert done.wait(5) and requeued == ["uid-web"]
    assert cs.killing == cid and cs.kill_reason == "Error" and events.reasons() == ["Killing"]
    assert not runtime.inspect(cid).running


# ------------------------------------------------------------------ SandboxKeeper

class PodNetwork:
    def __init__(self):
        self.attached = []

    def attach(self, config, pod):
        self.attached.append(config.name)
        config.ipv4_address = "10.244.0.7"
        return config


def two_containers():
    return [{"name": "main", "image": "img:1"}, {"name": "side", "image": "img:1"}]


def test_sandbox_keeper_starts_the_network_holder_through_the_pod_network_and_dns():
    runtime = HollowRuntime(NODE)
    network = PodNetwork()
    created = []
    create = runtime.create
    runtime.create = lambda config: (created.append(config), create(config))[1]
    keeper = SandboxKeeper(runtime, Events(), NODE, "10.1.2.3", "shepherd/busybox:1",
                           cluster_dns=ClusterDNS("10.96.0.10"), pod_network=network)
    pod = make_pod(containers=two_containers())
    state = PodState(pod)
    cid, delay = keeper.ensure(state, pod, [], {})
    assert cid and delay is None and state.sandbox.running and network.attached == [created[0].name]
    assert created[0].dns_servers == ["10.96.0.10"] and created[0].ipv4_address == "10.244.0.7"
    assert keeper.ensure(state, pod, [runtime.inspect(cid)], {}) == (cid, None)     # kept as it is


def test_sandbox_keeper_without_its_image_says_so_and_backs_off():
    class NoImages(HollowRuntime):
        def image_present(self, image):
            return False
    events = Events()
    keeper = SandboxKeeper(NoImages(NODE), events, NODE, "10.1.2.3", "missing/pause:1", backoff_base=0.2)
    pod = make_pod(containers=two_containers())
    state = PodState(pod)
    state.containers["main"] = ContainerState("main", 0.2, 1.0)
    cid, delay = keeper.ensure(state, pod, [], {})
    assert cid is None and delay > 0 and "missing/pause:1" in state.sandbox_error
    assert events.reasons() == ["FailedCreatePodSandBox"]
    assert state.containers["main"].waiting[0] == "CreateContainerError"


# ------------------------------------------------------------------ ContainerStarter

class Prober:
    def __init__(self):
        self.asked = []

    def state_for(self, spec, kind):
        self.asked.append(kind)
        return None


def test_container_starter_pulls_creates_starts_and_attaches_probes():
    runtime = HollowRuntime(NODE)
    events, prober = Events(), Prober()
    starter = ContainerStarter(runtime, events, NodeContainers(runtime, NODE), NODE, "10.1.2.3", prober=prober)
    pod = make_pod(containers=[{"name": "main", "image": "img:1", "imagePullPolicy": "Always"}])
    state, cs = PodState(pod), ContainerState("main", 0.2, 1.0)
    assert starter.start(state, pod, pod["spec"]["containers"][0], cs, 0, None, None, time.monotonic()) is None
    assert events.reasons() == ["Pulling", "Pulled", "Created", "Started"]
    assert cs.instance.running and cs.probe_instance == cs.instance.id
    assert prober.asked == ["readiness", "liveness"]


def test_container_starter_never_pulls_with_policy_never():
    class NoImages(HollowRuntime):
        def image_present(self, image):
            return False
    runtime = NoImages(NODE)
    events = Events()
    starter = ContainerStarter(runtime, events, NodeContainers(runtime, NODE), NODE, "10.1.2.3",
                               backoff_base=0.2)
    pod = make_pod(containers=[{"name": "main", "image": "img:1", "imagePullPolicy": "Never"}])
    cs = ContainerState("main", 0.2, 1.0)
    delay = starter.start(PodState(pod), pod, pod["spec"]["containers"][0], cs, 0, None, None, time.monotonic())
    assert delay > 0 and cs.waiting[0] == "ErrImageNeverPull" and events.reasons() == ["ErrImageNeverPull"]
    assert runtime.list({}) == []


# ------------------------------------------------------------------ ContainerSync

class Recorder:
    def __init__(self, answer=None):
        self.calls = []
        self.answer = answer

    def start(self, *args):
        self.calls.append(("start",) + args)
        return self.answer

    def kill_async(self, *args):
        self.calls.append(("kill",) + args)


def test_container_sync_restarts_an_exited_instance_and_kills_a_changed_one():
    runtime = HollowRuntime(NODE)
    starter, stopper = Recorder(), Recorder()
    sync = ContainerSync(runtime, Events(), starter, stopper)
    pod = make_pod()
    c = pod["spec"]["containers"][0]
    state, cs = PodState(pod), ContainerState("main", 0.0, 1.0)
    cid = run_container(runtime, state.uid)
    runtime.signal(cid, signal.SIGTERM)                # exited 143; Always restarts it (no backoff yet)
    sync.sync(state, pod, c, cs, runtime.inspect(cid), "Always", None, time.monotonic())
    assert starter.calls and starter.calls[0][5] == 1 and starter.calls[0][7]["exitCode"] == 143
    assert stopper.calls == []

    other = run_container(runtime, state.uid, pod="web2")
    info = runtime.inspect(other)
    info.labels[L.SPEC_HASH] = "an older definition"
    cs2 = ContainerState("main", 0.0, 1.0)
    assert sync.sync(state, pod, c, cs2, info, "Always", None, time.monotonic()) is None
    assert [call[0] for call in stopper.calls] == ["kill"] and "definition changed" in stopper.calls[0][5]


# ------------------------------------------------------------------ ContainerRunner

class ContainerSyncFake:
    def __init__(self, delay):
        self.delay = delay
        self.seen = []

    def sync(self, state, pod, c, cs, latest, policy, sandbox_id, now):
        self.seen.append((c["name"], latest.id if latest else None, policy))
        return self.delay


def test_container_runner_converges_each_container_reports_and_requeues():
    runtime = HollowRuntime(NODE)
    pod = make_pod()
    state = PodState(pod)
    cid = run_container(runtime, state.uid)
    reports, requeued = [], []
    runner = ContainerRunner(runtime, NodeContainers(runtime, NODE), sandboxes=None,
                             container_sync=ContainerSyncFake(0.5),
                             report=lambda s, p, policy: reports.append((s.uid, policy)),
                             requeue_after=lambda uid, delay: requeued.append((uid, delay)), address="10.1.2.3")
    runner.converge(state, pod)
    assert runner.container_sync.seen == [("main", cid, "Always")]
    assert reports == [("uid-web", "Always")] and requeued == [("uid-web", 0.5)]
    assert state.containers["main"].name == "main"


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
