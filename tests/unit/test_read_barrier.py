"""Shared read barriers: a reader never reuses a barrier sent before it arrived."""
import threading
import time

import pytest

from shepherd_ha.store.raft_node import Unavailable
from shepherd_ha.store import commands
from shepherd_ha.store.read_barrier import ReadBarrier


class SlowRaft:
    """Records when each barrier was sent; each takes `delay` to commit."""

    def __init__(self, delay=0.1, fail=False):
        self.delay, self.fail = delay, fail
        self.sent = []
        self.lock = threading.Lock()

    def submit(self, command, timeout):
        assert command == commands.barrier()
        with self.lock:
            self.sent.append(time.monotonic())
        time.sleep(self.delay)
        if self.fail:
            raise Unavailable("no quorum", "not-applied")
        return {"ok": True}


def test_concurrent_readers_share_barriers():
    raft = SlowRaft(delay=0.1)
    barrier = ReadBarrier(raft.submit, timeout=2)
    arrivals = []

    def reader():
        arrivals.append(time.monotonic())
        barrier.wait()

    threads = [threading.Thread(target=reader) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert len(raft.sent) <= 3, "20 concurrent readers should share a couple of barriers"


def test_reader_waits_for_a_barrier_sent_after_it_arrived():
    raft = SlowRaft(delay=0.2)
    barrier = ReadBarrier(raft.submit, timeout=2)
    first = threading.Thread(target=barrier.wait)
    first.start()
    time.sleep(0.05)                 # a barrier is now in flight
    arrived = time.monotonic()
    barrier.wait()
    assert any(sent >= arrived for sent in raft.sent), "the late reader rode an older barrier"
    first.join(5)


def test_failed_barrier_raises_unavailable_with_a_hint():
    barrier = ReadBarrier(SlowRaft(delay=0.01, fail=True).submit, timeout=1)
    with pytest.raises(Unavailable) as info:
        barrier.wait()
    assert "resourceVersion=0" in str(info.value)
