"""A replica process stopped (SIGSTOP) for a while reports a Raft tick gap at least that long,
in /shepherd/v1/replica and /metrics; every replica's store is out of the collector's way."""
import os
import signal
import time

from .helpers import call, expect

STOPPED = 1.0


def _tick_gap(url):
    return expect(call("GET", url + "/shepherd/v1/replica"), 200)["tickGap"]


def _metric(url, name):
    for line in call("GET", url + "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("%s not in %s/metrics" % (name, url))


def _processes(pid):
    """The replica's processes: its supervisor and the children (store, API workers)."""
    with open("/proc/%d/task/%d/children" % (pid, pid)) as fh:
        return [pid] + [int(p) for p in fh.read().split()]


def _all_threads_stopped(pids):
    """SIGSTOP is delivered asynchronously: the stop counts from when every thread is in state T."""
    states = []
    for pid in pids:
        for task in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/stat" % (pid, task)) as fh:
                states.append(fh.read().rsplit(")", 1)[1].split()[0])
    return all(state == "T" for state in states)


def test_a_stopped_replica_reports_a_tick_gap_as_long_as_the_stop(make_cluster):
    cluster = make_cluster()
    cluster.start()
    for ident in cluster.ids:      # frozen once the journal was replayed (onReady), not 30 s later
        status = expect(call("GET", cluster.url(ident) + "/shepherd/v1/replica"), 200)
        assert status["gc"]["frozenObjects"] > 0, status["gc"]
    follower = cluster.followers()[0]
    url = cluster.url(follower)
    assert _tick_gap(url)["ticks"] > 0
    pids = _processes(cluster.lc.pid(follower))
    assert cluster.lc.signal(follower, signal.SIGSTOP)       # every process of the replica
    try:
        deadline = time.monotonic() + 10
        while not _all_threads_stopped(pids):
            assert time.monotonic() < deadline, "replica %s did not stop" % follower
            time.sleep(0.01)
        time.sleep(STOPPED)
    finally:
        cluster.lc.signal(follower, signal.SIGCONT)
    deadline = time.monotonic() + 10
    while _tick_gap(url)["longestSeconds"] < STOPPED and time.monotonic() < deadline:
        time.sleep(0.1)
    gap = _tick_gap(url)
    assert gap["maxSeconds"] >= STOPPED and gap["longestSeconds"] >= STOPPED, gap
    assert _metric(url, "shepherd_raft_tick_gap_max_seconds") >= STOPPED
