"""Objects of the wrong shape planted in the store past validation (directly into the FSM):
the controller that cannot read one skips it, counts it and reports it as an Event on it,
and keeps serving every other key. The informer never dies of one change."""
from shepherd_ha.controllers import faults as F
from shepherd_ha.controllers.controller import Controller
from shepherd_ha.controllers.endpoints import EndpointsController
from shepherd_ha.controllers.events import EventRecorder
from shepherd_ha.controllers.faults import ControllerFaults
from shepherd_ha.controllers.store_access import MemoryStore
from shepherd_ha.model.validation import validate_object

from controller_kit import ControllerHarness, create, plant, wait_for, write
from test_scheduler_support import Harness, node, pod


def fault_events(store, name, namespace="default"):
    return [e for e in store.list("events", namespace)
            if e["reason"] == F.REASON and e["involvedObject"]["name"] == name]


def failed_objects(faults):
    """{(controller, resource, namespace, name): count}, stages summed."""
    out = {}
    for controller, _stage, resource, namespace, name, n in faults.counts():
        key = (controller, resource, namespace, name)
        out[key] = out.get(key, 0) + n
    return out


def bad_node(name, status):
    obj = node(name)
    obj["status"] = status
    assert validate_object("nodes", obj), "the API refuses it; only a plant gets it in"
    return obj


# ---- the scheduler ----

def test_nodes_with_wrong_status_types_do_not_stop_scheduling():
    h = Harness()
    h.create("nodes", node("good"))
    conditions = bad_node("bad-conditions", dict(node("x")["status"], conditions=1))
    allocatable = bad_node("bad-allocatable", {"allocatable": 1, "conditions": node("x")["status"]["conditions"]})
    plant(h.store, "nodes", conditions)
    plant(h.store, "nodes", allocatable)
    h.create("pods", *[pod("p%d" % i) for i in range(5)])
    h.run()                                  # the informer (pump) and the passes do not raise
    assert [h.node_of("p%d" % i) for i in range(5)] == ["good"] * 5
    failed = failed_objects(h.scheduler.faults)
    assert ("scheduler", "nodes", "", "bad-conditions") in failed
    assert ("scheduler", "nodes", "", "bad-allocatable") in failed
    [event] = wait_for("the event on the node", lambda: fault_events(h.store, "bad-conditions"))
    assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "Node"
    assert "scheduler" in event["message"] and "TypeError" in event["message"]
    # Later pods too: the bad nodes stay out, every pass still runs.
    h.create("pods", pod("later"))
    h.run()
    assert h.node_of("later") == "good"


def test_a_node_fixed_later_is_used_again():
    h = Harness()
    plant(h.store, "nodes", bad_node("n1", dict(node("x")["status"], allocatable=1)))
    h.create("pods", pod("web"))
    h.run()
    assert h.node_of("web") is None
    fixed = dict(h.store.get("nodes", None, "n1"), status=node("n1")["status"])
    h.update("nodes", fixed, subresource="status")
    h.run()
    assert h.node_of("web") == "n1"


def test_poisoned_pods_cost_only_themselves_in_a_pass():
    h = Harness()
    h.create("nodes", node("n1", cpu="2"))
    bound = pod("bound-bad", node_name="n1")
    bound["spec"]["containers"][0]["resources"] = 7                  # the usage index cannot count it
    pending = pod("pending-bad")
    pending["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": [1]}]
    for obj in (bound, pending):
        assert validate_object("pods", obj)
        plant(h.store, "pods", obj)
    h.create("pods", *[pod("ok%d" % i, cpu="100m") for i in range(4)])
    h.run()
    assert [h.node_of("ok%d" % i) for i in range(4)] == ["n1"] * 4, "one pass, the bad pod left out"
    assert h.node_of("pending-bad") is None
    failed = failed_objects(h.scheduler.faults)
    assert ("scheduler", "pods", "default", "pending-bad") in failed
    assert ("scheduler", "pods", "default", "bound-bad") in failed
    wait_for("the event on the pending pod", lambda: fault_events(h.store, "pending-bad"))


# ---- the endpoints ----

def service(name, app):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"app": app}, "ports": [{"port": 80, "targetPort": 8080}]}}


def running_pod(name, app, ip):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default",
                                                           "labels": {"app": app}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]}}


def endpoint_ips(store, name):
    ep = store.get("endpoints", "default", name)
    return sorted(a["ip"] for s in (ep or {}).get("subsets") or () for a in s.get("addresses") or ())


def test_a_pod_with_a_bad_ip_leaves_its_service_endpoints_moving():
    h = ControllerHarness(lambda store: [EndpointsController(store, EventRecorder(store, "test"))])
    create(h.store, "services", service("web", "web"))
    create(h.store, "services", service("api", "api"))
    create(h.store, "pods", running_pod("web-1", "web", "10.0.0.1"))
    create(h.store, "pods", running_pod("api-1", "api", "10.0.1.1"))
    bad = running_pod("web-bad", "web", {"a": 1})
    assert validate_object("pods", bad)
    plant(h.store, "pods", bad)
    h.settle()
    assert endpoint_ips(h.store, "web") == ["10.0.0.1"], "the service's good pods are still listed"
    assert endpoint_ips(h.store, "api") == ["10.0.1.1"]
    create(h.store, "pods", running_pod("web-2", "web", "10.0.0.2"))
    h.settle()
    assert endpoint_ips(h.store, "web") == ["10.0.0.1", "10.0.0.2"], "not frozen by the bad pod"
    assert ("endpoints", "pods", "default", "web-bad") in failed_objects(h.controller.faults)
    [event] = wait_for("the event on the pod", lambda: fault_events(h.store, "web-bad"))
    assert "endpoints" in event["message"] and "podIP" in event["message"]


