"""The deployment controller against an in-memory store, driven synchronously:
changes are pumped by an Informer, keys reconciled with run_until_idle, time moved
by hand (a fake monotonic clock and a fake wall clock)."""
import copy
import re

import pytest

from shepherd_ha.controllers.deployment_util import (CHANGE_CAUSE_ANNOTATION, HASH_LABEL, REVISION_ANNOTATION,
                                                     template_hash)
from shepherd_ha.model.times import format_time
from shepherd_ha.controllers.deployments import DeploymentController, controllers
from shepherd_ha.controllers.events import EventRecorder
from shepherd_ha.controllers.informer import Informer
from shepherd_ha.controllers.replica_sets import ReplicaSetController
from shepherd_ha.controllers.settings import ControllerSettings
from shepherd_ha.controllers.store_access import MemoryStore
from shepherd_ha.model.defaults import apply_defaults
from shepherd_ha.model.validation import validate_object
from shepherd_ha.store.stamping import stamp_new

SAFE = "[bcdfghjklmnpqrstvwxz2456789]"
WALL0 = 1_800_000_000.0


class FakeClock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


class Env:
    """A MemoryStore, the controller, an informer, and helpers to act like users and agents."""

    def __init__(self, namespaces=("default",)):
        self.clock = FakeClock()
        self.wall = WALL0
        self.store = MemoryStore(clock=self.clock, namespaces=namespaces)
        self.recorder = EventRecorder(self.store, "test")
        self.ctl = DeploymentController(self.store, self.recorder, wall=lambda: self.wall)
        # Deployments own ReplicaSets, which own the pods: both controllers run, as on a leader.
        self.rs_ctl = ReplicaSetController(self.store, self.recorder, wall=lambda: self.wall)
        self.informer = Informer(self.store, [self.ctl, self.rs_ctl])
        self.informer.start_from_snapshot()
        self.checks = []             # callables run after every controller write
        self.write_many_calls = []   # sizes of the controller's write_many calls
        write_many = self.store.write_many

        def checked_write_many(writes):
            self.write_many_calls.append(len(writes))
            result = write_many(writes)
            for check in self.checks:
                check()
            return result
        self.store.write_many = checked_write_many

    # ---- driving ----

    def settle(self, rounds=100):
        for _ in range(rounds):
            pumped = self.informer.pump()
            done = self.ctl.run_until_idle()
            done += self.rs_ctl.run_until_idle()
            if not pumped and not done:
                return
        raise AssertionError("the controller did not settle in %d rounds" % rounds)

    def advance(self, seconds):
        self.clock.now += seconds
        self.wall += seconds
        self.settle()

    def apply(self, ops):
        result = self.store.apply({"type": "write", "key": None, "ops": ops})
        assert result["ok"], result
        return result["results"][0]["object"]

    # ---- users ----

    def create_deployment(self, name="web", replicas=3, strategy=None, namespace="default", annotations=None,
                          image="nginx:1.25", **spec):
        body = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": namespace},
                "spec": dict({"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                              "template": {"metadata": {"labels": {"app": name}},
                                           "spec": {"containers": [{"name": "main", "image": image}]}}}, **spec)}
        if annotations:
            body["metadata"]["annotations"] = annotations
        if strategy:
            body["spec"]["strategy"] = strategy
        obj = apply_defaults("deployments", body)
        assert validate_object("deployments", obj) == []
        return self.apply([{"op": "create", "resource": "deployments", "object": stamp_new(obj)}])

    def deployment(self, name="web", namespace="default"):
        return self.store.get("deployments", namespace, name)

    def update_deployment(self, change, name="web", namespace="default"):
        d = copy.deepcopy(self.deployment(name, namespace))
        change(d)
        d = apply_defaults("deployments", d)
        assert validate_object("deployments", d) == []
        return self.apply([{"op": "update", "resource": "deployments", "namespace": namespace, "name": name,
                            "object": d, "precondition": {"resourceVersion": d["metadata"]["resourceVersion"]}}])

    def set_image(self, image, name="web", cause=None):
        def change(d):
            d["spec"]["template"]["spec"]["containers"][0]["image"] = image
            if cause:
                d["metadata"].setdefault("annotations", {})[CHANGE_CAUSE_ANNOTATION] = cause
        return self.update_deployment(change, name)

    def scale(self, replicas, name="web"):
        return self.update_deployment(lambda d: d["spec"].update(replicas=replicas), name)

    # ---- agents / scheduler ----

    def pods(self, name="web", namespace="default", terminating=False):
        """Pods of the deployment's ReplicaSets; those being stopped by their agent
        (deletionTimestamp) only when asked."""
        uids = {rs["metadata"]["uid"] for rs in self.replica_sets(name, namespace)}
        return [p for p in self.store.list("pods", namespace)
                if any(r.get("uid") in uids and r.get("controller") and r.get("kind") == "ReplicaSet"
                       for r in p["metadata"].get("ownerReferences") or [])
                and (terminating or not p["metadata"].get("deletionTimestamp"))]

    def set_ready(self, pod, ready=True, at=None):
        status = dict(pod.get("status") or {}, phase="Running" if ready else "Pending",
                      conditions=[{"type": "Ready", "status": "True" if ready else "False",
                                   "lastTransitionTime": format_time(self.wall if at is None else at)}])
        meta = pod["metadata"]
        return self.apply([{"op": "update", "resource": "pods", "namespace": meta["namespace"], "name": meta["name"],
                            "subresource": "status", "object": dict(pod, status=status)}])

    def bind(self, pod, node="n1"):
        meta = pod["metadata"]
        return self.apply([{"op": "update", "resource": "pods", "namespace": meta["namespace"], "name": meta["name"],
                            "object": dict(pod, spec=dict(pod["spec"], nodeName=node))}])

    def set_phase(self, pod, phase):
        meta = pod["metadata"]
        return self.apply([{"op": "update", "resource": "pods", "namespace": meta["namespace"], "name": meta["name"],
                            "subresource": "status", "object": dict(pod, status={"phase": phase})}])

    def ready_all(self, name="web"):
        for pod in self.pods(name):
            if not is_ready(pod):
                self.set_ready(pod)
        self.settle()

    def events(self, reason=None):
        return [e for e in self.store.list("events", "default") if reason is None or e["reason"] == reason]

    def replica_sets(self, name="web", namespace="default"):
        """The deployment's ReplicaSets (controller reference), oldest revision first."""
        uid = self.deployment(name, namespace)["metadata"]["uid"]
        owned = [r for r in self.store.list("replicasets", namespace)
                 if any(ref.get("uid") == uid and ref.get("controller") and ref.get("kind") == "Deployment"
                        for ref in r["metadata"].get("ownerReferences") or [])]
        return sorted(owned, key=revision)

    revisions = replica_sets     # a deployment's revision history is its ReplicaSets


