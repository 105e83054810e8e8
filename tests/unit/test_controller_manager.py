"""The controller manager on a MemoryStore, its threads really running: a dead controller
thread (informer or worker) is restarted and reported, never silent; and with every
default controller running, poisoned objects planted past validation cost only themselves."""
from shepherd_ha.api.metrics import ReplicaCollector
from shepherd_ha.controllers.controller import Controller
from shepherd_ha.controllers.manager import ControllerManager
from shepherd_ha.controllers.registry import default_factories
from shepherd_ha.controllers.store_access import MemoryStore

from controller_kit import MemoryReplica, create, plant, wait_for
from test_controller_faults import endpoint_ips, fault_events, running_pod, service
from test_scheduler_support import node, pod


class Crash(BaseException):
    """What no `except Exception` catches."""


class Recorder(Controller):
    """Reconciles pods by noting their names; `crash` says how its thread dies."""
    name = "recorder"
    watches = ("pods",)
    crash = None            # "worker-once", "worker-always" or "informer-once"

    def __init__(self, store):
        super().__init__(store)
        self.done = set()
        self.crashed = 0

    def handle(self, change):
        if self.crash == "informer-once" and not self.crashed and change.object is not None:
            self.crashed += 1
            raise Crash("the informer thread dies here")
        super().handle(change)

    def process_one(self, timeout=0.2):
        if self.crash == "worker-always" or (self.crash == "worker-once" and not self.crashed):
            self.crashed += 1
            raise Crash("the worker thread dies here")
        return super().process_one(timeout)

    def reconcile(self, key):
        self.done.add(key[1])


def running(crash):
    store = MemoryStore()
    replica = MemoryReplica(store)
    built = []

    def factory(s):
        controller = Recorder(s)
        controller.crash = crash
        built.append(controller)
        return [controller]
    manager = ControllerManager(replica, [factory])
    wait_for("controllers started", lambda: built and manager.status()["epoch"])
    return store, replica, manager, built[0]


def pod_named(name):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}


def test_a_dead_worker_thread_is_restarted_and_reported():
    store, replica, manager, controller = running("worker-once")
    try:
        status = wait_for("the restart", lambda: (lambda s: s if s["threadRestarts"] else None)(manager.status()))
        assert status["lastRestart"]["thread"] == "recorder-0"
        assert "Crash" in status["lastRestart"]["error"] and "worker thread dies" in status["lastRestart"]["error"]
        create(store, "pods", pod_named("after"))
        wait_for("the restarted worker reconciles", lambda: "after" in controller.done)
        status = manager.status(counts=True)
        assert status["active"] and status["deadThreads"] == []
        assert status["restartCounts"] == {"recorder-0": 1}
    finally:
        replica.leading = False


def test_a_dead_informer_thread_is_restarted_and_resyncs():
    store, replica, manager, controller = running("informer-once")
    try:
        create(store, "pods", pod_named("first"))            # the informer dies on this change
        wait_for("the informer restarted", lambda: manager.status(counts=True)["restartCounts"].get("informer"))
        wait_for("the change it died on is not lost", lambda: "first" in controller.done)
        create(store, "pods", pod_named("second"))
        wait_for("later changes still arrive", lambda: "second" in controller.done)
        assert manager.status()["active"]
    finally:
        replica.leading = False


def test_a_thread_dying_over_and_over_shows_as_dead_not_active():
    store, replica, manager, controller = running("worker-always")
    try:
        status = wait_for("the crash loop shows", lambda: (lambda s: s if "recorder-0" in s["deadThreads"] and
                                                          s["threadRestarts"] >= 3 else None)(manager.status()))
        assert status["active"] is False and status["epoch"] is not None
        families = {f.name: f for f in ReplicaCollector(replica_with(manager))._controllers()}
        [sample] = families["shepherd_controller_thread_restarts"].samples
        assert sample.labels == {"thread": "recorder-0"} and sample.value >= 3
        assert families["shepherd_controller_dead_threads"].samples[0].value == 1
        assert families["shepherd_controllers_active"].samples[0].value == 0
    finally:
        replica.leading = False
    wait_for("stopped", lambda: manager.status()["epoch"] is None)


def replica_with(manager):
    class Reporting:
        controller_status = manager.status
    return Reporting()


def test_poisoned_objects_cost_only_themselves_with_every_controller_running():
    store = MemoryStore()
    replica = MemoryReplica(store)
    manager = ControllerManager(replica, default_factories())
    try:
        wait_for("controllers active", lambda: manager.status()["active"] and manager.status()["controllers"])
        create(store, "nodes", node("good"))
        bad = node("bad")
        bad["status"]["conditions"] = 1               # what killed the informer thread before
        plant(store, "nodes", bad)
        broke = node("broke")
        broke["status"]["allocatable"] = 1            # what stopped all scheduling before
        plant(store, "nodes", broke)
        create(store, "services", service("web", "web"))
        create(store, "services", service("api", "api"))
        create(store, "pods", running_pod("web-1", "web", "10.0.0.1"))
        plant(store, "pods", running_pod("web-bad", "web", {"a": 1}))   # what froze web's endpoints
        for i in range(5):
            create(store, "pods", pod("pending-%d" % i))
        wait_for("every good pending pod bound", lambda: all(
            (store.get("pods", "default", "pending-%d" % i)["spec"].get("nodeName") == "good") for i in range(5)))
        wait_for("web's endpoints list its good pod", lambda: endpoint_ips(store, "web") == ["10.0.0.1"])
        create(store, "pods", running_pod("api-1", "api", "10.0.1.1"))
        create(store, "pods", running_pod("web-2", "web", "10.0.0.2"))
        wait_for("other services' endpoints still follow", lambda: endpoint_ips(store, "api") == ["10.0.1.1"])
        wait_for("web's endpoints still follow", lambda: endpoint_ips(store, "web") == ["10.0.0.1", "10.0.0.2"])
        wait_for("an event on the bad node", lambda: fault_events(store, "bad"))
        wait_for("an event on the bad pod", lambda: fault_events(store, "web-bad"))
        status = manager.status(counts=True)
        assert status["active"] and status["threadRestarts"] == 0, "nothing had to die"
        named = {(c[0], c[2], c[4]) for c in status["errorCounts"]}
        assert {("scheduler", "nodes", "bad"), ("scheduler", "nodes", "broke"),
                ("endpoints", "pods", "web-bad")} <= named
        families = {f.name: f for f in ReplicaCollector(replica_with(manager))._controllers()}
        labels = [s.labels for s in families["shepherd_controller_errors"].samples]
        assert {"controller": "endpoints", "stage": "reconcile", "resource": "pods", "namespace": "default",
                "name": "web-bad"} in labels
        assert any(lab["controller"] == "scheduler" and lab["name"] == "bad" for lab in labels)
    finally:
        replica.leading = False
