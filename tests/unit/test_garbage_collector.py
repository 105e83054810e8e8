"""Garbage collector against an in-memory store: dependents of deleted owners go,
everything else stays, and many dependents go in one write_many."""
from controller_kit import ControllerHarness, CountingStore, FakeClock, create, delete, write

from shepherd_ha.controllers.garbage_collector import controllers
from shepherd_ha.controllers.informer import Informer
from shepherd_ha.controllers.settings import ControllerSettings


def deployment(name):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}}}


def ref(owner):
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def pod(name, owners=(), namespace="default"):
    meta = {"name": name, "namespace": namespace}
    if owners:
        meta["ownerReferences"] = [ref(o) if "metadata" in o else o for o in owners]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}


class Harness(ControllerHarness):
    def __init__(self):
        clock = FakeClock()
        super().__init__(lambda store: controllers(store, None, ControllerSettings()),
                         store=CountingStore(clock=clock), clock=clock)

    def pods(self):
        return sorted(p["metadata"]["name"] for p in self.store.list("pods"))


def test_deleting_an_owner_deletes_its_dependents_in_one_batch():
    h = Harness()
    web = create(h.store, "deployments", deployment("web"))
    api = create(h.store, "deployments", deployment("api"))
    for i in range(30):
        create(h.store, "pods", pod("web-%02d" % i, [web]))
    create(h.store, "pods", pod("api-0", [api]))
    create(h.store, "pods", pod("loose"))
    h.settle()
    assert len(h.pods()) == 32 and not h.store.submitted, "nothing to collect while owners exist"
    delete(h.store, "deployments", "web")
    h.settle()
    assert h.pods() == ["api-0", "loose"]
    assert len(h.store.submitted) == 1 and h.store.submitted[0]["type"] == "group"
    assert len(h.store.submitted[0]["commands"]) == 30
    ops = [c["ops"][0] for c in h.store.submitted[0]["commands"]]
    assert all(op["op"] == "delete" and op["precondition"]["uid"] for op in ops)
    assert list(h.controller.sentences)[-1].startswith(
        "deleted 30 dependent(s) of deleted Deployment default/web (uid %s): pods default/web-00" % web["metadata"]["uid"])


def test_orphan_delete_keeps_dependents():
    h = Harness()
    web = create(h.store, "deployments", deployment("web"))
    create(h.store, "pods", pod("web-0", [web]))
    h.settle()
    delete(h.store, "deployments", "web", propagationPolicy="Orphan")
    h.settle()
    assert h.pods() == ["web-0"]
    assert "ownerReferences" not in h.store.get("pods", "default", "web-0")["metadata"]
    h.controller.resync()
    h.settle()
    assert h.pods() == ["web-0"] and not h.store.submitted


def test_dependent_created_after_its_owner_is_gone_is_collected():
    h = Harness()
    web = create(h.store, "deployments", deployment("web"))
    delete(h.store, "deployments", "web")
    h.settle()
    create(h.store, "pods", pod("late", [web]))       # e.g. a deposed controller's late create
    h.settle()
    assert h.pods() == []


def test_dependent_whose_owner_exists_is_never_deleted_even_when_queued():
    h = Harness()
    web = create(h.store, "deployments", deployment("web"))
    create(h.store, "pods", pod("web-0", [web]))
    h.settle()
    # Queue the owner's uid as if something happened, with the owner present: a no-op.
    h.controller.queue.add(web["metadata"]["uid"])
    h.settle()
    assert h.pods() == ["web-0"] and not h.store.submitted


def test_recreated_owner_with_same_name_does_not_save_old_dependents():
    h = Harness()
    old = create(h.store, "deployments", deployment("web"))
    create(h.store, "pods", pod("old-0", [old]))
    h.settle()
    delete(h.store, "deployments", "web")
    new = create(h.store, "deployments", deployment("web"))
    create(h.store, "pods", pod("new-0", [new]))
    h.settle()
    assert h.pods() == ["new-0"], "ownership is by uid, not by name"


