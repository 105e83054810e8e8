"""Fault-isolated controllers on real 3-replica clusters.

Real processes: the shapes that once killed the leader's informer thread or froze
scheduling and endpoints (a node's status.conditions or status.allocatable that is a
number, a pod's status.podIP that is an object) are refused with 422 naming the field,
on create, update, merge patch and the status subresource; the controllers stay active.

In process (three Replicas with the default controllers, real PySyncObj on loopback):
the same objects written straight through the store (past the API's validation, as an
older server or a bug could have stored them) cost only themselves: pods are still
scheduled, the service's endpoints still follow its good pods, the leader's manager
counts and reports the objects by name; after the leader goes, the new leader's
controllers meet the same objects and keep serving too.
"""
import pytest

from shepherd_ha.controllers.faults import REASON
from shepherd_ha.controllers.registry import default_factories
from shepherd_ha.model.defaults import apply_defaults
from shepherd_ha.store.stamping import stamp_new

from .helpers import POD, PODS, call, expect, pod
from .test_controllers_fencing import InProcessCluster, wait_for

pytestmark = pytest.mark.integration

NODES = "/api/v1/nodes"
MERGE = {"Content-Type": "application/merge-patch+json"}
READY = [{"type": "Ready", "status": "True", "reason": "Test", "lastTransitionTime": "2026-01-01T00:00:00Z"}]


def node(name, **status):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": dict({"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}, "conditions": READY},
                           **status)}


def refused(resp, field):
    """A 422 whose causes name `field` (and the message says what is wrong with it)."""
    body = expect(resp, 422)
    causes = {c["field"]: c["message"] for c in body["details"]["causes"]}
    assert field in causes, (field, body)
    assert field in body["message"], body["message"]
    return causes[field]


def test_wrong_status_types_are_refused_naming_the_field(cluster):
    url = cluster.url(cluster.followers()[0])
    assert "list of objects" in refused(call("POST", url + NODES, json=node("n-cond", conditions=1)),
                                        "status.conditions")
    assert "object" in refused(call("POST", url + NODES, json=node("n-alloc", allocatable=1)), "status.allocatable")
    refused(call("POST", url + NODES, json=node("n-cpu", allocatable={"cpu": [4]})), "status.allocatable.cpu")
    refused(call("POST", url + NODES, json=node("n-truth", conditions=[{"type": "Ready", "status": True}])),
            "status.conditions[0].status")
    refused(call("POST", url + PODS.format(ns="default"),
                 json=pod("p-ip", status={"phase": "Running", "podIP": {"a": 1}})), "status.podIP")
    for name in ("n-cond", "n-alloc", "n-cpu", "n-truth"):
        expect(call("GET", url + NODES + "/" + name), 404)

    # Update, merge patch and the status subresource of objects that exist.
    good = expect(call("POST", url + NODES, json=node("n-good")), 201)
    refused(call("PATCH", url + NODES + "/n-good/status", data='{"status": {"conditions": 1}}', headers=MERGE),
            "status.conditions")
    refused(call("PUT", url + NODES + "/n-good/status", json=dict(good, status={"allocatable": 1})),
            "status.allocatable")
    refused(call("PATCH", url + NODES + "/n-good", data='{"status": {"conditions": 1}}', headers=MERGE),
            "status.conditions")
    refused(call("PUT", url + NODES + "/n-good", json=dict(good, status={"capacity": "lots"})), "status.capacity")
    created = expect(call("POST", url + PODS.format(ns="default"), json=pod("p-good")), 201)
    refused(call("PATCH", url + POD.format(ns="default", name="p-good") + "/status",
                 data='{"status": {"podIP": {"a": 1}}}', headers=MERGE), "status.podIP")
    refused(call("PUT", url + POD.format(ns="default", name="p-good") + "/status",
                 json=dict(created, status={"containerStatuses": [{"name": "main", "restartCount": "3"}]})),
            "status.containerStatuses[0].restartCount")
    after = expect(call("GET", url + NODES + "/n-good"), 200)
    assert after["metadata"]["resourceVersion"] == good["metadata"]["resourceVersion"], "nothing was written"

    # The leader's controllers are active with every thread up, and schedule as ever.
    wait_for("p-good scheduled", lambda: expect(call("GET", url + POD.format(ns="default", name="p-good")),
                                                200)["spec"].get("nodeName") == "n-good", 15)
    leader_url = cluster.url(cluster.leader())
    state = expect(call("GET", leader_url + "/shepherd/v1/replica"), 200)["controllers"]
    assert state["active"] and state["deadThreads"] == [] and state["threadRestarts"] == 0, state
    metrics = call("GET", leader_url + "/metrics").text
    assert "shepherd_controllers_active 1.0" in metrics and "shepherd_controller_dead_threads 0.0" in metrics
    assert "# TYPE shepherd_controller_errors_total counter" in metrics


