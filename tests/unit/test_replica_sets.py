"""The ReplicaSet controller, and the migration of older servers' history (ControllerRevisions,
pods owned by the deployment) to ReplicaSets, against the in-memory store."""
import copy

import jsonpatch

from shepherd_ha.controllers.deployment_util import HASH_LABEL, REVISION_ANNOTATION, template_hash
from shepherd_ha.model.times import format_time
from shepherd_ha.controllers.deployments import DeploymentController
from shepherd_ha.controllers.events import EventRecorder
from shepherd_ha.controllers.garbage_collector import GarbageCollector
from shepherd_ha.controllers.replica_sets import ReplicaSetController
from shepherd_ha.model.defaults import apply_defaults
from shepherd_ha.store.raft_node import Unavailable

from controller_kit import ControllerHarness, create, delete, plant, write

TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}


def rs_harness():
    return ControllerHarness(lambda store: [ReplicaSetController(store, EventRecorder(store, "test"))])


def make_rs(h, replicas=3, name="web-abc"):
    return create(h.store, "replicasets", {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE}})


def owned(h, rs):
    uid = rs["metadata"]["uid"]
    return [p for p in h.store.list("pods", "default") if not p["metadata"].get("deletionTimestamp")
            and any(r.get("uid") == uid and r.get("controller") for r in p["metadata"].get("ownerReferences") or [])]


def set_ready(store, pod):
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                                                  "lastTransitionTime": format_time(0)}]}
    write(store, {"op": "update", "resource": "pods", "namespace": "default", "name": pod["metadata"]["name"],
                  "subresource": "status", "object": dict(pod, status=status)})


def scale(h, name, replicas):
    rs = h.store.get("replicasets", "default", name)
    write(h.store, {"op": "update", "resource": "replicasets", "namespace": "default", "name": name,
                    "object": dict(rs, spec=dict(rs["spec"], replicas=replicas))})


def test_with_settings_a_burst_of_pod_changes_is_one_pass_after_the_batch_period():
    from shepherd_ha.controllers.settings import ControllerSettings
    h = ControllerHarness(lambda store: [ReplicaSetController(store, EventRecorder(store, "test"),
                                                              ControllerSettings(pod_batch_period=0.5))])
    rs = make_rs(h, 3)
    h.settle()                          # the ReplicaSet's own change: at once
    pods = owned(h, rs)
    assert len(pods) == 3
    passes = len(h.controller.sentences)
    for pod in pods:
        set_ready(h.store, pod)
    h.settle()
    assert h.store.get("replicasets", "default", "web-abc")["status"].get("readyReplicas", 0) == 0, \
        "pod changes wait for the batch period"
    h.advance(0.5)
    assert h.store.get("replicasets", "default", "web-abc")["status"]["readyReplicas"] == 3
    assert len(h.controller.sentences) == passes + 1, "three pods made ready, one pass"
    delete(h.store, "pods", pods[0]["metadata"]["name"])
    h.settle()
    assert len(owned(h, rs)) == 2
    h.advance(0.5)
    assert len(owned(h, rs)) == 3, "the deleted pod is replaced after the batch period"


def test_keeps_the_count_and_reports_status():
    h = rs_harness()
    rs = make_rs(h, 3)
    h.settle()
    pods = owned(h, rs)
    assert len(pods) == 3
    for pod in pods:
        assert pod["metadata"]["name"].startswith("web-abc-") and len(pod["metadata"]["name"]) == len("web-abc-") + 5
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    set_ready(h.store, pods[0])
    set_ready(h.store, pods[1])
    h.settle()
    status = h.store.get("replicasets", "default", "web-abc")["status"]
    assert status == {"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 2, "availableReplicas": 2,
                      "observedGeneration": 1}
    scale(h, "web-abc", 1)
    h.settle()
    survivors = owned(h, rs)
    assert len(survivors) == 1 and survivors[0]["metadata"]["name"] in {p["metadata"]["name"] for p in pods[:2]}, \
        "not-ready pods go first"
    assert h.store.get("replicasets", "default", "web-abc")["status"]["replicas"] == 1
    write(h.store, {"op": "delete", "resource": "pods", "namespace": "default",
                    "name": survivors[0]["metadata"]["name"], "force": True})
    h.settle()
    assert len(owned(h, rs)) == 1, "a deleted pod is replaced"


