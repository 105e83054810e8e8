"""The longest pause of the Raft tick is measured and reported: a tick held back on purpose
shows in /metrics and in the replica report as a gap at least as long as the hold."""
import threading
import time

import pytest

from shepherd_ha.api.app import create_app
from shepherd_ha.cli.local_cluster import find_base_port
from shepherd_ha.store.raft_node import RaftSettings
from shepherd_ha.store.replica import Replica
from shepherd_ha.store.tick_gaps import TickGapMeter


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_the_longest_gap_between_tick_starts_is_kept_for_the_window():
    clock = Clock()
    meter = TickGapMeter(window=60, clock=clock)
    for gap in (0.0, 0.05, 0.05, 0.7, 0.05):
        clock.now += gap
        meter.tick()
    shot = meter.snapshot()
    assert shot["maxSeconds"] == pytest.approx(0.7)
    assert shot["count"] == 4 and shot["sumSeconds"] == pytest.approx(0.85)
    assert dict(shot["buckets"])[0.05] == 3 and dict(shot["buckets"])[1.0] == 4
    clock.now += 70                    # next window: the previous one still counts
    meter.tick()
    assert meter.snapshot()["maxSeconds"] == pytest.approx(70)
    for _ in range(3):                 # two windows of 50 ms ticks later, the long gaps are gone
        for _ in range(1200):
            clock.now += 0.05
            meter.tick()
    assert meter.snapshot()["maxSeconds"] == pytest.approx(0.05)
    assert meter.snapshot()["longestSeconds"] == pytest.approx(70)


def test_a_tick_late_right_now_counts_before_it_happens():
    clock = Clock()
    meter = TickGapMeter(window=60, clock=clock)
    meter.tick()
    clock.now += 3.0                   # the tick thread is stuck: no tick since
    assert meter.snapshot()["maxSeconds"] == pytest.approx(3.0)


def test_a_gap_as_long_as_the_election_timeout_is_logged_at_most_every_ten_seconds(caplog):
    clock = Clock()
    meter = TickGapMeter(window=60, clock=clock, warn_after=0.3)
    for gap in (0.0, 0.05, 0.29, 0.45, 0.05, 0.6, 0.7):
        clock.now += gap
        meter.tick()
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and "stood still for 0.45 s" in warned[0], warned
    clock.now += 11
    meter.tick()                       # an 11 s gap, after the quiet period: said, with the two skipped
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 2 and "stood still for 11.00 s" in warned[1] and "2 more such gap(s)" in warned[1]
    assert TickGapMeter(clock=clock).warn_after is None      # off unless asked for


@pytest.fixture
def replica(tmp_path):
    port = find_base_port(1)
    settings = RaftSettings(self_address="127.0.0.1:%d" % (port + 100), peer_addresses=[],
                            data_dir=str(tmp_path), password="x", salt="00112233445566778899aabbccddeeff")
    replica = Replica("r1", settings, [])
    try:
        deadline = time.monotonic() + 20
        while replica.node.leader_address() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert replica.node.leader_address() is not None
        while replica.node.tick_gaps.snapshot()["loading"] and time.monotonic() < deadline:
            time.sleep(0.05)           # gaps count once the store is loaded (onReady)
        assert not replica.node.tick_gaps.snapshot()["loading"]
        yield replica
    finally:
        replica.close()


def _metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("%s not in /metrics" % name)


def test_a_blocked_tick_thread_shows_in_metrics_and_the_replica_report(replica):
    hold = 0.4
    held, released = threading.Event(), threading.Event()

    def block_once():
        if not held.is_set():
            held.set()
            time.sleep(hold)           # on the tick thread: Raft's next tick starts late
            released.set()
    replica.node.syncobj.addOnTickCallback(block_once)
    assert released.wait(10)
    ticks = replica.node.tick_gaps.snapshot()["count"]
    deadline = time.monotonic() + 10
    while replica.node.tick_gaps.snapshot()["count"] < ticks + 3 and time.monotonic() < deadline:
        time.sleep(0.05)               # a few ticks after the hold
    client = create_app(replica).test_client()
    status = client.get("/shepherd/v1/replica").get_json()
    assert status["tickGap"]["maxSeconds"] >= hold
    assert status["tickGap"]["longestSeconds"] >= hold
    log = status["raftLog"]             # the Raft log since the last dump, and what of it is in memory
    assert log["entries"] >= 1 and 1 <= log["entriesInMemory"] <= log["entries"], log
    assert 0 < log["bytesInMemory"] <= log["bytes"], log
    metrics = client.get("/metrics").get_data(as_text=True)
    assert _metric(metrics, "shepherd_raft_tick_gap_max_seconds") >= hold
    assert _metric(metrics, "shepherd_raft_tick_gap_seconds_count") >= ticks + 3, "the ticks after the hold"
    # the held tick is above the 0.3 s bucket
    assert _metric(metrics, 'shepherd_raft_tick_gap_seconds_bucket{le="0.3"}') < \
        _metric(metrics, 'shepherd_raft_tick_gap_seconds_bucket{le="+Inf"}')


def test_the_load_of_a_starting_store_is_kept_apart_until_it_is_loaded(caplog):
    clock = Clock()
    meter = TickGapMeter(window=60, clock=clock, warn_after=1.0, loading=True)
    meter.tick()
    clock.now += 12.0                  # loading the dump inside the first tick
    shot = meter.snapshot()
    assert shot["loading"] and shot["maxSeconds"] == 0 and shot["startupSeconds"] == pytest.approx(12.0)
    meter.tick()
    clock.now += 3.0                   # replaying the journal
    meter.loaded()
    for _ in range(10):
        clock.now += 0.05
        meter.tick()
    shot = meter.snapshot()
    assert not shot["loading"] and shot["maxSeconds"] == pytest.approx(0.05)
    assert shot["startupSeconds"] == pytest.approx(12.0) and shot["count"] == 10
    assert not [r for r in caplog.records if r.levelname == "WARNING"], "the load is no stall"
    clock.now += 1.5                   # a running store's stall counts again
    meter.tick()
    assert meter.snapshot()["maxSeconds"] == pytest.approx(1.5)


def test_gaps_count_a_minute_after_the_first_tick_even_if_never_loaded():
    clock = Clock()
    meter = TickGapMeter(window=60, clock=clock, loading=True)
    for _ in range(61):
        meter.tick()
        clock.now += 1.0
    clock.now += 2.0
    meter.tick()
    shot = meter.snapshot()
    assert not shot["loading"] and shot["maxSeconds"] == pytest.approx(3.0)
    assert shot["count"] == 1, "only the gap after the load ended is counted"


def test_a_tick_thread_stuck_in_its_load_shows_once_the_load_limit_is_past():
    clock = Clock()
    meter = TickGapMeter(window=60, clock=clock, loading=True)
    meter.tick()
    clock.now += 30.0
    assert meter.snapshot()["maxSeconds"] == 0 and meter.snapshot()["startupSeconds"] == pytest.approx(30.0)
    clock.now += 45.0                  # never ticked again: stuck, not loading
    shot = meter.snapshot()
    assert not shot["loading"] and shot["maxSeconds"] == pytest.approx(75.0)
