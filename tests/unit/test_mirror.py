"""A worker's mirror of the store: applies the stream, wakes each writer at its revision."""
import threading

from shepherd_ha.store.fsm import ADDED, DELETED, Change
from shepherd_ha.store.mirror import Mirror


def obj(name, ns="default"):
    return {"metadata": {"name": name, "namespace": ns}}


def test_changes_apply_in_order_and_feed_its_watch_log():
    mirror = Mirror()
    mirror.apply_changes([Change(1, ADDED, "pods", obj("a"), None), Change(2, ADDED, "nodes", obj("n", None), None)])
    mirror.apply_changes([Change(2, ADDED, "pods", obj("late"), None)])      # already held: ignored
    mirror.apply_changes([Change(3, DELETED, "pods", None, obj("a"))])
    assert mirror.revision == 3 and mirror.get("pods", "default", "a") is None
    assert mirror.get("nodes", None, "n") is not None and mirror.count() == 1
    assert [c.revision for c in mirror.watch_log.since(0)] == [1, 2, 3]


def test_a_snapshot_replaces_everything_and_resets_the_watch_log():
    mirror = Mirror()
    mirror.apply_changes([Change(1, ADDED, "pods", obj("old"), None)])
    for frame in ({"kind": "snapshot-begin", "revision": 9},
                  {"kind": "snapshot-chunk", "resource": "pods", "objects": [obj("x"), obj("y", "other")]},
                  {"kind": "snapshot-end", "revision": 9}):
        mirror.apply_frame(frame)
    assert mirror.revision == 9 and mirror.watch_log.resets == 1
    assert sorted(o["metadata"]["name"] for o in mirror.list("pods")) == ["x", "y"]
    assert [o["metadata"]["name"] for o in mirror.list("pods", "other")] == ["y"]


def test_a_writer_is_woken_when_its_revision_arrives_and_not_before():
    mirror = Mirror()
    woken = {}
    waiters = [threading.Thread(target=lambda r=r: woken.__setitem__(r, mirror.wait_for(r, 5.0))) for r in (1, 2)]
    for t in waiters:
        t.start()
    mirror.apply_changes([Change(1, ADDED, "pods", obj("a"), None)])
    waiters[0].join(5)
    assert woken == {1: True}
    mirror.apply_changes([Change(2, ADDED, "pods", obj("b"), None)])
    waiters[1].join(5)
    assert woken == {1: True, 2: True}
    assert mirror.wait_for(2, 0.01) and not mirror.wait_for(3, 0.05)


def test_change_marks_move_only_when_those_resources_change():
    m = Mirror()
    m.replace({}, 0)
    kinds = ("roles", "rolebindings")
    before = m.change_marks(kinds)
    m.apply_changes([Change(1, ADDED, "pods", obj("p"), None)])
    assert m.change_marks(kinds) == before          # a pod write: the RBAC index stays
    m.apply_changes([Change(2, ADDED, "roles", obj("r"), None)])
    after = m.change_marks(kinds)
    assert after != before
    m.apply_changes([Change(3, DELETED, "roles", None, obj("r"))])
    assert m.change_marks(kinds) != after           # a delete moves it too
    marks = m.change_marks(kinds)
    m.replace({}, 3)
    assert m.change_marks(kinds) != marks           # a snapshot may have changed anything
