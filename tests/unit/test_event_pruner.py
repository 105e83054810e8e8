"""Event pruner against an in-memory store: a bounded number of events, none older
than the TTL, deletes batched, expiry driven by delayed re-queues."""
import datetime

from controller_kit import CountingStore
from shepherd_ha.controllers.event_pruner import EventPruner, event_time
from shepherd_ha.controllers.events import EventRecorder
from shepherd_ha.controllers.informer import Informer
from shepherd_ha.controllers.settings import ControllerSettings

EPOCH = 1767225600.0      # 2026-01-01T00:00:00Z


class FakeClock:
    """One fake time source: monotonic for the queue, wall = EPOCH + the same seconds."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def wall(self):
        return EPOCH + self.now

    def rfc3339(self):
        return datetime.datetime.fromtimestamp(self.wall(), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")




class Harness:
    def __init__(self, ttl=3600.0, max_events=100):
        self.clock = FakeClock()
        self.store = CountingStore(clock=self.clock)
        settings = ControllerSettings(event_ttl=ttl, event_max=max_events)
        self.pruner = EventPruner(self.store, None, settings, wall=self.clock.wall)
        self.informer = Informer(self.store, [self.pruner])
        self.informer.start_from_snapshot()
        self.recorder = EventRecorder(self.store, "test", now=self.clock.rfc3339)
        self.n = 0

    def settle(self):
        for _ in range(50):
            self.informer.pump()
            if not self.pruner.run_until_idle():
                return
        raise AssertionError("pruner never settled")

    def emit(self, count=1):
        for _ in range(count):
            self.n += 1
            target = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p%d" % self.n, "namespace": "default",
                                                                    "uid": "u%d" % self.n}}
            self.recorder.emit(target, "Scheduled", "bound to n1")

    def advance(self, seconds):
        self.clock.now += seconds
        self.settle()

    def names(self):
        return sorted(e["involvedObject"]["name"] for e in self.store.list("events"))

    def deletes(self):
        return [c for c in self.store.submitted if c["type"] == "group"]


def test_event_time_parses_rfc3339_and_falls_back():
    assert event_time({"lastTimestamp": "2026-01-01T00:00:00Z"}) == EPOCH
    assert event_time({"lastTimestamp": "2026-01-01T01:00:00+01:00"}) == EPOCH
    assert event_time({"lastTimestamp": None, "firstTimestamp": "2026-01-01T00:00:10Z"}) == EPOCH + 10
    assert event_time({"metadata": {"creationTimestamp": "2026-01-01T00:00:01Z"}}) == EPOCH + 1
    assert event_time({"lastTimestamp": "yesterday"}) == 0.0


def test_events_older_than_the_ttl_are_deleted_by_a_delayed_pass():
    h = Harness(ttl=60)
    h.emit(5)
    h.advance(30)
    h.emit(3)
    h.settle()
    assert len(h.store.list("events")) == 8 and not h.deletes()
    h.advance(29)
    assert len(h.store.list("events")) == 8, "none is 60 s old yet"
    h.advance(1)
    assert h.names() == ["p6", "p7", "p8"]
    assert len(h.deletes()) == 1 and len(h.deletes()[0]["commands"]) == 5, "one write_many for the batch"
    assert list(h.pruner.sentences)[-1] == "deleted 5 event(s): 5 older than 60s, 0 over the limit of 100; 3 kept"
    h.advance(30)
    assert h.names() == []


def test_a_repeated_event_is_young_again():
    h = Harness(ttl=60)
    h.emit(1)
    h.advance(50)
    target = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p1", "namespace": "default", "uid": "u1"}}
    again = h.recorder.emit(target, "Scheduled", "bound to n1")
    assert again["count"] == 2
    h.advance(20)
    assert h.names() == ["p1"]
    h.advance(40)
    assert h.names() == []


def test_at_most_event_max_oldest_first():
    h = Harness(max_events=20)
    for _ in range(25):
        h.emit(1)
        h.clock.now += 1
    h.settle()
    names = h.names()
    assert len(names) <= 20
    # The oldest went first: down to 90% of the limit, so a steady stream is not a delete per event.
    assert names == sorted("p%d" % i for i in range(8, 26))
    assert len(h.deletes()) == 1
    h.emit(2)
    h.settle()
    assert len(h.store.list("events")) == 20 and len(h.deletes()) == 1
    h.emit(1)
    h.settle()
    assert len(h.store.list("events")) == 18 and len(h.deletes()) == 2


def test_a_new_leader_rebuilds_its_index_and_prunes_what_it_finds():
    h = Harness(ttl=60, max_events=10)
    # Written while no pruner ran: 15 events, some old.
    for _ in range(15):
        h.emit(1)
        h.clock.now += 10
    settings = ControllerSettings(event_ttl=60, event_max=10)
    fresh = EventPruner(h.store, None, settings, wall=h.clock.wall)
    informer = Informer(h.store, [fresh])
    informer.start_from_snapshot()
    fresh.run_until_idle()
    left = h.store.list("events")
    assert len(left) <= 10
    assert all(event_time(e) > h.clock.wall() - 60 for e in left)


def test_deletes_are_fenced_for_a_deposed_leader():
    h = Harness(ttl=60)
    h.emit(3)
    h.settle()
    h.store.apply({"type": "claim", "term": 9, "replica": "other"})
    h.advance(61)
    assert len(h.store.list("events")) == 3
    assert h.store.fsm.fenced_rejections >= 1