def test_dependent_with_another_live_owner_loses_only_the_dead_reference():
    h = Harness()
    a = create(h.store, "deployments", deployment("a"))
    b = create(h.store, "deployments", deployment("b"))
    create(h.store, "pods", pod("shared", [a, b]))
    h.settle()
    delete(h.store, "deployments", "a")
    h.settle()
    refs = h.store.get("pods", "default", "shared")["metadata"]["ownerReferences"]
    assert [r["uid"] for r in refs] == [b["metadata"]["uid"]]
    delete(h.store, "deployments", "b")
    h.settle()
    assert h.pods() == []


def test_unknown_owner_kind_or_missing_uid_is_never_judged_absent():
    h = Harness()
    create(h.store, "pods", pod("foreign", [{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w",
                                             "uid": "widget-uid"}]))
    create(h.store, "pods", pod("vague", [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nope"}]))
    h.settle()
    h.controller.resync()
    h.settle()
    assert h.pods() == ["foreign", "vague"]


def test_bogus_owner_uid_is_collected_but_cluster_scoped_owner_is_resolved():
    h = Harness()
    n1 = create(h.store, "nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {}})
    create(h.store, "pods", pod("on-node", [n1]))
    create(h.store, "pods", pod("bogus", [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "ghost",
                                           "uid": "never-existed"}]))
    h.settle()
    assert h.pods() == ["on-node"]
    delete(h.store, "nodes", "n1", namespace=None)
    h.settle()
    assert h.pods() == []


def test_dependent_changed_meanwhile_is_rechecked_not_deleted_on_stale_grounds():
    h = Harness()
    a = create(h.store, "deployments", deployment("a"))
    b = create(h.store, "deployments", deployment("b"))
    create(h.store, "pods", pod("p", [a]))
    h.settle()
    delete(h.store, "deployments", "a")
    h.informer.pump()            # the owner's deletion is queued, not yet reconciled
    # Meanwhile someone re-points the pod at a live owner.
    current = h.store.get("pods", "default", "p")
    write(h.store, {"op": "update", "resource": "pods", "namespace": "default", "name": "p",
                    "object": dict(current, metadata=dict(current["metadata"], ownerReferences=[ref(b)]))})
    h.controller.run_until_idle()      # reconciles before the informer saw the re-pointing
    assert h.pods() == ["p"] and not h.store.submitted
    h.settle()
    assert h.pods() == ["p"]


class RacingStore(CountingStore):
    """Applies `interfere()` just before the collector's first write reaches the log."""
    interfere = None

    def _apply(self, command, timeout):
        if self.interfere is not None:
            interfere, self.interfere = self.interfere, None
            interfere()
        return super()._apply(command, timeout)


def test_dependent_re_pointed_between_read_and_delete_survives():
    h = Harness()
    h.store = RacingStore(clock=h.clock)
    [h.controller] = controllers(h.store, None, ControllerSettings())
    h.informer = Informer(h.store, [h.controller])
    h.informer.start_from_snapshot()
    a = create(h.store, "deployments", deployment("a"))
    b = create(h.store, "deployments", deployment("b"))
    create(h.store, "pods", pod("p", [a]))
    create(h.store, "pods", pod("q", [a]))
    h.settle()

    def re_point():
        current = h.store.get("pods", "default", "p")
        write(h.store, {"op": "update", "resource": "pods", "namespace": "default", "name": "p",
                        "object": dict(current, metadata=dict(current["metadata"], ownerReferences=[ref(b)]))})
    h.store.interfere = re_point
    delete(h.store, "deployments", "a")
    h.settle()
    assert h.pods() == ["p"], "q collected; p, re-pointed at a live owner meanwhile, kept"


def test_resync_rebuilds_the_index_for_a_new_leader():
    h = Harness()
    web = create(h.store, "deployments", deployment("web"))
    for i in range(3):
        create(h.store, "pods", pod("web-%d" % i, [web]))
    delete(h.store, "deployments", "web")       # deleted while no leader ran the collector
    h2 = Harness.__new__(Harness)
    h2.clock, h2.store = h.clock, h.store
    [h2.controller] = controllers(h.store, None, ControllerSettings())
    h2.informer = Informer(h.store, [h2.controller])
    h2.informer.start_from_snapshot()
    h2.settle()
    assert h.store.list("pods") == []


def test_namespace_delete_is_left_to_the_store():
    h = Harness()
    write(h.store, {"op": "create", "resource": "namespaces", "object": {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tmp", "uid": "ns-tmp"}}})
    web = create(h.store, "deployments", dict(deployment("web"), metadata={"name": "web", "namespace": "tmp"}))
    create(h.store, "pods", pod("web-0", [web], namespace="tmp"))
    h.settle()
    delete(h.store, "namespaces", "tmp", namespace=None)
    h.settle()
    assert h.store.list("pods") == [] and not h.store.submitted


# ---- foreground deletion ----

def bound_pod(name, owners, node="n1"):
    body = pod(name, owners)
    body["spec"]["nodeName"] = node
    return body


def test_foreground_delete_keeps_the_owner_until_its_dependents_are_gone():
    h = Harness()
    web = create(h.store, "deployments", deployment("web"))
    for i in range(3):
        create(h.store, "pods", pod("web-%d" % i, [web]))
    create(h.store, "pods", pod("loose"))
    h.settle()
    delete(h.store, "deployments", "web", propagationPolicy="Foreground", deletionTimestamp="2026-01-01T00:00:00Z")
    marked = h.store.get("deployments", "default", "web")
    assert marked["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"
    assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
    h.settle()
    assert h.pods() == ["loose"]
    assert h.store.get("deployments", "default", "web") is None, "the owner goes once its dependents are gone"
    assert any(s.startswith("deleted deployments default/web: its dependents are gone") for s in h.controller.sentences)


def test_foreground_owner_waits_for_terminating_dependents():
    h = Harness()
    web = create(h.store, "deployments", deployment("web"))
    create(h.store, "pods", bound_pod("web-0", [web]))
    h.settle()
    delete(h.store, "deployments", "web", propagationPolicy="Foreground", deletionTimestamp="2026-01-01T00:00:00Z")
    h.settle()
    # The pod is on a node: its deletion is graceful, so it is only terminating...
    terminating = h.store.get("pods", "default", "web-0")
    assert terminating is not None and terminating["metadata"].get("deletionTimestamp")
    assert h.store.get("deployments", "default", "web") is not None, "the owner must wait for its pods to stop"
    # ... until its agent confirms (a forced delete); then the owner goes too.
    delete(h.store, "pods", "web-0")
    h.settle()
    assert h.store.get("deployments", "default", "web") is None


def test_foreground_owner_with_another_finalizer_stays_until_that_is_removed():
    h = Harness()
    body = deployment("web")
    body["metadata"]["finalizers"] = ["example.com/backup"]
    web = create(h.store, "deployments", body)
    create(h.store, "pods", pod("web-0", [web]))
    h.settle()
    delete(h.store, "deployments", "web", propagationPolicy="Foreground", deletionTimestamp="2026-01-01T00:00:00Z")
    h.settle()
    left = h.store.get("deployments", "default", "web")
    assert h.pods() == [] and left["metadata"]["finalizers"] == ["example.com/backup"]
    write(h.store, {"op": "update", "resource": "deployments", "namespace": "default", "name": "web",
                    "object": dict(left, metadata=dict(left["metadata"], finalizers=[]))})
    assert h.store.get("deployments", "default", "web") is None


def test_new_leader_finishes_a_foreground_deletion_from_a_resync():
    h = Harness()
    web = create(h.store, "deployments", deployment("web"))
    create(h.store, "pods", pod("web-0", [web]))
    # Marked before this controller started (under a previous leader).
    delete(h.store, "deployments", "web", propagationPolicy="Foreground", deletionTimestamp="2026-01-01T00:00:00Z")
    fresh = Harness.__new__(Harness)
    fresh.clock, fresh.store = h.clock, h.store
    [fresh.controller] = controllers(h.store, None, ControllerSettings())
    fresh.informer = Informer(h.store, [fresh.controller])
    fresh.informer.start_from_snapshot()
    fresh.controller.resync()
    fresh.settle()
    assert fresh.pods() == [] and h.store.get("deployments", "default", "web") is None
