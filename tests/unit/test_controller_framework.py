"""The controller plumbing: work queue, informer, controller base, event recorder."""
import pytest

from shepherd_ha.controllers.controller import Controller, Retry, key_of
from shepherd_ha.controllers.events import EventRecorder
from shepherd_ha.controllers.informer import Informer
from shepherd_ha.controllers.store_access import MemoryStore
from shepherd_ha.workqueue import WorkQueue


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def pod(name, labels=None):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default",
                                                           "uid": "u-" + name, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}


def create(store, resource, obj):
    return store.apply({"type": "write", "key": None, "ops": [{"op": "create", "resource": resource,
                                                               "object": obj}]})


def test_queue_deduplicates_and_keeps_order():
    q = WorkQueue()
    for k in ["a", "b", "a", "c", "b"]:
        q.add(k)
    assert [q.get(0), q.get(0), q.get(0), q.get(0)] == ["a", "b", "c", None]


def test_key_added_while_processing_is_processed_again_after():
    q = WorkQueue()
    q.add("a")
    assert q.get(0) == "a"
    q.add("a")
    assert q.get(0) is None, "never handed to two workers at once"
    q.done("a")
    assert q.get(0) == "a"


def test_a_batched_key_waits_for_the_period_and_a_burst_is_one_pass():
    clock = FakeClock()
    q = WorkQueue(clock=clock)
    q.add_batched("a", 0.5)
    clock.now += 0.3
    q.add_batched("a", 0.5)         # within the first one's period: no later than that
    assert q.get(0) is None
    clock.now += 0.2
    assert q.get(0) == "a"
    assert q.get(0) is None, "the burst was one pass"
    q.done("a")
    q.add("b")
    q.add_batched("b", 0.5)         # already ready: it stays ready, and is not queued twice
    assert q.get(0) == "b"
    q.done("b")
    clock.now += 1.0
    assert q.get(0) is None


