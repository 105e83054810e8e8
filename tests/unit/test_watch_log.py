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
