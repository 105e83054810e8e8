"""The per-replica watch log: contiguous revisions, bounded, 410 when too old."""
import threading
import time

import pytest

from shepherd_ha.store.fsm import Change
from shepherd_ha.store.watch_log import WatchExpired, WatchLog


def changes(first, last):
    return [Change(r, "ADDED", "pods", {"metadata": {"name": "p%d" % r}}, None) for r in range(first, last + 1)]


def test_since_returns_changes_after_revision_in_order():
    log = WatchLog(100)
    log.append(changes(1, 5))
    assert [c.revision for c in log.since(2)] == [3, 4, 5]
    assert log.since(5) == []
    assert [c.revision for c in log.since(0)] == [1, 2, 3, 4, 5]


def test_trimmed_log_expires_old_revisions():
    log = WatchLog(3)
    log.append(changes(1, 10))
    assert [c.revision for c in log.since(7)] == [8, 9, 10]
    with pytest.raises(WatchExpired) as info:
        log.since(6)
    assert "list again" in str(info.value)


def test_reset_after_snapshot_expires_everything_before_it():
    log = WatchLog(100)
    log.append(changes(1, 3))
    log.reset(50)
    with pytest.raises(WatchExpired):
        log.since(3)
    assert log.since(50) == []
    log.append(changes(51, 52))
    assert [c.revision for c in log.since(50)] == [51, 52]


def test_restart_from_snapshot_serves_from_snapshot_revision():
    log = WatchLog(100)
    log.reset(20)       # state loaded from a dump at revision 20
    assert log.oldest_servable() == 20
    with pytest.raises(WatchExpired):
        log.since(19)


def test_wait_beyond_wakes_on_append():
    log = WatchLog(100)
    log.append(changes(1, 1))
    woke = []

    def waiter():
        start = time.monotonic()
        log.wait_beyond(1, 5.0)
        woke.append(time.monotonic() - start)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.1)
    log.append(changes(2, 2))
    t.join(5)
    assert woke and woke[0] < 2.0


def test_wait_beyond_times_out():
    log = WatchLog(100)
    start = time.monotonic()
    log.wait_beyond(0, 0.2)
    assert 0.15 < time.monotonic() - start < 2.0


def pod_on(revision, name, node, kind="ADDED", previous_node=None):
    def obj(n):
        spec = {"nodeName": n} if n is not None else {}
        return {"metadata": {"name": name}, "spec": spec}
    previous = obj(previous_node) if kind != "ADDED" else None
    return Change(revision, kind, "pods", obj(node) if kind != "DELETED" else None, previous)


def test_an_interest_is_flagged_only_by_changes_of_its_value_before_or_after():
    log = WatchLog(100)
    mine = log.register("pods", "spec.nodeName", "node-1")
    assert log.since_for(0, mine) == ([], 0)              # flagged at first: reads the (empty) log
    log.append([pod_on(1, "a", "node-2"), pod_on(2, "b", None)])
    assert log.since_for(0, mine) == ([], 2)              # nothing of node-1: covered up to 2 unread
    log.append([pod_on(3, "b", "node-1", "MODIFIED", previous_node=None)])      # bound to node-1
    got, covered = log.since_for(2, mine)
    assert [c.revision for c in got] == [3] and covered == 3
    log.append([Change(4, "ADDED", "services", {"metadata": {"name": "s"}, "spec": {"nodeName": "node-1"}}, None)])
    assert log.since_for(3, mine) == ([], 4)              # another resource's field is not this one
    log.append([pod_on(5, "b", None, "DELETED", previous_node="node-1")])     # gone: only its previous names it
    assert [c.revision for c in log.since_for(4, mine)[0]] == [5]


def test_an_interest_waits_for_its_own_changes_and_wakes_on_reset_and_poke():
    log = WatchLog(100)
    mine = log.register("pods", "spec.nodeName", "node-1")
    log.since_for(0, mine)
    log.append([pod_on(1, "a", "node-2")])
    start = time.monotonic()
    log.wait_interest(mine, 0.2)
    assert time.monotonic() - start >= 0.15                # not woken by another node's pod
    log.append([pod_on(2, "b", "node-1")])
    start = time.monotonic()
    log.wait_interest(mine, 5.0)
    assert time.monotonic() - start < 1.0
    log.since_for(1, mine)
    log.poke()
    assert mine.flag.is_set()
    log.since_for(2, mine)
    log.reset(50)
    assert mine.flag.is_set()
    with pytest.raises(WatchExpired):                      # a reset still ends the watch with a 410
        log.since_for(2, mine)


def test_stored_bytes_flag_every_interest_and_unregister_forgets():
    log = WatchLog(100)
    a, b = log.register("pods", "spec.nodeName", "node-1"), log.register("pods", "spec.nodeName", "node-2")
    log.since_for(0, a), log.since_for(0, b)
    log.append([Change(1, "ADDED", "pods", b"\x00compressed", None)])      # cannot tell: wakes them all
    assert a.flag.is_set() and b.flag.is_set()
    a.flag.clear(), b.flag.clear()
    log.unregister(a)
    log.unregister(a)                                      # again: nothing
    assert log.interests() == 1
    log.append([pod_on(2, "x", "node-1")])                 # a's node, but a is gone
    assert not a.flag.is_set() and not b.flag.is_set()
    log.unregister(b)
    assert log.interests() == 0


def test_an_interest_in_a_resource_sleeps_through_other_resources():
    """A watch that names no indexed value is woken by every change of its resource, and
    by none of another: a watch of ConfigMaps sleeps through a rollout's pod writes."""
    log = WatchLog(100)
    config_maps, pods = log.register("configmaps"), log.register("pods")
    node = log.register("pods", "spec.nodeName", "node-1")
    for interest in (config_maps, pods, node):
        log.since_for(0, interest)
    log.append([pod_on(1, "a", "node-2"), pod_on(2, "b", "node-2")])
    assert pods.flag.is_set() and not config_maps.flag.is_set() and not node.flag.is_set()
    assert [c.revision for c in log.since_for(0, pods)[0]] == [1, 2]
    assert log.since_for(0, config_maps) == ([], 2)        # covered up to 2 without reading them
    log.append([Change(3, "ADDED", "configmaps", {"metadata": {"name": "c"}}, None)])
    got, covered = log.since_for(2, config_maps)
    assert [c.resource for c in got] == ["configmaps"] and covered == 3
    assert not pods.flag.is_set()
    log.poke()
    assert config_maps.flag.is_set() and pods.flag.is_set() and node.flag.is_set()
    assert log.interests() == 3
    for interest in (config_maps, pods, node):
        log.since_for(3, interest)                         # read: flags down
    for interest in (config_maps, pods, node, pods):       # the last: again, nothing
        log.unregister(interest)
    assert log.interests() == 0
    log.append([pod_on(4, "c", "node-1")])                 # nobody left to flag
    assert not pods.flag.is_set() and not node.flag.is_set()
