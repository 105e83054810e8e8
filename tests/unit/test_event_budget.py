"""The controllers' events are rate limited (--event-qps, --event-burst): over the budget an
event is dropped and counted, and a binding never waits for one."""
import pytest

from shepherd_ha.api.metrics import ReplicaCollector
from shepherd_ha.controllers.events import EventBudget, EventBudgets, EventRecorder
from shepherd_ha.controllers.faults import REASON, ControllerFaults
from shepherd_ha.controllers.registry import default_factories
from shepherd_ha.controllers.settings import ControllerSettings
from shepherd_ha.controllers.store_access import MemoryStore
from shepherd_ha.options import ConfigError

from controller_kit import FakeClock, wait_for
from test_scheduler_support import Harness, node, pod


def events(store, reason):
    return [e for e in store.list("events") if e["reason"] == reason]


def test_a_recorder_writes_its_burst_then_drops_and_counts_until_tokens_come_back():
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    budget = EventBudget(2.0, 3, clock)
    recorder = EventRecorder(store, "test", budget=budget)
    subject = store.list("namespaces")[0]
    written = [recorder.emit(subject, "Noticed", "thing %d" % i) for i in range(5)]
    assert [e is not None for e in written] == [True, True, True, False, False]
    assert len(events(store, "Noticed")) == 3 and budget.dropped == 2
    clock.now += 0.5                     # one token at 2/s
    assert recorder.emit(subject, "Noticed", "thing 5") is not None
    assert recorder.emit(subject, "Noticed", "thing 6") is None
    assert len(events(store, "Noticed")) == 4 and budget.dropped == 3


def test_the_scheduler_binds_every_pod_and_writes_only_the_events_the_budget_admits():
    h = Harness()
    budget = EventBudget(1.0, 5, h.clock)
    h.recorder.budget = budget
    h.create("nodes", node("n1", cpu="64", memory="256Gi"))
    h.create("pods", *[pod("p%02d" % i, cpu="10m") for i in range(20)])
    h.run()
    assert all(h.node_of("p%02d" % i) == "n1" for i in range(20))
    assert all(h.condition("p%02d" % i)["status"] == "True" for i in range(20))
    assert len(h.events("Scheduled")) == 5 and budget.dropped == 15


def test_without_a_budget_every_event_is_written():
    h = Harness()
    assert h.recorder.budget is None
    h.create("nodes", node("n1", cpu="64", memory="256Gi"), node("n2", cpu="64", memory="256Gi"))
    h.create("pods", *[pod("p%03d" % i, cpu="10m") for i in range(150)])
    h.run()
    assert len(h.events("Scheduled")) == 150


class _Replica:
    """What ReplicaCollector reads of a replica, for the controllers' part only."""

    def __init__(self, status):
        self.controller_status = lambda counts=False: status


def test_dropped_events_are_exported_in_metrics_per_component():
    collector = ReplicaCollector.__new__(ReplicaCollector)
    collector.replica = _Replica({"active": True, "deadThreads": [],
                                  "eventsDropped": {"shepherd-scheduler": 7, "shepherd-controller-manager": 0}})
    [family] = [m for m in collector._controllers() if m.name == "shepherd_controller_events_dropped"]
    assert {s.labels["component"]: s.value for s in family.samples} == {
        "shepherd-scheduler": 7, "shepherd-controller-manager": 0}


def test_the_schedulers_events_cannot_crowd_out_the_controller_managers():
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    budgets = EventBudgets(1.0, 2, clock)
    [build] = default_factories(ControllerSettings(), budgets)
    controllers = build(store)
    by_component = {c.events.component: c.events for c in controllers if getattr(c, "events", None) is not None}
    assert set(by_component) == {"shepherd-scheduler", "shepherd-controller-manager"}
    subject = store.list("namespaces")[0]
    scheduler, manager = by_component["shepherd-scheduler"], by_component["shepherd-controller-manager"]
    assert [scheduler.emit(subject, "Scheduled", "pod %d" % i) is not None for i in range(3)] == [True, True, False]
    assert manager.emit(subject, "NodeNotReady", "n1 stopped", "Warning") is not None
    assert budgets.dropped() == {"shepherd-scheduler": 1, "shepherd-controller-manager": 0}


def test_a_fault_event_over_the_budget_does_not_hold_off_the_next_one():
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    recorder = EventRecorder(store, "test", budget=EventBudget(1.0, 1, clock))
    subject = store.list("namespaces")[0]
    assert recorder.emit(subject, "Other", "spends the only token") is not None
    faults = ControllerFaults(clock=clock)
    faults.object_failed("scheduler", "reconcile", "namespaces", subject, ValueError("bad"), recorder)
    wait_for("the dropped fault event", lambda: recorder.budget.dropped == 1, timeout=10)
    clock.now += 1.0                     # a token again, well within EVENT_INTERVAL

    def fails_again_and_is_reported():
        # (The emitter thread forgets the dropped one just after the drop: try until it has.)
        faults.object_failed("scheduler", "reconcile", "namespaces", subject, ValueError("bad"), recorder)
        return [e for e in store.list("events") if e["reason"] == REASON]
    wait_for("the fault event", fails_again_and_is_reported, timeout=10)


@pytest.mark.parametrize("qps, burst", [(0, 100), (50, 0)])
def test_a_budget_that_drops_every_event_is_a_config_error(qps, burst):
    with pytest.raises(ConfigError, match="--event-qps"):
        ControllerSettings(event_qps=qps, event_burst=burst).validate()
