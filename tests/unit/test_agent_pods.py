"""The pod worker's decisions against a fake runtime and the real API over an in-memory
store (tests/unit/real_api.py), reached by the agent's own client as its node (no threads
except the short-lived kill/terminate ones, which the tests join)."""
import copy
import json
import signal
import threading
import time

import pytest

from agent import labels as L
from agent import spec as P
from agent.pods import PodManager
from agent.runtime.base import CreateError, ImagePullError
from agent.runtime.hollow_runtime import HollowRuntime
from real_api import ApiServer, ApiStore, token_for, token_table
from shepherd_ha.client import Client
from shepherd_ha.model.times import format_time
from tests import waiting

NODE = "node-a"


class FakeRuntime(HollowRuntime):
    """Hollow containers with knobs: which images exist, pulls and starts that fail,
    and containers that exit on demand."""

    name = "fake"
    simulated = False

    def __init__(self):
        super().__init__(NODE)
        self.images = {"shepherd/busybox:1"}
        self.pullable = set()
        self.start_errors = {}           # container-name label -> message
        self.created = []
        self.most_instances = 0          # instances of one container at once, right after a create
        self.ignore_term = False         # SIGTERM does nothing (a process that traps it)
        self.signals = []

    def image_present(self, image):
        return image in self.images

    def pull_image(self, image):
        if image not in self.pullable:
            raise ImagePullError('pull access denied for %s' % image)
        self.images.add(image)

    def create(self, config):
        cid = super().create(config)
        self.created.append(config)
        same = {k: config.labels[k] for k in (L.POD_UID, L.CONTAINER_NAME) if k in config.labels}
        self.most_instances = max(self.most_instances, len(self.list(same)))
        return cid

    def start(self, container_id):
        info = self._containers[container_id]
        message = self.start_errors.get(info.labels.get(L.CONTAINER_NAME))
        if message:
            raise CreateError(message)
        super().start(container_id)

    def signal(self, container_id, signum):
        self.signals.append((container_id, signum, time.monotonic()))
        if self.ignore_term and signum == signal.SIGTERM:
            return
        super().signal(container_id, signum)

    def exit(self, container_id, code):
        with self._lock:
            info = self._containers[container_id]
            info.state, info.exit_code = "exited", code
            info.finished_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def running_of(self, pod_name, container="main"):
        return [c for c in self.list({L.POD_NAME: pod_name, L.CONTAINER_NAME: container}) if c.state == "running"]


class Api:
    """The real API (tests/unit/real_api.py) over an in-memory store, and the agent's real
    client with this node's identity, so the node authorizer answers as it would a node."""

    def __init__(self):
        user = "system:node:%s" % NODE
        self.store = ApiStore()
        self.server = ApiServer(self.store, tokens=token_table({user: ["system:nodes"]})).start()
        self.client = Client([self.server.url], timeout=2.0, retry_deadline=1.0, token=token_for(user))

    def close(self):
        self.client.close()
        self.server.stop()

    def add(self, pod):
        """Store `pod` (created, or written over by someone else); the stored object."""
        return self.store.put("pods", copy.deepcopy(pod))

    def pod(self, name):
        return self.store.get_obj("pods", name)

    def requests(self, method):
        return [r for r in self.server.requests if r["method"] == method]


def make_pod(name, containers=None, uid=None, **spec):
    body = {"nodeName": NODE, "restartPolicy": "Always", "terminationGracePeriodSeconds": 1,
            "containers": containers or [{"name": "main", "image": "shepherd/busybox:1",
                                          "imagePullPolicy": "IfNotPresent"}]}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": uid or "uid-" + name},
            "spec": body,
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}}


@pytest.fixture
def env():
    runtime = FakeRuntime()
    api = Api()
    stop = threading.Event()
    manager = PodManager(api.client, runtime, NODE, "10.1.2.3", stop, backoff_base=0.2, backoff_cap=1.0,
                         probes=False)
    manager.synced.set()
    manager.api_reachable = True
    yield manager, runtime, api
    stop.set()
    api.close()


def flush(manager):
    """Write every pending status now, as the writer thread would."""
    while True:
        with manager.writer._cond:
            if not manager.writer._pending:
                return
            uid, status = manager.writer._pending.popitem()
        manager.writer.write(uid, status)


def apply(manager, api, pod):
    manager.observe(api.add(pod))
    manager.sync(pod["metadata"]["uid"])
    flush(manager)
    return api.pod(pod["metadata"]["name"])


def resync(manager, api, name):
    manager.sync(api.pod(name)["metadata"]["uid"])
    flush(manager)
    return api.pod(name)