def revision(rs):
    return int(rs["metadata"]["annotations"][REVISION_ANNOTATION])


def template_of(rs):
    """A ReplicaSet's template as the deployment had it (without pod-template-hash), as
    `kubectl rollout undo` copies it back."""
    template = copy.deepcopy(rs["spec"]["template"])
    del template["metadata"]["labels"][HASH_LABEL]
    return template


def is_ready(pod):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def condition(d, type_):
    return next(c for c in d["status"]["conditions"] if c["type"] == type_)


def hashes(pods):
    return sorted(p["metadata"]["labels"][HASH_LABEL] for p in pods)


@pytest.fixture
def env():
    return Env()


# ---- creation, ownership, names ----

def test_creates_owned_named_labelled_pods(env):
    d = env.create_deployment(replicas=3)
    env.settle()
    pods = env.pods()
    h = template_hash(d["spec"]["template"])
    [rs] = env.replica_sets()
    assert rs["metadata"]["name"] == "web-" + h
    assert rs["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                                  "uid": d["metadata"]["uid"], "controller": True,
                                                  "blockOwnerDeletion": True}]
    assert rs["metadata"]["labels"] == {"app": "web", HASH_LABEL: h}
    assert rs["spec"]["selector"] == {"matchLabels": {"app": "web", HASH_LABEL: h}}
    assert rs["spec"]["replicas"] == 3 and validate_object("replicasets", rs) == []
    assert rs["status"]["replicas"] == 3 and rs["status"]["fullyLabeledReplicas"] == 3
    assert len(pods) == 3
    for pod in pods:
        meta = pod["metadata"]
        assert re.fullmatch("web-%s-%s{5}" % (h, SAFE), meta["name"]), meta["name"]
        assert meta["labels"] == {"app": "web", HASH_LABEL: h}
        assert meta["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-" + h,
                                            "uid": rs["metadata"]["uid"], "controller": True,
                                            "blockOwnerDeletion": True}]
        assert pod["spec"]["containers"][0]["image"] == "nginx:1.25" and "nodeName" not in pod["spec"]
        assert pod["status"]["phase"] == "Pending"
        assert validate_object("pods", pod) == []
    assert len({p["metadata"]["name"] for p in pods}) == 3
    d = env.deployment()
    assert d["metadata"]["annotations"][REVISION_ANNOTATION] == "1"
    template = copy.deepcopy(d["spec"]["template"])
    template["metadata"]["labels"][HASH_LABEL] = h
    assert revision(rs) == 1 and rs["spec"]["template"] == template
    [created, scaled] = env.events("ScalingReplicaSet")
    assert created["message"] == "Created new replica set web-" + h
    assert scaled["message"] == "Scaled up replica set web-%s from 0 to 3" % h
    assert scaled["involvedObject"]["kind"] == "Deployment" and scaled["involvedObject"]["name"] == "web"
    [event] = env.events("SuccessfulCreate")
    assert re.fullmatch(r"Created 3 pods: web-\S+, web-\S+, web-\S+", event["message"])
    assert event["involvedObject"]["kind"] == "ReplicaSet" and event["involvedObject"]["name"] == "web-" + h
    assert env.ctl.sentences[0] == ("deployment default/web: created replica set web-%s (revision 1); "
                                    "scaled up replica set web-%s from 0 to 3; status updated" % (h, h))
    assert env.rs_ctl.sentences[0].startswith("replicaset default/web-%s: created 3 pods (web-" % h)


