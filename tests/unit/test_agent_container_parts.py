"""The container parts of the agent's pod machinery (agent/pods.py wires them)
built alone, with fakes of only what each constructor names."""
import signal
import threading
import time

from agent import labels as L
from agent.container_start import ContainerStarter
from agent.container_stop import ContainerStopper
from agent.container_sync import ContainerSync
from agent.dns.pod_dns import ClusterDNS
from agent.node_containers import NodeContainers
from agent.pod_state import ContainerState, PodState
from agent.pod_sync import ContainerRunner
from agent.runtime.hollow_runtime import HollowRuntime
from agent.sandbox import SandboxKeeper
from test_agent_pod_parts import NODE, Events, make_pod, run_container


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
        self.starts = 0

    def attach(self, config, pod):
        self.attached.append(config.name)
        config.ipv4_address = "10.244.0.7"
        return config

    def started(self):            # a container on the bridge started: hairpin its port
        self.starts += 1


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
    assert cid and delay is None and state.sandbox.running and network.attached == [created[0].name] and network.starts == 1
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

    def sync(self, state, pod, c, cs, latest, policy, sandbox_id, now, kept=None):
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
