"""Namespace controller: a Terminating namespace is emptied as single deletes would empty
it, reports what is left, and goes once nothing is; against an in-memory store, with the
Deployment and ReplicaSet controllers beside it (they must not re-create what it deletes)."""
from controller_kit import ControllerHarness, FakeClock, create, write

from shepherd_ha.controllers import deployments, garbage_collector, namespaces, replica_sets
from shepherd_ha.controllers.events import EventRecorder
from shepherd_ha.controllers.namespaces import CONTENT_BATCH, LOOK_AGAIN
from shepherd_ha.controllers.settings import ControllerSettings
from shepherd_ha.controllers.store_access import MemoryStore
from shepherd_ha.store import commands
from shepherd_ha.store.deletion import delete_op


def pod(name, node=None, namespace="team"):
    spec = {"containers": [{"name": "main", "image": "busybox"}], "terminationGracePeriodSeconds": 30}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def configmap(name, finalizers=None):
    meta = {"name": name, "namespace": "team"}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {}}


def deployment(name, replicas=3):
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "team"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}}


class Harness(ControllerHarness):
    def __init__(self, namespaces_=("default", "team"), store=None, clock=None, extra=None):
        settings = ControllerSettings()

        def build(store):
            recorder = EventRecorder(store, "test")
            return (namespaces.controllers(store, recorder, settings) + deployments.controllers(store, recorder, settings)
                    + replica_sets.controllers(store, recorder, settings)
                    + (extra(store, recorder, settings) if extra else []))
        super().__init__(build, store=store, clock=clock, namespaces=namespaces_)

    def in_team(self, resource):
        return sorted(o["metadata"]["name"] for o in self.store.list(resource, "team"))

    def namespace(self, name="team"):
        return self.store.get("namespaces", None, name)

    def conditions(self):
        return {c["type"]: c for c in self.namespace()["status"].get("conditions", [])}

    def gather(self):
        """Changes in a Terminating namespace wake its key after a second (CONTENT_BATCH)."""
        self.settle()
        self.advance(CONTENT_BATCH + 0.1)

    def delete_namespace(self, name="team"):
        write(self.store, delete_op("namespaces", None, name))
        self.settle()


