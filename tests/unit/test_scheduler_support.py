"""Objects and a harness for the scheduler unit tests (an in-memory store, synchronous passes).
Holds no tests itself; test_scheduler*.py import it."""
from shepherd_ha.controllers.events import EventRecorder
from shepherd_ha.controllers.informer import Informer
from shepherd_ha.controllers.scheduler import Scheduler
from shepherd_ha.controllers.store_access import MemoryStore
from shepherd_ha.model.defaults import apply_defaults
from shepherd_ha.model.validation import validate_object
from shepherd_ha.store.stamping import stamp_new


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def node(name, cpu="4", memory="8Gi", pods="110", ready="True", unschedulable=False, labels=None):
    obj = {"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "labels": dict({"kubernetes.io/hostname": name}, **(labels or {}))},
           "spec": {"unschedulable": unschedulable},
           "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                      "capacity": {"cpu": cpu, "memory": memory, "pods": pods}}}
    if ready is not None:
        obj["status"]["conditions"] = [{"type": "Ready", "status": ready, "reason": "Test", "message": "",
                                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    return obj


def pod(name, cpu=None, memory=None, node_name=None, owner=None, selector=None, host_port=None,
        protocol="TCP", phase=None, namespace="default", containers=1):
    containers_ = []
    for i in range(containers):
        c = {"name": "c%d" % i, "image": "nginx:1.25"}
        requests = {}
        if cpu is not None:
            requests["cpu"] = cpu
        if memory is not None:
            requests["memory"] = memory
        if requests:
            c["resources"] = {"requests": requests}
        if host_port is not None and i == 0:
            c["ports"] = [{"containerPort": 80, "hostPort": host_port, "protocol": protocol}]
        containers_.append(c)
    spec = {"containers": containers_}
    if node_name:
        spec["nodeName"] = node_name
    if selector:
        spec["nodeSelector"] = dict(selector)
    meta = {"name": name, "namespace": namespace}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "owner-" + owner,
                                    "uid": owner, "controller": True, "blockOwnerDeletion": True}]
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def stamped(plural, obj):
    obj = apply_defaults(plural, stamp_new(obj))
    causes = validate_object(plural, obj)
    assert not causes, causes
    return obj


def op_create(plural, obj):
    return {"op": "create", "resource": plural, "object": stamped(plural, obj)}


class Harness:
    """A MemoryStore, an EventRecorder, a Scheduler and an Informer feeding it."""

    def __init__(self, clock=None, **scheduler_kwargs):
        self.clock = clock or FakeClock()
        self.store = MemoryStore(clock=self.clock, namespaces=("default", "other"))
        self.recorder = EventRecorder(self.store, "test")
        self.scheduler = Scheduler(self.store, self.recorder, **scheduler_kwargs)
        self.informer = Informer(self.store, [self.scheduler])
        self.informer.start_from_snapshot()
        self.write_many_calls = []
        real = self.store.write_many

        def counting(writes):
            self.write_many_calls.append(len(writes))
            return real(writes)
        self.store.write_many = counting

    def create(self, plural, *objs):
        """Create objects in one command (as a client would, outside the controller epoch)."""
        result = self.store.apply({"type": "write", "key": None, "ops": [op_create(plural, o) for o in objs]})
        assert result["ok"], result
        return [r["object"] for r in result["results"]]

    def update(self, plural, obj, subresource=None, namespace=None):
        meta = obj["metadata"]
        result = self.store.apply({"type": "write", "key": None, "ops": [{
            "op": "update", "resource": plural, "namespace": meta.get("namespace", namespace), "name": meta["name"],
            "object": obj, "subresource": subresource}]})
        assert result["ok"], result
        return result["results"][0]["object"]

    def delete(self, plural, name, namespace=None):
        result = self.store.apply({"type": "write", "key": None, "ops": [{
            "op": "delete", "resource": plural, "namespace": namespace, "name": name}]})
        assert result["ok"], result

    def run(self):
        """Feed changes and run passes until nothing is left to do; returns the sentences of this run."""
        before = len(self.scheduler.sentences)
        for _ in range(50):
            self.informer.pump()
            if not self.scheduler.run_until_idle():
                if not self.informer.pump():
                    break
        return list(self.scheduler.sentences)[before:]

    def pod(self, name, namespace="default"):
        return self.store.get("pods", namespace, name)

    def node_of(self, name, namespace="default"):
        return self.pod(name, namespace)["spec"].get("nodeName")

    def condition(self, name, namespace="default"):
        for c in (self.pod(name, namespace).get("status") or {}).get("conditions") or ():
            if c["type"] == "PodScheduled":
                return c
        return None

    def events(self, reason=None):
        return [e for ns in ("default", "other") for e in self.store.list("events", ns)
                if reason is None or e["reason"] == reason]