def cstatus(pod, i=0):
    return pod["status"]["containerStatuses"][i]


def wait_for(fn, timeout=5.0):
    return waiting.wait_for("condition", fn, timeout, interval=0.02)


def test_a_new_pod_runs_with_labels_and_status(env):
    manager, runtime, api = env
    pod = apply(manager, api, make_pod("web"))
    [config] = runtime.created
    assert config.labels[L.NODE] == NODE and config.labels[L.POD_UID] == "uid-web"
    assert config.name == "shepherd_node-a_default_web_main_0"
    st = pod["status"]
    assert st["phase"] == "Running" and st["hostIP"] == "10.1.2.3" and st["podIP"].startswith("10.")
    assert st["startTime"]
    c = cstatus(pod)
    assert c["ready"] and c["restartCount"] == 0 and "running" in c["state"]
    assert c["containerID"].startswith("fake://") and c["image"] == "shepherd/busybox:1"
    conds = {x["type"]: x["status"] for x in st["conditions"]}
    assert conds == {"PodScheduled": "True", "Initialized": "True", "ContainersReady": "True", "Ready": "True"}


def test_status_is_written_only_when_it_changes(env):
    manager, runtime, api = env
    apply(manager, api, make_pod("web"))
    n = len(api.requests("PATCH"))
    for _ in range(3):
        resync(manager, api, "web")
    assert len(api.requests("PATCH")) == n
    assert len(runtime.created) == 1


