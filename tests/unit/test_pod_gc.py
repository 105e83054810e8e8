"""Pod garbage collector: pods bound to nodes that do not exist, against an in-memory store."""
from controller_kit import ControllerHarness, create, write

from shepherd_ha.controllers.events import EventRecorder
from shepherd_ha.controllers.pod_gc import controllers
from shepherd_ha.controllers.settings import ControllerSettings

GRACE = 40.0


def node(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}}


def pod(name, node_name):
    spec = {"containers": [{"name": "main", "image": "busybox"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


class Harness(ControllerHarness):
    def __init__(self, grace=GRACE):
        settings = ControllerSettings(orphan_pod_grace=grace)
        super().__init__(lambda store: controllers(store, EventRecorder(store, "test"), settings))

    def pods(self):
        return sorted(p["metadata"]["name"] for p in self.store.list("pods"))

    def events(self, reason):
        return [e for e in self.store.list("events") if e.get("reason") == reason]


def test_pods_of_a_deleted_node_are_deleted_after_the_grace():
    h = Harness()
    create(h.store, "nodes", node("n1"))
    create(h.store, "nodes", node("n2"))
    for name, where in (("a", "n1"), ("b", "n1"), ("c", "n2"), ("pending", None)):
        create(h.store, "pods", pod(name, where))
    h.settle()
    assert h.pods() == ["a", "b", "c", "pending"]     # every node exists: nothing happens
    write(h.store, {"op": "delete", "resource": "nodes", "name": "n1"})
    h.settle()
    h.advance(GRACE - 1)
    assert h.pods() == ["a", "b", "c", "pending"], "the node may register again within the grace"
    h.advance(2)
    assert h.pods() == ["c", "pending"]
    gone = h.events("NodeGone")
    assert sorted(e["involvedObject"]["name"] for e in gone) == ["a", "b"]
    assert "n1" in gone[0]["message"] and "no longer exists" in gone[0]["message"]
    assert any("missing node n1" in s for s in h.controller.sentences)


def test_pod_bound_to_an_unknown_node_waits_for_the_grace_then_goes():
    h = Harness()
    create(h.store, "pods", pod("early", "not-yet"))
    h.settle()
    h.advance(GRACE - 1)
    assert h.pods() == ["early"], "a node may still register: the pod must wait out the quarantine"
    h.advance(2)
    assert h.pods() == []


def test_node_registering_within_the_grace_keeps_its_pods():
    h = Harness()
    create(h.store, "pods", pod("early", "late-node"))
    h.settle()
    h.advance(GRACE / 2)
    create(h.store, "nodes", node("late-node"))
    h.advance(GRACE)
    assert h.pods() == ["early"]


def test_resync_finds_orphans_a_new_leader_never_saw_deleted():
    h = Harness(grace=0)
    # A store that already holds a pod bound to a node that is gone (deleted under a
    # previous leader): the first resync collects it.
    create(h.store, "pods", pod("stranded", "old-node"))
    h.controller.resync()
    h.settle()
    assert h.pods() == []


def test_a_deleted_node_that_registers_again_keeps_its_pods():
    h = Harness()
    create(h.store, "nodes", node("n1"))
    create(h.store, "pods", pod("web", "n1"))
    h.settle()
    write(h.store, {"op": "delete", "resource": "nodes", "name": "n1"})
    h.advance(GRACE / 4)
    create(h.store, "nodes", node("n1"))       # its agent registers it again
    h.advance(GRACE * 2)
    assert h.pods() == ["web"]


def test_recreated_pod_of_same_name_on_a_live_node_is_kept():
    h = Harness()
    create(h.store, "nodes", node("n1"))
    create(h.store, "nodes", node("n2"))
    create(h.store, "pods", pod("web", "n1"))
    h.settle()
    write(h.store, {"op": "delete", "resource": "pods", "namespace": "default", "name": "web"})
    create(h.store, "pods", pod("web", "n2"))
    write(h.store, {"op": "delete", "resource": "nodes", "name": "n1"})
    h.advance(GRACE * 2)
    assert h.pods() == ["web"]