def test_owns_by_reference_only():
    h = rs_harness()
    stranger = plant(h.store, "pods", apply_defaults("pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stranger", "namespace": "default",
                                                         "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}))
    rs = make_rs(h, 2)
    h.settle()
    assert len(owned(h, rs)) == 2, "a label-matching stranger is not adopted"
    assert h.store.get("pods", "default", "stranger") == stranger
    pod = owned(h, rs)[0]
    write(h.store, {"op": "update", "resource": "pods", "namespace": "default", "name": pod["metadata"]["name"],
                    "object": dict(pod, metadata=dict(pod["metadata"], labels={"app": "debug"}))})
    h.settle()
    assert "ownerReferences" not in h.store.get("pods", "default", pod["metadata"]["name"])["metadata"], "released"
    assert len(owned(h, rs)) == 2


def deployment_harness():
    return ControllerHarness(lambda store: [DeploymentController(store, EventRecorder(store, "test")),
                                            ReplicaSetController(store, EventRecorder(store, "test")),
                                            GarbageCollector(store, EventRecorder(store, "test"))])


def make_deployment(h, replicas=3, image="nginx:1.25"):
    template = copy.deepcopy(TEMPLATE)
    template["spec"]["containers"][0]["image"] = image
    return create(h.store, "deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "template": template}})


def replica_sets(h):
    return sorted(h.store.list("replicasets", "default"),
                  key=lambda r: int(r["metadata"]["annotations"][REVISION_ANNOTATION]))


def test_migrates_controller_revisions_and_adopts_pods_without_restarting_them():
    """What an older server left: revisions 1 and 2, pods owned by the deployment directly
    (two of revision 2, one of revision 1, mid-rollout)."""
    h = deployment_harness()
    d = make_deployment(h, replicas=3, image="nginx:1.26")
    old_template = apply_defaults("deployments", {"spec": {"template": TEMPLATE}})["spec"]["template"]
    new_template = d["spec"]["template"]
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": d["metadata"]["uid"],
           "controller": True, "blockOwnerDeletion": True}
    hashes = {1: template_hash(old_template), 2: template_hash(new_template)}
    for number, template in ((1, old_template), (2, new_template)):
        plant(h.store, "controllerrevisions", {
            "apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": "web-" + hashes[number], "namespace": "default", "ownerReferences": [ref],
                         "labels": {"app": "web", HASH_LABEL: hashes[number]},
                         "annotations": {"kubernetes.io/change-cause": "rev %d" % number}},
            "revision": number, "data": {"template": template}})
    pods = []
    for name, number in (("web-a", 2), ("web-b", 2), ("web-c", 1)):
        pod = plant(h.store, "pods", apply_defaults("pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "ownerReferences": [ref],
                         "labels": {"app": "web", HASH_LABEL: hashes[number]}},
            "spec": dict(copy.deepcopy((old_template if number == 1 else new_template)["spec"]), nodeName="n1")}))
        set_ready(h.store, pod)
        pods.append(pod)
    write(h.store, {"op": "update", "resource": "deployments", "namespace": "default", "name": "web",
                    "object": dict(d, metadata=dict(d["metadata"], annotations={REVISION_ANNOTATION: "2"}))})
    uids_before = {p["metadata"]["uid"] for p in pods}
    h.controller.resync()
    h.settle()
    assert {p["metadata"]["uid"] for p in h.store.list("pods", "default")} >= uids_before, "no pod deleted yet"
    for pod in h.store.list("pods", "default"):
        if pod["metadata"]["uid"] not in uids_before:
            set_ready(h.store, pod)      # the rollout's new pod: only then may the old one go
    h.settle()
    assert h.store.list("controllerrevisions", "default") == [], "the old history is gone"
    first, second = replica_sets(h)
    assert [first["metadata"]["name"], second["metadata"]["name"]] == ["web-" + hashes[1], "web-" + hashes[2]]
    assert first["metadata"]["annotations"]["kubernetes.io/change-cause"] == "rev 1"
    assert (first["spec"]["replicas"], second["spec"]["replicas"]) == (0, 3), "the rollout went on through them"
    live = {p["metadata"]["name"]: p for p in h.store.list("pods", "default") if not p["metadata"].get("deletionTimestamp")}
    assert {"web-a", "web-b"} <= set(live), "adopted, not restarted"
    for name in ("web-a", "web-b"):
        assert live[name]["metadata"]["uid"] in uids_before
        assert live[name]["metadata"]["ownerReferences"] == [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": second["metadata"]["name"],
            "uid": second["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    assert len(live) == 3 and "web-c" not in live, "the old revision's pod was replaced by the rollout"
    assert any("migrated: revision 1 is replica set" in s for s in h.controller.sentences)


def test_kubectl_style_rollback_through_the_replica_sets_template_and_cascade_delete():
    h = deployment_harness()
    make_deployment(h, replicas=2)
    h.settle()
    d = h.store.get("deployments", "default", "web")
    changed = copy.deepcopy(d)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.26"
    write(h.store, {"op": "update", "resource": "deployments", "namespace": "default", "name": "web", "object": changed})
    for _ in range(6):
        for pod in h.store.list("pods", "default"):
            if not pod.get("status", {}).get("conditions"):
                set_ready(h.store, pod)
        h.settle()
    first, second = replica_sets(h)
    assert (first["spec"]["replicas"], second["spec"]["replicas"]) == (0, 2)
    # kubectl rollout undo: a JSON patch of the template of revision 1's ReplicaSet, hash label removed
    template = copy.deepcopy(first["spec"]["template"])
    del template["metadata"]["labels"][HASH_LABEL]
    template["metadata"]["creationTimestamp"] = None          # what Go structs add on the way
    template["spec"]["containers"][0]["resources"] = {}
    d = h.store.get("deployments", "default", "web")
    undone = jsonpatch.apply_patch(d, [{"op": "replace", "path": "/spec/template", "value": template}])
    write(h.store, {"op": "update", "resource": "deployments", "namespace": "default", "name": "web", "object": undone})
    for _ in range(6):
        for pod in h.store.list("pods", "default"):
            if not pod.get("status", {}).get("conditions"):
                set_ready(h.store, pod)
        h.settle()
    rsets = replica_sets(h)
    assert [r["metadata"]["name"] for r in rsets] == [second["metadata"]["name"], first["metadata"]["name"]], \
        "the old ReplicaSet is reused as revision 3, no new one"
    assert [r["metadata"]["annotations"][REVISION_ANNOTATION] for r in rsets] == ["2", "3"]
    assert h.store.get("deployments", "default", "web")["metadata"]["annotations"][REVISION_ANNOTATION] == "3"
    assert [r["spec"]["replicas"] for r in rsets] == [0, 2]
    delete(h.store, "deployments", "web")
    h.settle()
    assert h.store.list("replicasets", "default") == [], "the garbage collector follows the references"
    assert [p for p in h.store.list("pods", "default") if not p["metadata"].get("deletionTimestamp")] == []


class _LateBatch:
    """The first batch of writes ends with an unknown outcome (the store timed out) and
    applies later, when `land()` is called: a creation landing after its retry read."""

    def __init__(self, store):
        self.store, self.real, self.held = store, store._submit_many, None
        store._submit_many = self._submit_many

    def _submit_many(self, batch, timeout):
        if self.held is None:
            self.held = list(batch)
            raise Unavailable("no write of the batch confirmed for 2.0s (no quorum?); some may still apply",
                              "unknown")
        return self.real(batch, timeout)

    def land(self):
        return self.real(self.held, 2.0)

    def names(self):
        return {op["object"]["metadata"]["name"] for command in self.held for op in command["ops"]
                if op.get("op") == "create"}


def assert_one_pod_per_name(h, rs, late):
    """The ReplicaSet's pods are the late batch's, and it never had one too many to delete."""
    assert {p["metadata"]["name"] for p in owned(h, rs)} == late.names()
    assert not any("deleted" in s for s in h.controller.sentences), list(h.controller.sentences)


def test_a_creation_of_unknown_outcome_is_retried_under_its_own_names_so_one_landing_late_is_not_a_second_pod():
    h = rs_harness()
    late = _LateBatch(h.store)
    rs = make_rs(h, 5)
    h.settle()
    assert owned(h, rs) == [] and len(late.names()) == 5        # the first pass's outcome: unknown
    h.advance(5.0)                   # its retry, after the backoff: the same names
    assert {p["metadata"]["name"] for p in owned(h, rs)} == late.names()
    results = late.land()            # the first batch lands after all: those pods exist already
    assert [r.get("reason") for r in results[:5]] == ["AlreadyExists"] * 5, results
    h.advance(60.0)
    assert_one_pod_per_name(h, rs, late)


def test_a_retried_creation_that_finds_the_late_one_landed_first_counts_it_as_created():
    h = rs_harness()
    late = _LateBatch(h.store)
    rs = make_rs(h, 4)
    h.settle()
    real = late.real

    def land_first(batch, timeout):      # the late batch lands between the retry's read and its write
        real(late.held, timeout)
        return real(batch, timeout)
    late.real = land_first
    h.advance(5.0)
    assert {p["metadata"]["name"] for p in owned(h, rs)} == late.names()
    assert any(s.startswith("replicaset default/web-abc: created 4 pods") for s in h.controller.sentences), \
        list(h.controller.sentences)
    assert h.controller.unsettled == {}
    assert h.controller.queue.get(0) is None        # nothing left to retry


def test_a_creation_of_unknown_outcome_landing_after_the_retry_read_the_pods_is_still_one_pod():
    h = rs_harness()
    late = _LateBatch(h.store)
    rs = make_rs(h, 3)
    h.settle()
    read = h.controller.owned

    def read_then_land(*args, **kwargs):         # the late batch lands just after the retry's read
        found = read(*args, **kwargs)
        if not owned(h, rs):
            late.land()
        return found
    h.controller.owned = read_then_land
    h.advance(5.0)
    h.advance(60.0)
    assert_one_pod_per_name(h, rs, late)


def test_names_of_unknown_outcome_are_not_reused_by_a_new_replica_set_of_the_same_name():
    h = rs_harness()
    late = _LateBatch(h.store)
    make_rs(h, 3)
    h.settle()
    delete(h.store, "replicasets", "web-abc")
    again = make_rs(h, 3)            # recreated before its key is reconciled: another uid
    late.land()                      # the old one's pods land (the garbage collector's to delete)
    h.controller.sentences.clear()
    h.advance(5.0)
    assert len(owned(h, again)) == 3 and not {p["metadata"]["name"] for p in owned(h, again)} & late.names()
    # Its first pass created 3 pods of its own (not "created" the old one's: AlreadyExists).
    assert len(h.controller.sentences) == 1 and "created 3 pods" in h.controller.sentences[0], \
        list(h.controller.sentences)
    assert not any(name in h.controller.sentences[0] for name in late.names())