def test_a_killed_container_restarts_at_once_then_backs_off(env):
    manager, runtime, api = env
    apply(manager, api, make_pod("web"))
    first = runtime.running_of("web")[0]
    runtime.exit(first.id, 137)
    pod = resync(manager, api, "web")
    c = cstatus(pod)
    assert c["restartCount"] == 1 and "running" in c["state"]
    assert c["lastState"]["terminated"]["exitCode"] == 137
    assert c["lastState"]["terminated"]["containerID"] == "fake://" + first.id
    second = runtime.running_of("web")[0]
    runtime.exit(second.id, 1)
    pod = resync(manager, api, "web")
    c = cstatus(pod)
    assert c["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert "back-off 0s restarting failed container=main pod=web_default(uid-web)" in c["state"]["waiting"]["message"]
    assert c["restartCount"] == 1 and c["lastState"]["terminated"]["exitCode"] == 1
    assert pod["status"]["phase"] == "Running"
    assert not runtime.running_of("web")
    time.sleep(0.25)
    pod = resync(manager, api, "web")
    assert cstatus(pod)["restartCount"] == 2 and "running" in cstatus(pod)["state"]
    # the instance before the last one is kept for `logs --previous`; the one before it went
    # before the new one was created (never three, not even between create and start)
    assert runtime.most_instances == 2
    names = sorted(c.name for c in runtime.list({L.POD_NAME: "web"}))
    assert names == ["shepherd_node-a_default_web_main_1", "shepherd_node-a_default_web_main_2"]


@pytest.mark.parametrize("policy,code,phase,reason", [
    ("Never", 0, "Succeeded", "Completed"), ("Never", 2, "Failed", "Error"),
    ("OnFailure", 0, "Succeeded", "Completed")])
def test_pods_that_do_not_restart_end(env, policy, code, phase, reason):
    manager, runtime, api = env
    apply(manager, api, make_pod("job", restartPolicy=policy))
    runtime.exit(runtime.running_of("job")[0].id, code)
    pod = resync(manager, api, "job")
    assert pod["status"]["phase"] == phase
    term = cstatus(pod)["state"]["terminated"]
    assert term["exitCode"] == code and term["reason"] == reason
    assert cstatus(pod)["restartCount"] == 0 and not cstatus(pod)["ready"]
    pod = resync(manager, api, "job")
    assert len(runtime.created) == 1 and pod["status"]["phase"] == phase


def test_on_failure_restarts_a_failed_container(env):
    manager, runtime, api = env
    apply(manager, api, make_pod("job", restartPolicy="OnFailure"))
    runtime.exit(runtime.running_of("job")[0].id, 5)
    pod = resync(manager, api, "job")
    assert cstatus(pod)["restartCount"] == 1 and pod["status"]["phase"] == "Running"


def test_unknown_image_with_never_and_failed_pulls_say_why(env):
    manager, runtime, api = env
    pod = apply(manager, api, make_pod("never", [{"name": "main", "image": "nope:1", "imagePullPolicy": "Never"}]))
    w = cstatus(pod)["state"]["waiting"]
    assert w["reason"] == "ErrImageNeverPull"
    assert w["message"] == 'Container image "nope:1" is not present with pull policy of Never'
    assert pod["status"]["phase"] == "Pending"
    pod = apply(manager, api, make_pod("pull", [{"name": "main", "image": "nope:2", "imagePullPolicy": "Always"}]))
    w = cstatus(pod)["state"]["waiting"]
    assert w["reason"] == "ErrImagePull" and "pull access denied for nope:2" in w["message"]
    time.sleep(0.05)
    pod = resync(manager, api, "pull")
    assert cstatus(pod)["state"]["waiting"]["reason"] == "ImagePullBackOff"
    runtime.pullable.add("nope:2")
    time.sleep(0.5)
    pod = resync(manager, api, "pull")
    assert "running" in cstatus(pod)["state"]
    assert not runtime.created[0].image == "nope:1"


def test_a_refused_start_is_create_container_error_and_other_pods_run(env):
    manager, runtime, api = env
    runtime.start_errors["bad"] = "Bind for 10.1.2.3:80 failed: port is already allocated"
    pod = apply(manager, api, make_pod("ports", [{"name": "bad", "image": "shepherd/busybox:1"}]))
    w = cstatus(pod)["state"]["waiting"]
    assert w == {"reason": "CreateContainerError", "message": "Bind for 10.1.2.3:80 failed: port is already allocated"}
    assert not runtime.list({L.POD_NAME: "ports"})      # the refused container is removed
    ok = apply(manager, api, make_pod("fine"))
    assert ok["status"]["phase"] == "Running"
    del runtime.start_errors["bad"]
    time.sleep(0.3)
    pod = resync(manager, api, "ports")
    assert "running" in cstatus(pod)["state"] and cstatus(pod)["restartCount"] == 0


def test_a_new_agent_adopts_running_containers(env):
    manager, runtime, api = env
    apply(manager, api, make_pod("web"))
    runtime.exit(runtime.running_of("web")[0].id, 137)
    before = resync(manager, api, "web")
    running = runtime.running_of("web")[0].id
    fresh = PodManager(api.client, runtime, NODE, "10.1.2.3", threading.Event(), probes=False)
    fresh.synced.set()
    fresh.observe(api.pod("web"))
    fresh.sync("uid-web")
    flush(fresh)
    after = api.pod("web")
    assert runtime.running_of("web")[0].id == running and len(runtime.created) == 2
    assert cstatus(after)["restartCount"] == 1
    assert cstatus(after)["lastState"] == cstatus(before)["lastState"]
    assert after["status"]["podIP"] == before["status"]["podIP"]


def test_a_second_running_instance_is_removed(env):
    manager, runtime, api = env
    pod = make_pod("web")
    apply(manager, api, pod)
    config = P.container_config(pod, pod["spec"]["containers"][0], NODE, "10.1.2.3", 0)
    config.name = "a-duplicate"
    runtime.start(runtime.create(config))
    assert len(runtime.running_of("web")) == 2
    resync(manager, api, "web")
    assert len(runtime.running_of("web")) == 1


def test_orphans_are_removed_once_the_pods_are_known(env):
    manager, runtime, api = env
    apply(manager, api, make_pod("web"))
    other = make_pod("gone", uid="uid-gone")
    cid = runtime.create(P.container_config(other, other["spec"]["containers"][0], NODE, "10.1.2.3", 0))
    runtime.start(cid)
    foreign = make_pod("foreign", uid="uid-x")
    config = P.container_config(foreign, foreign["spec"]["containers"][0], "another-node", "10.1.2.3", 0)
    fid = runtime.create(config)
    manager.synced.clear()
    manager.housekeeping()
    assert runtime.inspect(cid) is not None     # not before the first list
    manager.synced.set()
    manager.housekeeping()
    assert runtime.inspect(cid) is None
    assert runtime.inspect(fid) is not None     # another node's container is never touched
    assert runtime.running_of("web")


def test_graceful_deletion_stops_removes_then_deletes_with_uid(env):
    manager, runtime, api = env
    apply(manager, api, make_pod("web"))
    pod = api.store.delete_gracefully("web", 1, timestamp=format_time())
    manager.observe(pod)
    manager.sync("uid-web")
    state = manager.states["uid-web"]
    state.terminator.join(5)
    assert not runtime.list({L.POD_NAME: "web"})
    [delete] = api.requests("DELETE")
    body = json.loads(delete["body"])
    assert delete["path"] == "/api/v1/namespaces/default/pods/web"
    assert delete["query"] == {"gracePeriodSeconds": "0"}
    assert body["preconditions"] == {"uid": "uid-web"} and body["gracePeriodSeconds"] == 0
    assert api.pod("web") is None                        # deleted for good
    assert "uid-web" not in manager.states
    manager.observe(copy.deepcopy(pod))      # a late event does not bring it back
    assert "uid-web" not in manager.states


def test_a_pod_gone_from_the_api_loses_its_containers_without_a_delete(env):
    manager, runtime, api = env
    apply(manager, api, make_pod("web"))
    gone = api.store.remove("pods", "web")
    manager.forget(gone)
    manager.sync("uid-web")
    assert wait_for(lambda: "uid-web" not in manager.states)
    assert not runtime.list({L.POD_NAME: "web"})
    assert api.requests("DELETE") == []


def test_multi_container_pods_share_one_network(env):
    manager, runtime, api = env
    pod = apply(manager, api, make_pod("duo", [{"name": "a", "image": "shepherd/busybox:1"},
                                                   {"name": "b", "image": "shepherd/busybox:1"}]))
    sandboxes = [c for c in runtime.created if L.is_sandbox(c.labels)]
    assert len(sandboxes) == 1
    sandbox = [c for c in runtime.list({L.POD_NAME: "duo"}) if L.is_sandbox(c.labels)][0]
    apps = [c for c in runtime.created if not L.is_sandbox(c.labels)]
    assert [c.network_mode for c in apps] == ["container:%s" % sandbox.id] * 2
    assert pod["status"]["podIP"] == runtime.inspect(sandbox.id).ip
    assert [c["name"] for c in pod["status"]["containerStatuses"]] == ["a", "b"]
    assert all(c["ready"] for c in pod["status"]["containerStatuses"])
    # one container restarting keeps the network (and the pod IP)
    runtime.exit(runtime.running_of("duo", "a")[0].id, 1)
    pod = resync(manager, api, "duo")
    assert pod["status"]["podIP"] == runtime.inspect(sandbox.id).ip
    assert cstatus(pod, 0)["restartCount"] == 1 and cstatus(pod, 1)["restartCount"] == 0


def test_a_changed_container_spec_replaces_the_container(env):
    manager, runtime, api = env
    apply(manager, api, make_pod("web"))
    pod = api.pod("web")
    pod["spec"]["containers"][0]["env"] = [{"name": "X", "value": "1"}]
    manager.observe(api.add(pod))
    manager.sync("uid-web")
    assert wait_for(lambda: not runtime.running_of("web"))
    time.sleep(0.05)
    pod = resync(manager, api, "web")
    assert cstatus(pod)["restartCount"] == 1 and "running" in cstatus(pod)["state"]
    assert runtime.created[-1].env == ["X=1"]


class FakeProbe:
    def __init__(self, result):
        self.result = result
        self.message = "probe says so"
        self.kind = "fake"

    def due(self, now):
        return False


def test_readiness_and_liveness_results_drive_ready_and_restarts(env):
    manager, runtime, api = env
    apply(manager, api, make_pod("web"))
    cs = manager.states["uid-web"].containers["main"]
    cs.readiness = FakeProbe(False)
    pod = resync(manager, api, "web")
    assert cstatus(pod)["ready"] is False
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert ready["Ready"] == "False" and ready["ContainersReady"] == "False"
    cs.readiness.result = True
    pod = resync(manager, api, "web")
    assert cstatus(pod)["ready"] is True
    cs.liveness = FakeProbe(False)
    manager.sync("uid-web")
    assert wait_for(lambda: not runtime.running_of("web"))
    time.sleep(0.05)
    pod = resync(manager, api, "web")
    c = cstatus(pod)
    assert c["restartCount"] == 1 and "running" in c["state"]
    assert c["lastState"]["terminated"]["message"].startswith("Container main failed liveness probe")


def test_status_writer_rereads_after_a_conflict_and_drops_a_replaced_pod(env):
    manager, runtime, api = env
    apply(manager, api, make_pod("web"))
    # someone else wrote the pod: the resourceVersion the agent holds is stale
    theirs = api.pod("web")
    theirs["status"]["phase"] = "Pending"
    api.add(theirs)
    runtime.exit(runtime.running_of("web")[0].id, 1)
    conflicts = len(api.requests("PATCH"))
    manager.sync("uid-web")
    flush(manager)
    assert api.pod("web")["status"]["containerStatuses"][0]["restartCount"] == 1
    assert len(api.requests("PATCH")) > conflicts
    # the pod was replaced by another one of the same name: nothing is written to it
    api.store.remove("pods", "web")
    replacement = api.add(make_pod("web", uid="uid-other"))
    runtime.exit(runtime.running_of("web")[0].id, 1)
    manager.sync("uid-web")
    flush(manager)
    # (its PATCH named the old pod's resourceVersion: refused with 409, then the re-read
    # found another uid and gave up)
    assert api.pod("web") == replacement


def test_a_container_whose_pod_the_api_still_has_is_adopted_not_removed(env):
    manager, runtime, api = env
    pod = make_pod("late", uid="uid-late")
    stored = api.add(pod)             # the API has it; this agent has not heard of it yet
    cid = runtime.create(P.container_config(stored, stored["spec"]["containers"][0], NODE, "10.1.2.3", 0))
    runtime.start(cid)
    manager.housekeeping()
    assert runtime.inspect(cid).running
    assert "uid-late" in manager.states
    manager.sync("uid-late")
    assert runtime.running_of("late")[0].id == cid and len(runtime.created) == 1


def test_a_list_older_than_what_the_agent_knows_does_not_remove_pods(env):
    manager, runtime, api = env
    pod = apply(manager, api, make_pod("web"))
    known = int(pod["metadata"]["resourceVersion"])
    manager.watch.replace_all([], known - 1)           # a replica behind: the pod is not in its list yet
    assert not manager.states["uid-web"].removed
    manager.watch.replace_all([], known)               # a list at or after what we know: it is gone
    assert manager.states["uid-web"].removed


def _deleting(api, name, grace, requested):
    """The pod as the API marks it on `DELETE` with this grace period, asked at `requested`."""
    return api.store.delete_gracefully(name, grace, timestamp=format_time(requested))


def test_sigkill_comes_when_the_grace_period_is_over(env):
    manager, runtime, api = env
    runtime.ignore_term = True
    apply(manager, api, make_pod("web"))
    started = time.monotonic()
    manager.observe(_deleting(api, "web", 1, time.time()))
    manager.sync("uid-web")
    manager.states["uid-web"].terminator.join(10)
    kinds = [s[1] for s in runtime.signals]
    assert kinds == [signal.SIGTERM, signal.SIGKILL]
    took = runtime.signals[1][2] - started
    assert 0.9 <= took <= 3.0, took


def test_a_deletion_asked_long_ago_kills_at_once(env):
    manager, runtime, api = env
    runtime.ignore_term = True
    apply(manager, api, make_pod("web"))
    started = time.monotonic()
    manager.observe(_deleting(api, "web", 30, time.time() - 100))    # the agent was down meanwhile
    manager.sync("uid-web")
    manager.states["uid-web"].terminator.join(10)
    assert [s[1] for s in runtime.signals] == [signal.SIGKILL]
    assert time.monotonic() - started < 1.5


def test_a_shorter_grace_period_applies_at_once(env):
    manager, runtime, api = env
    runtime.ignore_term = True
    apply(manager, api, make_pod("web"))
    manager.observe(_deleting(api, "web", 30, time.time()))
    manager.sync("uid-web")
    time.sleep(0.3)
    assert [s[1] for s in runtime.signals] == [signal.SIGTERM]
    started = time.monotonic()
    # delete again with --grace-period=1 (0 would delete the pod at once: the API's force)
    manager.observe(_deleting(api, "web", 1, time.time()))
    manager.states["uid-web"].terminator.join(10)
    assert [s[1] for s in runtime.signals] == [signal.SIGTERM, signal.SIGKILL]
    assert runtime.signals[1][2] - started < 1.5      # a second after the first request, not 30


def test_an_orphan_whose_pod_name_now_lives_on_another_node_is_removed(env):
    # The API answers 403 to a node's read of a pod bound elsewhere (the node authorizer):
    # that pod is not ours, so our container of the old pod of that name is an orphan.
    manager, runtime, api = env
    old = make_pod("reused", uid="uid-old")
    cid = runtime.create(P.container_config(old, old["spec"]["containers"][0], NODE, "10.1.2.3", 0))
    runtime.start(cid)
    elsewhere = make_pod("reused", uid="uid-new")
    elsewhere["spec"]["nodeName"] = "node-b"
    api.add(elsewhere)
    manager.housekeeping()
    assert any(r["path"].endswith("/pods/reused") for r in api.requests("GET"))     # asked, refused
    assert runtime.inspect(cid) is None
    assert api.pod("reused")["metadata"]["uid"] == "uid-new"     # the other node's pod is untouched