# ---------------------------------------------------------------- planted past validation

class DefaultControllersCluster(InProcessCluster):
    def _factory(self, ident):
        [build] = default_factories()

        def recording(store):
            self.stores[ident].append(store)
            return build(store)
        return recording


@pytest.fixture
def controllers_inproc(tmp_path):
    cluster = DefaultControllersCluster(tmp_path)
    try:
        wait_for("a leader whose controllers run with the epoch applied everywhere", cluster.active_leader, 20)
        yield cluster
    finally:
        cluster.close()


def create_op(resource, obj, namespace=None, validated=True):
    obj = dict(obj, metadata=dict(obj["metadata"], **({"namespace": namespace} if namespace else {})))
    return {"op": "create", "resource": resource, "object": stamp_new(apply_defaults(resource, obj) if validated
                                                                      else obj)}


def plant(replica, *ops):
    result = replica.write(list(ops), timeout=5.0)
    assert result["ok"], result


def running_pod(name, app, ip):
    return pod(name, {"app": app}, node="good",
               status={"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]})


def bound_to(replica, name):
    found = replica.node.fsm.get("pods", "default", name)
    return found and found["spec"].get("nodeName")


def endpoint_ips(replica, name):
    ep = replica.node.fsm.get("endpoints", "default", name) or {}
    return sorted(a["ip"] for s in ep.get("subsets") or () for a in s.get("addresses") or ())


def fault_names(manager):
    return {(c[0], c[2], c[4]) for c in manager.status(counts=True)["errorCounts"]}


def test_poisoned_objects_in_the_store_cost_only_themselves_across_a_failover(controllers_inproc):
    cluster = controllers_inproc
    leader = cluster.active_leader()
    plant(leader,
          create_op("nodes", node("good")),
          create_op("nodes", node("bad", conditions=1), validated=False),
          create_op("nodes", node("broke", allocatable=1), validated=False),
          create_op("services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                                 "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}, "default"),
          create_op("pods", running_pod("web-1", "web", "10.0.0.1"), "default"),
          create_op("pods", running_pod("web-bad", "web", {"a": 1}), "default", validated=False),
          *[create_op("pods", pod("before-%d" % i), "default") for i in range(3)])
    wait_for("pods bound to the good node", lambda: all(bound_to(leader, "before-%d" % i) == "good"
                                                        for i in range(3)), 15)
    wait_for("web's endpoints list its good pod", lambda: endpoint_ips(leader, "web") == ["10.0.0.1"], 15)
    manager = cluster.managers[leader.id]
    wanted = {("scheduler", "nodes", "bad"), ("scheduler", "nodes", "broke"), ("endpoints", "pods", "web-bad")}
    wait_for("the leader counts the objects by name", lambda: wanted <= fault_names(manager), 10)
    wait_for("an event on the bad node", lambda: any(
        e["reason"] == REASON and e["involvedObject"]["name"] == "bad"
        for e in leader.list("events", "default", consistent=False)[0]), 10)    # under the store lock
    status = manager.status()
    assert status["active"] and status["threadRestarts"] == 0, status

    # The leader goes; the new one meets the same objects.
    term = leader.node.term()
    leader.close()
    others = [r for r in cluster.replicas if r is not leader]
    new_leader = wait_for("a new leader with its controllers active", lambda: next(
        (r for r in others if r.node.is_leader() and r.node.term() > term and cluster.managers[r.id].status()["active"]
         and r.node.fsm.epoch[0] > term), None), 20)
    plant(new_leader, create_op("pods", pod("after"), "default"),
          create_op("pods", running_pod("web-2", "web", "10.0.0.2"), "default"))
    wait_for("a pod created after the failover is bound", lambda: bound_to(new_leader, "after") == "good", 15)
    wait_for("web's endpoints still follow",
             lambda: endpoint_ips(new_leader, "web") == ["10.0.0.1", "10.0.0.2"], 15)
    new_manager = cluster.managers[new_leader.id]
    wait_for("the new leader counts them too", lambda: {("scheduler", "nodes", "bad")} <= fault_names(new_manager), 10)
    status = new_manager.status()
    assert status["active"] and status["deadThreads"] == [] and status["threadRestarts"] == 0, status