def test_a_terminating_namespace_is_emptied_then_deleted():
    h = Harness()
    create(h.store, "deployments", deployment("web"))
    create(h.store, "pods", pod("on-node", node="n1"))
    create(h.store, "pods", pod("unbound"))
    create(h.store, "configmaps", configmap("plain"))
    create(h.store, "configmaps", configmap("held", ["example.com/hold"]))
    keep = create(h.store, "pods", pod("elsewhere", node="n1", namespace="default"))
    h.settle()
    assert len(h.in_team("pods")) == 5, "the Deployment's three pods and the two bare ones"

    h.delete_namespace()
    assert h.namespace()["status"]["phase"] == "Terminating"
    # What goes at once went; the pod on a node waits for its agent, the ConfigMap for its finalizer.
    assert h.in_team("deployments") == [] and h.in_team("replicasets") == []
    assert h.in_team("pods") == ["on-node"]
    assert h.store.get("pods", "team", "on-node")["metadata"]["deletionGracePeriodSeconds"] == 30
    assert h.in_team("configmaps") == ["held"]
    cond = h.conditions()
    assert cond["NamespaceContentRemaining"]["status"] == "True"
    assert cond["NamespaceContentRemaining"]["message"] == (
        "Some resources are remaining: configmaps has 1 resource instances, pods has 1 resource instances")
    assert cond["NamespaceFinalizersRemaining"]["message"] == (
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances")
    assert cond["NamespaceDeletionContentFailure"]["status"] == "False"
    assert h.store.get("pods", "default", "elsewhere")["metadata"]["uid"] == keep["metadata"]["uid"]

    # Nothing new gets in meanwhile (the ReplicaSet controller would have tried).
    refused = h.store.apply(commands.write([commands.create("pods", pod("late"))]))
    assert refused["code"] == 403 and refused["details"]["causes"][0]["reason"] == "NamespaceTerminating"

    # The agent finishes its pod; the finalizer's owner lets go: the namespace goes.
    write(h.store, commands.delete("pods", "team", "on-node"))
    h.gather()
    assert h.namespace() is not None
    held = h.store.get("configmaps", "team", "held")
    write(h.store, commands.update("configmaps", "team", "held",
                                   dict(held, metadata=dict(held["metadata"], finalizers=[]))))
    h.gather()
    assert h.namespace() is None
    assert any("namespace team: empty, deleted" in s for s in h.controller.sentences)
    assert h.store.get("pods", "default", "elsewhere") is not None


def test_status_conditions_are_written_only_when_they_change():
    h = Harness()
    create(h.store, "pods", pod("on-node", node="n1"))
    h.delete_namespace()
    revision = h.namespace()["metadata"]["resourceVersion"]
    looks, look = [], h.controller.reconcile
    h.controller.reconcile = lambda key: looks.append(key) or look(key)
    h.advance(LOOK_AGAIN + 1)       # the controller looks again: nothing changed, nothing written
    assert looks == ["team"]
    assert h.namespace()["metadata"]["resourceVersion"] == revision


def test_an_empty_namespace_goes_at_once():
    h = Harness()
    h.delete_namespace()
    assert h.namespace() is None


def test_someone_elses_metadata_finalizer_holds_the_emptied_namespace():
    h = Harness()
    ns = h.namespace()
    write(h.store, commands.update("namespaces", None, "team",
                                   dict(ns, metadata=dict(ns["metadata"], finalizers=["example.com/audit"]))))
    create(h.store, "configmaps", configmap("plain"))
    h.delete_namespace()
    held = h.namespace()
    assert held is not None and held["spec"]["finalizers"] == [] and h.in_team("configmaps") == []
    assert any("still held by finalizers example.com/audit" in s for s in h.controller.sentences)
    cond = h.conditions()      # not "resources are remaining": what holds it now is the finalizer
    assert cond["NamespaceContentRemaining"]["status"] == "False"
    assert cond["NamespaceContentRemaining"]["message"] == "All content successfully removed"
    write(h.store, commands.update("namespaces", None, "team",
                                   dict(held, metadata=dict(held["metadata"], finalizers=[]))))
    assert h.namespace() is None


def test_a_new_leader_finishes_a_namespace_a_former_one_left_terminating():
    h = Harness()
    create(h.store, "configmaps", configmap("plain"))
    write(h.store, delete_op("namespaces", None, "team"))     # marked while no controller ran
    assert h.in_team("configmaps") == ["plain"]
    fresh = Harness.__new__(Harness)
    ControllerHarness.__init__(fresh, lambda store: namespaces.controllers(store, None, ControllerSettings()),
                               store=h.store, clock=h.clock)
    fresh.settle()
    assert fresh.store.get("namespaces", None, "team") is None and h.in_team("configmaps") == []


class RefusingStore(MemoryStore):
    """The in-memory store, refusing deletes of ConfigMap "stuck" as a store might refuse a
    write it cannot take (the reason is not one the controller expects)."""

    def _apply_many(self, batch, timeout):
        results = super()._apply_many([c for c in batch if not self._stuck(c)], timeout)
        refused = {"ok": False, "code": 500, "reason": "InternalError", "message": "disk full"}
        it = iter(results)
        return [refused if self._stuck(c) else next(it) for c in batch]

    @staticmethod
    def _stuck(command):
        op = command["ops"][0]
        return op["op"] == "delete" and op["resource"] == "configmaps" and op["name"] == "stuck"


def test_a_refused_delete_is_reported_and_the_rest_goes_on():
    clock = FakeClock()
    store = RefusingStore(clock=clock, namespaces=("default", "team"))
    h = Harness(store=store, clock=clock)
    create(h.store, "configmaps", configmap("stuck"))
    create(h.store, "configmaps", configmap("fine"))
    h.delete_namespace()
    assert h.in_team("configmaps") == ["stuck"]
    cond = h.conditions()["NamespaceDeletionContentFailure"]
    assert (cond["status"], cond["reason"]) == ("True", "ContentDeletionFailed")
    assert cond["message"] == 'Failed to delete all resource types, 1 remaining: configmaps "stuck": disk full'
    assert h.namespace() is not None


def test_the_garbage_collector_cannot_take_kube_node_lease_with_it():
    """An ownerReference to a Node that does not exist, put on the namespace that holds
    every node's lease: the collector's delete is refused (403) and the namespace stays."""
    h = Harness(namespaces_=("default", "team", "kube-node-lease"),
                extra=lambda store, recorder, settings: garbage_collector.controllers(store, recorder, settings))
    lease_ns = h.store.get("namespaces", None, "kube-node-lease")
    orphan_ref = {"apiVersion": "v1", "kind": "Node", "name": "gone", "uid": "no-such-uid"}
    write(h.store, commands.update("namespaces", None, "kube-node-lease",
                                   dict(lease_ns, metadata=dict(lease_ns["metadata"], ownerReferences=[orphan_ref]))))
    h.settle()
    kept = h.store.get("namespaces", None, "kube-node-lease")
    assert kept is not None and not kept["metadata"].get("deletionTimestamp")
    collector = h.controllers[-1]
    assert collector.name == "garbage-collector"
    assert collector.faults.counts() == [("garbage-collector", "delete", "namespaces", "", "kube-node-lease", 1)], \
        "tried, refused, reported"
    h.advance(60)            # and not tried again and again (the store would refuse each)
    assert collector.faults.counts()[0][-1] == 1


def test_a_look_comes_back_when_what_it_waits_for_is_gone_not_at_every_deletion():
    h = Harness()
    for i in range(5):
        create(h.store, "configmaps", configmap("c%d" % i))
    create(h.store, "pods", pod("on-node", node="n1"))
    looks, look = [], h.controller.reconcile
    h.controller.reconcile = lambda key: looks.append(key) or look(key)
    h.delete_namespace()
    h.gather()
    assert looks == ["team"], "the five ConfigMaps it deleted itself wake nothing"
    write(h.store, commands.delete("pods", "team", "on-node"))     # the agent is done with its pod
    h.gather()
    assert looks == ["team", "team"] and h.namespace() is None