def test_a_second_pass_changes_nothing(env):
    env.create_deployment(replicas=2)
    env.settle()
    revision = env.store.revision()
    env.ctl.resync()
    env.settle()
    assert env.store.revision() == revision, "a pass with nothing to do writes nothing"


def test_never_adopts_label_matching_strangers(env):
    d = env.create_deployment(replicas=2)
    stranger = env.apply([{"op": "create", "resource": "pods", "object": stamp_new(apply_defaults("pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stranger", "namespace": "default",
                                                         "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}))}])
    namesake = env.apply([{"op": "create", "resource": "pods", "object": stamp_new(apply_defaults("pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "namesake", "namespace": "default", "labels": {"app": "web"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                          "uid": "a-deleted-deployment", "controller": True}]},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}))}])
    env.settle()
    assert len(env.pods()) == 2, "strangers do not count towards replicas"
    env.scale(0)
    env.settle()
    assert env.pods() == []
    assert env.store.get("pods", "default", "stranger") == stranger
    assert env.store.get("pods", "default", "namesake") == namesake
    assert env.deployment()["status"]["replicas"] == 0
    assert d["metadata"]["uid"] != "a-deleted-deployment"


def test_a_deployment_created_again_adopts_its_orphaned_replica_set(env):
    """`kubectl delete deploy web --cascade=orphan`, then the same deployment again: it takes
    the ReplicaSet back (and its pods), as Kubernetes does, instead of doubling the pods."""
    env.create_deployment(replicas=2)
    env.settle()
    [rs] = env.replica_sets()
    pods = {p["metadata"]["uid"] for p in env.pods()}
    assert len(pods) == 2
    env.apply([{"op": "delete", "resource": "deployments", "namespace": "default", "name": "web",
                "propagationPolicy": "Orphan"}])
    env.settle()
    orphan = env.store.get("replicasets", "default", rs["metadata"]["name"])
    assert not orphan["metadata"].get("ownerReferences"), "the delete orphaned it"
    again = env.create_deployment(replicas=2)
    env.settle()
    [adopted] = env.replica_sets()
    assert adopted["metadata"]["uid"] == rs["metadata"]["uid"]
    assert adopted["metadata"]["ownerReferences"][0]["uid"] == again["metadata"]["uid"]
    assert {p["metadata"]["uid"] for p in env.pods()} == pods, "the same pods, none added"
    assert len(env.store.list("replicasets", "default")) == 1
    # another deployment's selector that does not match it leaves an orphan alone
    env.apply([{"op": "delete", "resource": "deployments", "namespace": "default", "name": "web",
                "propagationPolicy": "Orphan"}])
    env.settle()
    env.create_deployment(name="other", replicas=1)
    env.settle()
    assert not env.store.get("replicasets", "default", rs["metadata"]["name"])["metadata"].get("ownerReferences")
    # a new leader knows of no orphan until its first resync's scan finds it
    env.ctl._orphans_in.clear()
    env.ctl.resync()
    env.create_deployment(replicas=2)
    env.settle()
    assert env.store.get("replicasets", "default", rs["metadata"]["name"])["metadata"]["ownerReferences"]
    assert len(env.pods()) == 2
    # and a namespace left without orphans is not looked at again
    assert "default" not in env.ctl._orphans_in


def test_releases_a_pod_relabelled_out_of_the_selector_and_replaces_it(env):
    env.create_deployment(replicas=2)
    env.settle()
    pod = env.pods()[0]
    env.apply([{"op": "update", "resource": "pods", "namespace": "default", "name": pod["metadata"]["name"],
                "object": dict(pod, metadata=dict(pod["metadata"], labels={"app": "debug"}))}])
    env.settle()
    released = env.store.get("pods", "default", pod["metadata"]["name"])
    assert "ownerReferences" not in released["metadata"]
    assert len(env.pods()) == 2 and pod["metadata"]["name"] not in [p["metadata"]["name"] for p in env.pods()]
    assert env.events("ReleasedPods")


def test_finished_pods_are_replaced(env):
    env.create_deployment(replicas=2)
    env.settle()
    failed = env.pods()[0]
    env.set_phase(failed, "Failed")
    env.settle()
    assert env.store.get("pods", "default", failed["metadata"]["name"]) is None
    assert len(env.pods()) == 2


def test_deleted_pod_is_recreated(env):
    env.create_deployment(replicas=3)
    env.settle()
    victim = env.pods()[1]
    env.apply([{"op": "delete", "resource": "pods", "namespace": "default", "name": victim["metadata"]["name"]}])
    env.settle()
    assert len(env.pods()) == 3


def test_deleted_deployment_leaves_pods_to_the_garbage_collector(env):
    env.create_deployment(replicas=2)
    env.settle()
    env.apply([{"op": "delete", "resource": "deployments", "namespace": "default", "name": "web"}])
    env.settle()
    assert len(env.store.list("pods", "default")) == 2
    assert env.ctl.reconcile(("default", "web")) is None


def test_keys_for_maps_pods_to_their_owner():
    env = Env()
    env.create_deployment(replicas=1)
    env.settle()
    [pod] = env.pods()
    from shepherd_ha.store.fsm import Change
    assert env.ctl.keys_for(Change(1, "ADDED", "pods", pod, None)) == [("default", "web")]
    bare = dict(pod, metadata=dict(pod["metadata"], ownerReferences=[]))
    assert env.ctl.keys_for(Change(1, "MODIFIED", "pods", bare, pod)) == [("default", "web")]
    assert env.ctl.keys_for(Change(1, "ADDED", "pods", bare, None)) == []
    assert env.ctl.keys_for(Change(1, "DELETED", "pods", None, pod)) == [("default", "web")]
    bound = dict(pod, spec=dict(pod["spec"], nodeName="n1"),
                 status={"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]})
    assert env.ctl.keys_for(Change(1, "MODIFIED", "pods", bound, pod)) == [], "a binding changes nothing we count"
    ready = dict(bound, status={"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
    assert env.ctl.keys_for(Change(1, "MODIFIED", "pods", ready, bound)) == [("default", "web")]
    failed = dict(bound, status={"phase": "Failed"})
    assert env.ctl.keys_for(Change(1, "MODIFIED", "pods", failed, bound)) == [("default", "web")]


# ---- scaling ----

def test_scale_up_and_down(env):
    env.create_deployment(replicas=2)
    env.settle()
    env.scale(5)
    env.settle()
    assert len(env.pods()) == 5
    [rs] = env.replica_sets()
    assert env.events("ScalingReplicaSet")[-1]["message"] == "Scaled up replica set %s from 2 to 5" \
        % rs["metadata"]["name"]
    assert env.events("SuccessfulCreate")[-1]["message"].startswith("Created 3 pods: ")
    env.scale(1)
    env.settle()
    assert len(env.pods()) == 1
    assert env.events("ScalingReplicaSet")[-1]["message"] == "Scaled down replica set %s from 5 to 1" \
        % rs["metadata"]["name"]
    [down] = env.events("SuccessfulDelete")
    assert down["message"].startswith("Deleted 4 pods: ")
    assert env.replica_sets()[0]["status"]["replicas"] == 1
    assert env.deployment()["status"]["replicas"] == 1


def _backdate(env, pod, created):
    """Pods made in one pass share a creation second: give them distinct ages."""
    key = ("default", pod["metadata"]["name"])
    current = env.store.fsm.objects["pods"][key]
    env.store.fsm.objects["pods"][key] = dict(current, metadata=dict(current["metadata"],
                                                                      creationTimestamp=created))


def test_scale_down_prefers_unscheduled_then_not_ready_then_newest(env):
    env.create_deployment(replicas=6)
    env.settle()
    pods = sorted(env.pods(), key=lambda p: p["metadata"]["name"])
    for i, pod in enumerate(pods):
        _backdate(env, pod, "2026-01-01T00:00:%02dZ" % (10 + i))
    a, b, c, d, e, f = [env.store.get("pods", "default", p["metadata"]["name"]) for p in pods]
    for pod in (a, b, c, d):
        env.bind(pod)
    for pod in (a, b, d):
        env.set_ready(env.store.get("pods", "default", pod["metadata"]["name"]))
    env.settle()
    # a, b, d scheduled and ready (d newest of them); c scheduled, not ready; e, f unscheduled
    name = lambda p: p["metadata"]["name"]   # noqa: E731
    env.scale(3)
    env.settle()
    assert sorted(map(name, env.pods())) == sorted(map(name, (a, b, d))), "unscheduled, then not ready go first"
    # unscheduled pods are deleted outright; a pod on a node is handed to its agent to stop
    assert sorted(map(name, env.pods(terminating=True))) == sorted(map(name, (a, b, c, d)))
    env.scale(2)
    env.settle()
    assert sorted(map(name, env.pods())) == sorted(map(name, (a, b))), "then the newest"


def pod_passes(env):
    """Sizes of the write_many calls that created pods: the deployment controller's own
    (a ReplicaSet's scale and the status) and status-only ones take at most 2 writes."""
    return [n for n in env.write_many_calls if n > 2]


def test_one_write_many_creates_many_pods(env):
    env.create_deployment(replicas=1000)
    env.settle()
    assert len(env.pods()) == 1000
    assert pod_passes(env) == [1001], "1000 pod creations and the status in one write_many: one pass"


def test_creations_per_pass_are_capped_and_the_next_pass_follows(env):
    env.rs_ctl.max_creates_per_pass = 300
    env.create_deployment(replicas=1000)
    env.settle()
    assert len(env.pods()) == 1000
    assert pod_passes(env) == [301, 301, 301, 101]


def test_max_pods_per_entry_splits_big_passes():
    env = Env()
    env.rs_ctl.max_pods_per_entry = 400
    env.create_deployment(replicas=1000)
    env.settle()
    assert len(env.pods()) == 1000
    assert pod_passes(env) == [400, 400, 201]


# ---- rolling update ----

def _rolling_invariants(env, replicas, surge, unavailable, name="web"):
    def check():
        pods = env.pods(name)
        ready = sum(1 for p in pods if is_ready(p))
        assert len(pods) <= replicas + surge, "%d pods > replicas %d + maxSurge %d" % (len(pods), replicas, surge)
        assert ready >= replicas - unavailable, "%d ready < replicas %d - maxUnavailable %d" % (
            ready, replicas, unavailable)
    return check


@pytest.mark.parametrize("replicas,max_surge,max_unavailable,surge,unavailable", [
    (4, 1, 1, 1, 1),
    (3, 1, 0, 1, 0),
    (5, 0, 2, 0, 2),
    (10, "25%", "25%", 3, 2),
    (3, "50%", "34%", 2, 1),
    (1, "25%", "25%", 1, 0),
])
def test_rolling_update_step_by_step_stays_within_bounds(env, replicas, max_surge, max_unavailable, surge,
                                                         unavailable):
    env.create_deployment(replicas=replicas, strategy={"type": "RollingUpdate", "rollingUpdate": {
        "maxSurge": max_surge, "maxUnavailable": max_unavailable}})
    env.settle()
    env.ready_all()
    old_hash = template_hash(env.deployment()["spec"]["template"])
    env.checks.append(_rolling_invariants(env, replicas, surge, unavailable))
    env.set_image("nginx:1.26")
    new_hash = template_hash(env.deployment()["spec"]["template"])
    steps = 0
    for steps in range(1, 60):
        env.settle()
        _rolling_invariants(env, replicas, surge, unavailable)()
        pods = env.pods()
        if len(pods) == replicas and hashes(pods) == [new_hash] * replicas and all(map(is_ready, pods)):
            break
        waiting = [p for p in pods if not is_ready(p)]
        assert waiting, "rollout stuck with every pod ready: %s" % hashes(pods)
        env.set_ready(waiting[0])      # one pod at a time turns ready
    else:
        raise AssertionError("rollout did not finish")
    assert steps >= 2 and old_hash != new_hash
    d = env.deployment()
    assert d["metadata"]["annotations"][REVISION_ANNOTATION] == "2"
    st = d["status"]
    assert (st["replicas"], st["updatedReplicas"], st["readyReplicas"], st["availableReplicas"],
            st["unavailableReplicas"]) == (replicas, replicas, replicas, replicas, 0)
    assert st["observedGeneration"] == d["metadata"]["generation"] == 2
    assert condition(d, "Progressing")["reason"] == "NewPodsAvailable"
    assert condition(d, "Available")["status"] == "True"
    complete = env.events("RolloutComplete")
    assert [e["message"] for e in complete][-1] == \
        "Deployment web has successfully rolled out revision 2: %d pod%s available" % (
            replicas, "" if replicas == 1 else "s")


def test_rolling_update_waits_for_readiness(env):
    env.create_deployment(replicas=3, strategy={"type": "RollingUpdate",
                                                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    env.settle()
    env.ready_all()
    env.set_image("nginx:1.26")
    env.settle()
    pods = env.pods()
    assert len(pods) == 4 and sum(map(is_ready, pods)) == 3
    env.advance(60)     # time alone moves nothing
    assert len(env.pods()) == 4
    d = env.deployment()
    assert d["status"]["updatedReplicas"] == 1
    assert condition(d, "Progressing")["reason"] == "PodsUpdating"
    assert "1 of 3 pods updated" in condition(d, "Progressing")["message"]


def test_rolling_update_replaces_broken_old_pods_first(env):
    env.create_deployment(replicas=4, strategy={"type": "RollingUpdate",
                                                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}})
    env.settle()
    pods = env.pods()
    for pod in pods[:3]:
        env.set_ready(pod)
    broken = pods[3]["metadata"]["name"]
    env.settle()
    env.set_image("nginx:1.26")
    env.settle()
    names = [p["metadata"]["name"] for p in env.pods()]
    assert broken not in names, "the unready old pod goes before any ready one"


def test_scaling_during_a_rollout(env):
    env.create_deployment(replicas=4, strategy={"type": "RollingUpdate",
                                                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}})
    env.settle()
    env.ready_all()
    env.set_image("nginx:1.26")
    env.settle()
    env.scale(2)
    for _ in range(30):
        env.settle()
        pods = env.pods()
        if len(pods) == 2 and all(map(is_ready, pods)) and env.deployment()["status"]["updatedReplicas"] == 2:
            break
        for pod in pods:
            if not is_ready(pod):
                env.set_ready(pod)
    else:
        raise AssertionError("did not converge: %s" % hashes(env.pods()))
    assert condition(env.deployment(), "Progressing")["reason"] == "NewPodsAvailable"


# ---- recreate ----

def test_recreate_deletes_every_old_pod_before_creating_new_ones(env):
    env.create_deployment(replicas=3, strategy={"type": "Recreate"})
    env.settle()
    env.ready_all()
    old_hash = template_hash(env.deployment()["spec"]["template"])
    seen = []

    def check():
        hs = set(hashes(env.pods()))
        seen.append(hs)
        assert not (old_hash in hs and len(hs) > 1), "old and new pods at once: %s" % hs
    env.checks.append(check)
    env.set_image("nginx:1.26")
    env.settle()
    new_hash = template_hash(env.deployment()["spec"]["template"])
    assert hashes(env.pods()) == [new_hash] * 3
    assert set() in seen, "there was a moment with no pods"
    d = env.deployment()
    assert condition(d, "Available")["status"] == "False", "Recreate tolerates no unavailability"
    env.ready_all()
    assert condition(env.deployment(), "Available")["status"] == "True"


# ---- revisions, history, rollback ----

def test_rollback_reuses_the_old_template_as_a_new_revision(env):
    env.create_deployment(replicas=2, annotations={CHANGE_CAUSE_ANNOTATION: "first"})
    env.settle()
    env.ready_all()
    first_template = copy.deepcopy(env.deployment()["spec"]["template"])
    env.set_image("nginx:1.26", cause="bump")
    env.settle()
    env.ready_all()
    env.ready_all()
    assert [(revision(r), r["metadata"]["annotations"][CHANGE_CAUSE_ANNOTATION]) for r in env.revisions()] == \
        [(1, "first"), (2, "bump")]
    # what `sheepctl rollout undo` does: the old template (and its change cause) back in the spec
    env.update_deployment(lambda d: (d["spec"].update(template=first_template),
                                     d["metadata"]["annotations"].update({CHANGE_CAUSE_ANNOTATION: "first"})))
    for _ in range(10):
        env.ready_all()
    d = env.deployment()
    assert d["metadata"]["annotations"][REVISION_ANNOTATION] == "3"
    assert [revision(r) for r in env.revisions()] == [2, 3]
    assert template_of(env.revisions()[1]) == first_template
    assert hashes(env.pods()) == [template_hash(first_template)] * 2
    assert any("template of revision 1 is back as revision 3" in s for s in env.ctl.sentences)


def test_revision_history_limit(env):
    env.create_deployment(replicas=1, revisionHistoryLimit=2)
    env.settle()
    env.ready_all()
    for version in range(26, 30):
        env.set_image("nginx:1.%d" % version)
        for _ in range(5):
            env.ready_all()
    revs = env.revisions()
    assert [revision(r) for r in revs] == [3, 4, 5], "current plus 2 old"
    assert any("removed revision 1 from history" in s for s in env.ctl.sentences)


def test_history_keeps_revisions_that_still_have_pods(env):
    env.create_deployment(replicas=2, revisionHistoryLimit=0,
                          strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    env.settle()
    env.ready_all()
    env.set_image("nginx:1.26")
    env.settle()
    assert [revision(r) for r in env.revisions()] == [1, 2], "revision 1 still has pods"
    for _ in range(5):
        env.ready_all()
    assert [revision(r) for r in env.revisions()] == [2]


def test_change_cause_follows_the_deployment(env):
    env.create_deployment(replicas=1)
    env.settle()
    env.update_deployment(lambda d: d["metadata"].setdefault("annotations", {}).update(
        {CHANGE_CAUSE_ANNOTATION: "noted later"}))
    env.settle()
    assert env.revisions()[0]["metadata"]["annotations"][CHANGE_CAUSE_ANNOTATION] == "noted later"


def test_revision_name_taken_by_a_stranger(env):
    d = env.create_deployment(replicas=1)
    h = template_hash(d["spec"]["template"])
    stranger = env.apply([{"op": "create", "resource": "replicasets", "object": stamp_new({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-" + h, "namespace": "default",
                     "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": "old", "controller": True}]},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "other"}},
                 "template": {"metadata": {"labels": {"app": "other"}},
                              "spec": {"containers": [{"name": "c", "image": "x"}]}}}})}])
    env.settle()
    [rev] = env.revisions()
    assert revision(rev) == 1 and rev["metadata"]["name"].startswith("web-%s-" % h)
    assert len(env.pods()) == 1
    assert env.store.get("replicasets", "default", "web-" + h)["spec"] == stranger["spec"], "left alone"


# ---- status and conditions ----

def test_status_counts_and_conditions(env):
    env.create_deployment(replicas=3, strategy={"type": "RollingUpdate",
                                                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}})
    env.settle()
    d = env.deployment()
    st = d["status"]
    assert (st["replicas"], st["updatedReplicas"], st["readyReplicas"], st["availableReplicas"],
            st["unavailableReplicas"], st["observedGeneration"]) == (3, 3, 0, 0, 3, 1)
    assert condition(d, "Available")["status"] == "False"
    assert condition(d, "Progressing")["status"] == "True"
    assert condition(d, "Progressing")["reason"] == "PodsUpdating"
    pods = env.pods()
    env.set_ready(pods[0])
    env.set_ready(pods[1])
    env.settle()
    d = env.deployment()
    assert d["status"]["readyReplicas"] == 2
    assert condition(d, "Available")["status"] == "True", "2 >= 3 - maxUnavailable 1"
    assert condition(d, "Available")["reason"] == "MinimumReplicasAvailable"
    env.set_ready(pods[2])
    env.settle()
    d = env.deployment()
    assert condition(d, "Progressing")["reason"] == "NewPodsAvailable"
    assert d["status"]["unavailableReplicas"] == 0
    # nothing changes -> nothing written
    revision = env.store.revision()
    env.ctl.resync()
    env.settle()
    assert env.store.revision() == revision
    # a pod failing after the rollout is not a rollout: Available tells, Progressing stays
    env.set_ready(env.store.get("pods", "default", pods[0]["metadata"]["name"]), ready=False)
    env.set_ready(env.store.get("pods", "default", pods[1]["metadata"]["name"]), ready=False)
    env.settle()
    d = env.deployment()
    assert condition(d, "Available")["status"] == "False"
    assert condition(d, "Progressing")["reason"] == "NewPodsAvailable"
    assert d["status"]["readyReplicas"] == 1


def test_min_ready_seconds(env):
    env.create_deployment(replicas=2, minReadySeconds=10)
    env.settle()
    for pod in env.pods():
        env.set_ready(pod)
    env.settle()
    d = env.deployment()
    assert d["status"]["readyReplicas"] == 2 and d["status"]["availableReplicas"] == 0
    env.advance(5)
    assert env.deployment()["status"]["availableReplicas"] == 0
    env.advance(5.1)     # the controller re-queued itself for when they become available
    d = env.deployment()
    assert d["status"]["availableReplicas"] == 2
    assert condition(d, "Progressing")["reason"] == "NewPodsAvailable"


def test_progress_deadline_exceeded_and_recovery(env):
    env.create_deployment(replicas=2, progressDeadlineSeconds=30)
    env.settle()
    env.advance(20)
    assert condition(env.deployment(), "Progressing")["reason"] == "PodsUpdating"
    env.advance(11)      # no pod got ready in 30 s
    d = env.deployment()
    cond = condition(d, "Progressing")
    assert (cond["status"], cond["reason"]) == ("False", "ProgressDeadlineExceeded")
    assert 'Deployment "web" has timed out progressing' in cond["message"]
    [warning] = env.events("ProgressDeadlineExceeded")
    assert warning["type"] == "Warning"
    # a new leader (fresh controller, same store) keeps the verdict until progress happens
    fresh = Env.__new__(Env)
    fresh.__dict__.update(env.__dict__)
    fresh.ctl = DeploymentController(env.store, env.recorder, wall=lambda: env.wall)
    fresh.informer = Informer(env.store, [fresh.ctl])
    fresh.informer.start_from_snapshot()
    fresh.settle()
    assert condition(fresh.deployment(), "Progressing")["reason"] == "ProgressDeadlineExceeded"
    fresh.set_ready(fresh.pods()[0])
    fresh.settle()
    assert condition(fresh.deployment(), "Progressing")["reason"] == "PodsUpdating"
    fresh.set_ready(fresh.pods()[1])
    fresh.settle()
    assert condition(fresh.deployment(), "Progressing")["reason"] == "NewPodsAvailable"
    assert fresh.events("RolloutComplete")


def test_paused_deployment_scales_but_does_not_roll(env):
    env.create_deployment(replicas=2)
    env.settle()
    env.ready_all()
    old_hash = template_hash(env.deployment()["spec"]["template"])
    env.update_deployment(lambda d: d["spec"].update(paused=True))
    env.set_image("nginx:1.26")
    env.scale(3)
    env.settle()
    assert hashes(env.pods()) == [old_hash] * 3
    assert {p["spec"]["containers"][0]["image"] for p in env.pods()} == {"nginx:1.25"}, "the revision's template"
    d = env.deployment()
    assert condition(d, "Progressing")["reason"] == "DeploymentPaused"
    assert d["status"]["updatedReplicas"] == 0
    assert len(env.revisions()) == 1
    env.update_deployment(lambda d: d["spec"].update(paused=False))
    for _ in range(10):
        env.ready_all()
    new_hash = template_hash(env.deployment()["spec"]["template"])
    assert hashes(env.pods()) == [new_hash] * 3


def test_deployments_in_other_namespaces_are_independent():
    env = Env(namespaces=("default", "team"))
    env.create_deployment(replicas=2)
    env.create_deployment(replicas=1, namespace="team")
    env.settle()
    assert len(env.pods()) == 2 and len(env.pods(namespace="team")) == 1


def test_module_entry_point():
    store = MemoryStore()
    [ctl] = controllers(store, EventRecorder(store, "t"), ControllerSettings(resync_period=12.0))
    assert isinstance(ctl, DeploymentController) and ctl.resync_period == 12.0
    assert ctl.watches == ("deployments", "replicasets", "pods", "controllerrevisions")


def test_fenced_controller_writes_nothing(env):
    env.store.apply({"type": "claim", "term": 5, "replica": "other"})
    env.create_deployment(replicas=3)
    env.settle()
    assert env.store.list("pods", "default") == []
    assert env.store.fsm.fenced_rejections >= 1


def test_pod_names_never_clash_with_pods_in_use(env, monkeypatch):
    import shepherd_ha.controllers.replica_sets as module
    d = env.create_deployment(replicas=3)
    h = template_hash(d["spec"]["template"])
    env.apply([{"op": "create", "resource": "pods", "object": stamp_new(apply_defaults("pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-%s-bbbbb" % h, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}))}])
    suffixes = iter(["bbbbb", "ccccc", "ccccc", "ddddd", "ccccc", "fffff"])
    monkeypatch.setattr(module, "random_suffix", lambda: next(suffixes))
    env.settle()
    assert sorted(p["metadata"]["name"][-5:] for p in env.pods()) == ["ccccc", "ddddd", "fffff"]
    assert pod_passes(env) == [4], "no create failed: one pass of 3 creations and the status"


def test_a_recreated_namesake_starts_afresh(env):
    first = env.create_deployment(replicas=2)
    env.settle()
    env.ready_all()
    assert condition(env.deployment(), "Progressing")["reason"] == "NewPodsAvailable"
    old_pods = {p["metadata"]["name"] for p in env.pods()}
    env.apply([{"op": "delete", "resource": "deployments", "namespace": "default", "name": "web"}])
    second = env.create_deployment(replicas=2)     # same name, same template, before any garbage collection
    env.settle()
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    pods = env.pods()
    assert len(pods) == 2 and not ({p["metadata"]["name"] for p in pods} & old_pods), "the old pods are not adopted"
    d = env.deployment()
    assert condition(d, "Progressing")["reason"] == "PodsUpdating", "not the old deployment's rollout"
    [rev] = env.revisions()
    assert revision(rev) == 1 and d["metadata"]["annotations"][REVISION_ANNOTATION] == "1"


def test_a_deployment_created_paused_waits_for_resume(env):
    env.create_deployment(replicas=2, paused=True)
    env.settle()
    assert env.pods() == [] and env.revisions() == []
    assert condition(env.deployment(), "Progressing")["reason"] == "DeploymentPaused"
    env.update_deployment(lambda d: d["spec"].update(paused=False))
    env.settle()
    assert len(env.pods()) == 2 and [revision(r) for r in env.revisions()] == [1]


def test_a_replica_set_whose_create_conflicted_is_not_announced():
    """The template changes between the controller's read and its write: the write (new
    ReplicaSet + revision annotation, preconditioned) is refused whole, and no Event says a
    ReplicaSet was created that never existed (the CI race of test_kubectl_rollout)."""
    env = Env()
    write = env.store.write
    raced = []

    def racing_write(ops, key=None):
        if not raced and any(op.get("op") == "create" and op.get("resource") == "replicasets" for op in ops):
            raced.append(env.set_image("nginx:1.26"))      # lands first: the preconditions go stale
        return write(ops, key=key)
    env.store.write = racing_write
    env.create_deployment()
    env.settle()
    assert raced, "the race was not staged"
    names = {rs["metadata"]["name"] for rs in env.replica_sets()}
    announced = [e["message"] for e in env.events("ScalingReplicaSet") if e["message"].startswith("Created new")]
    assert len(names) == 1 and announced == ["Created new replica set %s" % n for n in names]
    assert template_of(env.replica_sets()[0])["spec"]["containers"][0]["image"] == "nginx:1.26"
