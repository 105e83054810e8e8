"""Group commit: concurrent writes share Raft entries, each gets its own result, dropped
groups are retried, a deposed leader's writers are answered at once, and the next group
is sent by the thread that delivered the previous result (the Raft tick thread)."""
import threading
import time

import pytest
from pysyncobj import FAIL_REASON

from shepherd_ha.store.group_commit import GroupCommitter
from shepherd_ha.store.raft_node import Unavailable


class FakeRaft:
    """Stands in for RaftNode: records what group commit sends; the test answers it."""

    class _Settings:
        peer_addresses = ["b:1", "c:1"]

    def __init__(self):
        self.settings = self._Settings()
        self.consumer = self
        self.sent = []               # (command, callback, thread id)
        self.cond = threading.Condition()

    def wait_for_leader(self, timeout):
        return True

    def connected_peers(self):
        return ["b:1", "c:1"]

    def apply_command(self, command, callback):
        with self.cond:
            self.sent.append((command, callback, threading.get_ident()))
            self.cond.notify_all()

    def wait_sent(self, count, timeout=5):
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.sent) >= count, timeout), \
                "only %d of %d groups sent" % (len(self.sent), count)
            return self.sent[count - 1]

    def commit(self, count, timeout=5):
        """Answer the count-th command sent as the FSM would; returns that command."""
        command, callback, _ = self.wait_sent(count, timeout)
        callback(apply_results(command), FAIL_REASON.SUCCESS)
        return command


def apply_results(command):
    """What the FSM returns: one result per member of a group, or the single result."""
    if command.get("type") == "group":
        return {"results": [{"echo": c["n"]} for c in command["commands"]]}
    return {"echo": command["n"]}


def submit_async(committer, n, results, timeout=5):
    def run():
        try:
            results[n] = committer.call({"n": n}, timeout)
        except Unavailable as exc:
            results[n] = exc
    t = threading.Thread(target=run)
    t.start()
    return t


@pytest.fixture
def raft():
    return FakeRaft()


def test_a_lone_write_is_sent_at_once_unwrapped(raft):
    committer = GroupCommitter(raft)
    results = {}
    t = submit_async(committer, 1, results)
    assert raft.commit(1) == {"n": 1}
    t.join(5)
    assert results[1] == {"echo": 1}


def test_writes_queued_behind_a_group_share_the_next_one_sent_by_the_answering_thread(raft):
    committer = GroupCommitter(raft)
    results = {}
    first = submit_async(committer, 0, results)
    raft.wait_sent(1)
    later = [submit_async(committer, n, results) for n in range(1, 6)]
    deadline = time.monotonic() + 5
    while len(committer._queue) < 5:            # all five wait behind the group in flight
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert len(raft.sent) == 1

    tick_thread = {}

    def answer():
        tick_thread["id"] = threading.get_ident()
        raft.commit(1)
    answering = threading.Thread(target=answer)
    answering.start()
    answering.join(5)
    group, _, sender = raft.wait_sent(2)
    assert group["type"] == "group" and [c["n"] for c in group["commands"]] == [1, 2, 3, 4, 5]
    assert sender == tick_thread["id"], "the next group should leave from the thread that answered the last"
    raft.commit(2)
    for t in [first] + later:
        t.join(5)
    assert results == {n: {"echo": n} for n in range(6)}, "every writer gets its own member's result"
    assert committer.commands_sent == 6 and committer.groups_sent == 2


def test_a_dropped_group_is_sent_again(raft):
    committer = GroupCommitter(raft)
    results = {}
    t = submit_async(committer, 7, results)
    command, callback, _ = raft.wait_sent(1)
    callback(None, FAIL_REASON.LEADER_CHANGED)          # Raft dropped it: retried with the same key
    assert raft.commit(2) == command
    t.join(5)
    assert results[7] == {"echo": 7}


def test_writers_in_flight_are_answered_when_leadership_is_lost(raft):
    committer = GroupCommitter(raft)
    results = {}
    t = submit_async(committer, 3, results, timeout=30)
    raft.wait_sent(1)
    started = time.monotonic()
    assert committer.abandon_in_flight() == 1
    t.join(5)
    assert isinstance(results[3], Unavailable) and results[3].outcome == "unknown"
    assert "stopped leading" in str(results[3])
    assert time.monotonic() - started < 2, "abandoned writers must not wait out their timeout"


def test_a_group_never_answered_stops_blocking_after_stale_after(raft):
    committer = GroupCommitter(raft, stale_after=0.3)
    results = {}
    submit_async(committer, 1, results, timeout=2)
    raft.wait_sent(1)                                  # never answered
    t = submit_async(committer, 2, results)
    assert raft.commit(2, timeout=3) == {"n": 2}
    t.join(5)
    assert results[2] == {"echo": 2}