def test_a_controller_batches_the_changes_of_the_resources_it_names():
    clock = FakeClock()
    store = MemoryStore(clock=clock)

    class Counting(Controller):
        watches = ("configmaps", "pods")
        batch_periods = {"pods": 0.5}
        reconciled = []

        def keys_for(self, change):
            return ["k"]

        def reconcile(self, key):
            self.reconciled.append(key)

    ctl = Counting(store)
    informer = Informer(store, [ctl])
    informer.start_from_snapshot()
    for i in range(5):
        create(store, "pods", pod("p%d" % i))
    informer.pump()
    ctl.run_until_idle()
    assert ctl.reconciled == [], "pod changes wait for the batch period"
    clock.now += 0.5
    ctl.run_until_idle()
    assert ctl.reconciled == ["k"], "five pod changes, one reconcile"
    create(store, "configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "c", "namespace": "default"}})
    informer.pump()
    ctl.run_until_idle()
    assert ctl.reconciled == ["k", "k"], "a resource without a period is handled at once"


def test_backoff_grows_and_forget_resets():
    clock = FakeClock()
    q = WorkQueue(base_delay=0.25, max_delay=4.0, clock=clock)
    q.add_with_backoff("a")
    assert q.get(0) is None
    clock.now += 0.25
    assert q.get(0) == "a"
    q.done("a")
    q.add_with_backoff("a")
    clock.now += 0.25
    assert q.get(0) is None, "second failure waits 0.5 s"
    clock.now += 0.25
    assert q.get(0) == "a"
    q.done("a")
    q.forget("a")
    q.add_with_backoff("a")
    clock.now += 0.25
    assert q.get(0) == "a"


class LabelCounter(Controller):
    """Test controller: counts reconciles; fails once for pods labelled flaky."""
    name = "label-counter"
    watches = ("pods",)

    def __init__(self, store):
        super().__init__(store)
        self.seen = []
        self.failed = set()

    def reconcile(self, key):
        self.seen.append(key)
        obj = self.store.get("pods", key[0], key[1])
        if obj and obj["metadata"]["labels"].get("flaky") and key not in self.failed:
            self.failed.add(key)
            raise Retry("flaky", delay=0)
        return "looked at pod %s/%s" % key


def test_informer_feeds_changes_as_keys_and_retries():
    store = MemoryStore()
    create(store, "pods", pod("before"))
    controller = LabelCounter(store)
    informer = Informer(store, [controller])
    informer.start_from_snapshot()
    controller.run_until_idle()
    assert controller.seen == [("default", "before")], "the snapshot queues existing objects"
    create(store, "pods", pod("flaky", {"flaky": "yes"}))
    create(store, "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "uid": "x"}})
    assert informer.pump() == 2
    controller.run_until_idle()
    assert controller.seen[1:] == [("default", "flaky"), ("default", "flaky")]
    assert list(controller.sentences)[-1] == "looked at pod default/flaky"


def test_informer_resyncs_when_watch_log_was_reset():
    store = MemoryStore()
    controller = LabelCounter(store)
    informer = Informer(store, [controller])
    informer.start_from_snapshot()
    create(store, "pods", pod("a"))
    store.watch_log.reset(store.fsm.revision + 100)     # a snapshot replaced the state wholesale
    informer.pump()
    controller.run_until_idle()
    assert ("default", "a") in controller.seen


def test_periodic_resync_requeues_everything():
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    create(store, "pods", pod("a"))
    controller = LabelCounter(store)
    controller.resync()
    controller.run_until_idle()
    controller.maybe_resync()
    assert controller.run_until_idle() == 0
    clock.now += controller.resync_period
    controller.maybe_resync()
    assert controller.run_until_idle() == 1


def test_controller_writes_are_fenced_by_epoch():
    store = MemoryStore(term=1, replica="r1")
    store.apply({"type": "claim", "term": 2, "replica": "r2"})    # a newer leader claimed
    controller = LabelCounter(store)
    with pytest.raises(Retry, match="Fenced"):
        controller.write([{"op": "create", "resource": "pods", "object": pod("late")}])
    assert store.get("pods", "default", "late") is None
    assert store.fsm.fenced_rejections == 1


def test_event_recorder_aggregates_repeats():
    store = MemoryStore()
    create(store, "pods", pod("a"))
    target = store.get("pods", "default", "a")
    times = iter(["2026-01-01T00:00:0%dZ" % i for i in range(5)])
    recorder = EventRecorder(store, "test", now=lambda: next(times))
    first = recorder.emit(target, "FailedScheduling", "0/3 nodes available", "Warning")
    second = recorder.emit(target, "FailedScheduling", "0/3 nodes available", "Warning")
    other = recorder.emit(target, "Scheduled", "bound to n1")
    events = store.list("events", "default")
    assert len(events) == 2
    assert second["metadata"]["name"] == first["metadata"]["name"] and second["count"] == 2
    assert second["firstTimestamp"] == "2026-01-01T00:00:00Z"
    assert second["lastTimestamp"] == "2026-01-01T00:00:01Z"
    assert other["involvedObject"]["uid"] == "u-a" and other["type"] == "Normal"


def test_key_of():
    assert key_of(pod("x")) == ("default", "x")
    assert key_of({"metadata": {"name": "n1"}}) == ("", "n1")


def test_write_many_applies_each_write_on_its_own():
    store = MemoryStore()
    create(store, "pods", pod("taken"))
    results = store.write_many([
        [{"op": "create", "resource": "pods", "object": pod("new")}],
        [{"op": "create", "resource": "pods", "object": pod("taken")}],
        [{"op": "create", "resource": "pods", "object": pod("also-new")}]])
    assert [r["ok"] for r in results] == [True, False, True]
    assert store.get("pods", "default", "also-new") is not None


def test_a_write_too_big_to_replicate_fails_alone_with_a_clear_reason():
    from shepherd_ha.store.entry_size import ENTRY_THRESHOLD
    store = MemoryStore()
    huge = dict(pod("huge"), metadata={"name": "huge", "namespace": "default",
                                       "annotations": {"blob": "x" * ENTRY_THRESHOLD}})
    results = store.write_many([
        [{"op": "create", "resource": "pods", "object": pod("before")}],
        [{"op": "create", "resource": "pods", "object": huge}],
        [{"op": "create", "resource": "pods", "object": pod("after")}]])
    assert [r["ok"] for r in results] == [True, False, True]
    assert results[1]["code"] == 413 and results[1]["message"].startswith("object too large to replicate")
    assert store.get("pods", "default", "huge") is None
    assert store.get("pods", "default", "after") is not None
    controller = LabelCounter(store)
    with pytest.raises(Retry, match="object too large to replicate: [0-9]+ bytes, limit %d" % ENTRY_THRESHOLD):
        controller.write([{"op": "create", "resource": "pods", "object": huge}])
    assert store.get("pods", "default", "huge") is None


def test_every_default_controller_is_freed_by_reference_counting():
    """A deposed leader's controllers must go when their epoch ends: the store's periodic
    gc.freeze() (store/gc_tuning.py) means objects in a reference cycle are never collected,
    so a controller in a cycle would keep its caches (the scheduler's index of every pod)
    for good, once per lost leadership."""
    import gc
    import weakref

    from shepherd_ha.controllers.registry import default_factories
    from shepherd_ha.controllers.store_access import MemoryStore

    store = MemoryStore()
    controllers = [c for factory in default_factories() for c in factory(store)]
    assert {"scheduler", "deployments", "endpoints"} <= {c.name for c in controllers}
    for controller in controllers:
        controller.resync()
        controller.run_until_idle()
    refs = {c.name: weakref.ref(c) for c in controllers}
    gc.disable()
    try:
        del controller, controllers
        alive = sorted(name for name, ref in refs.items() if ref() is not None)
    finally:
        gc.enable()
    assert alive == [], "held only by a reference cycle: %s" % alive