# ---- the framework: informer, reconcile, rate limits ----

class Picky(Controller):
    """Reconciles pods; its keys_for raises on pods labelled poison=keys, reconcile on poison=reconcile."""
    name = "picky"
    watches = ("pods",)

    def __init__(self, store, events=None):
        super().__init__(store, events)
        self.done = []

    def keys_for(self, change):
        obj = change.object or change.previous
        if obj["metadata"].get("labels", {}).get("poison") == "keys":
            raise ValueError("cannot map this pod to keys")
        return super().keys_for(change)

    def reconcile(self, key):
        pod_ = self.store.get("pods", *key)
        if pod_ and pod_["metadata"].get("labels", {}).get("poison") == "reconcile":
            raise KeyError("no such field")
        self.done.append(key[1])


def labelled(name, poison=None):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"poison": poison} if poison else {}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}


def test_informer_and_reconcile_failures_cost_one_key_each():
    h = ControllerHarness(lambda store: [Picky(store, EventRecorder(store, "test"))])
    h.settle()
    create(h.store, "pods", labelled("a"))
    create(h.store, "pods", labelled("keys", "keys"))
    create(h.store, "pods", labelled("rec", "reconcile"))
    create(h.store, "pods", labelled("b"))
    h.settle()
    assert h.controller.done == ["a", "b"]
    stages = {(c[1], c[4]) for c in h.controller.faults.counts()}
    assert ("informer", "keys") in stages and ("reconcile", "rec") in stages
    wait_for("events on both pods", lambda: fault_events(h.store, "keys") and fault_events(h.store, "rec"))


def test_a_poisoned_object_is_counted_every_time_but_evented_once():
    store = MemoryStore()
    target = create(store, "pods", labelled("p"))
    faults = ControllerFaults()
    recorder = EventRecorder(store, "test")
    for _ in range(50):
        faults.object_failed("picky", "reconcile", "pods", target, TypeError("bad"), recorder)
    assert failed_objects(faults) == {("picky", "pods", "default", "p"): 50}
    wait_for("the event", lambda: fault_events(store, "p"))
    [event] = fault_events(store, "p")
    assert event["count"] == 1


def test_the_counted_objects_are_bounded():
    faults = ControllerFaults()
    for i in range(F.MAX_OBJECTS + 100):
        faults.object_failed("c", "reconcile", "pods", {"metadata": {"namespace": "d", "name": "p%d" % i}},
                             TypeError("bad"))
    counts = faults.counts()
    assert len(counts) <= F.MAX_OBJECTS + 1
    assert sum(c[5] for c in counts) == F.MAX_OBJECTS + 100, "folded into (others), never lost"
    assert ("c", "reconcile", "pods", "d", "p%d" % (F.MAX_OBJECTS + 99), 1) in counts


def test_the_endpoints_of_a_pod_without_status_object_are_skipped_cleanly():
    # status: a list (not an object): every controller reading it would raise.
    h = ControllerHarness(lambda store: [EndpointsController(store, EventRecorder(store, "test"))])
    create(h.store, "services", service("web", "web"))
    create(h.store, "pods", running_pod("web-1", "web", "10.0.0.1"))
    bad = dict(running_pod("web-bad", "web", "10.0.0.9"), status=[1])
    plant(h.store, "pods", bad)
    h.settle()
    assert endpoint_ips(h.store, "web") == ["10.0.0.1"]
    write(h.store, {"op": "delete", "resource": "pods", "namespace": "default", "name": "web-bad"})
    h.settle()
    assert endpoint_ips(h.store, "web") == ["10.0.0.1"]


# ---- bystanders: a poisoned object listed beside the ones a key is about ----

def test_a_poisoned_pod_beside_a_deployments_pods_does_not_stop_it():
    from shepherd_ha.controllers.deployments import DeploymentController
    from shepherd_ha.controllers.replica_sets import ReplicaSetController
    h = ControllerHarness(lambda store: [DeploymentController(store, EventRecorder(store, "test")),
                                         ReplicaSetController(store, EventRecorder(store, "test"))])
    plant(h.store, "pods", {"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": "junk", "namespace": "default", "ownerReferences": 1},
                            "spec": 1})
    create(h.store, "deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    h.settle()
    owned = [p for p in h.store.list("pods", "default") if p["metadata"]["name"].startswith("web-")]
    assert len(owned) == 2
    assert h.store.get("deployments", "default", "web")["status"]["replicas"] == 2
    assert ("deployments", "pods", "default", "junk") in failed_objects(h.controller.faults)
    assert ("replicasets", "pods", "default", "junk") in failed_objects(h.controllers[1].faults)


def test_garbage_collection_resyncs_past_unreadable_owner_references():
    from shepherd_ha.controllers.garbage_collector import GarbageCollector
    h = ControllerHarness(lambda store: [GarbageCollector(store, EventRecorder(store, "test"))])
    plant(h.store, "configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "junk", "namespace": "default",
                                               "ownerReferences": [{"uid": ["x"], "kind": "Pod", "name": "p"}]}})
    owner = create(h.store, "configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                           "metadata": {"name": "owner", "namespace": "default"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    create(h.store, "configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "dependent", "namespace": "default", "ownerReferences": [ref]}})
    h.controller.resync()
    h.settle()
    write(h.store, {"op": "delete", "resource": "configmaps", "namespace": "default", "name": "owner"})
    h.settle()
    assert h.store.get("configmaps", "default", "dependent") is None, "collected as ever"
    assert h.store.get("configmaps", "default", "junk") is not None
