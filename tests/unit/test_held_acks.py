"""A follower's success acks wait for the journal sync of their tick, and an ack held while
the node moved on (new term, other leader, shorter log) is dropped, never sent stale."""
import pytest
from pysyncobj.syncobj import SyncObj

from shepherd_ha.store.pysyncobj_overrides import PipelinedSyncObj as _PipelinedSyncObj


class FakeLog(list):
    def __init__(self, last_index, events):
        super().__init__([(b"", i, 1) for i in range(1, last_index + 1)])
        self.events = events

    def sync(self):
        self.events.append(("sync",))
        return True


@pytest.fixture
def follower(monkeypatch):
    """A _PipelinedSyncObj's ack logic, without sockets or a tick thread."""
    events = []
    node = object.__new__(_PipelinedSyncObj)
    node._held_acks = {}
    node._SyncObj__raftLog = FakeLog(10, events)
    node._SyncObj__raftCurrentTerm = 3
    node._SyncObj__raftLeader = "leader-a"

    def sent(self, to, reset=False, nextNodeIdx=None, success=False):
        events.append(("ack", to, nextNodeIdx, success, reset))
    monkeypatch.setattr(SyncObj, "_SyncObj__sendNextNodeIdx", sent)
    return node, events


def test_success_acks_wait_for_the_sync_and_only_the_latest_goes_out(follower):
    node, events = follower
    node._SyncObj__sendNextNodeIdx("leader-a", nextNodeIdx=9, success=True)
    node._SyncObj__sendNextNodeIdx("leader-a", nextNodeIdx=11, success=True)
    assert events == [], "nothing leaves before the journal is synced"
    node._make_durable()
    assert events == [("sync",), ("ack", "leader-a", 11, True, False)]


def test_a_failure_reply_sends_held_acks_first_in_order(follower):
    node, events = follower
    node._SyncObj__sendNextNodeIdx("leader-a", nextNodeIdx=11, success=True)
    node._SyncObj__sendNextNodeIdx("leader-a", nextNodeIdx=5, success=False, reset=True)
    assert events == [("sync",), ("ack", "leader-a", 11, True, False), ("ack", "leader-a", 5, False, True)]


@pytest.mark.parametrize("moved_on", ["new term", "other leader", "shorter log"])
def test_an_ack_held_while_the_node_moved_on_is_dropped(follower, moved_on):
    node, events = follower
    node._SyncObj__sendNextNodeIdx("leader-a", nextNodeIdx=11, success=True)
    if moved_on == "new term":
        node._SyncObj__raftCurrentTerm = 4
    elif moved_on == "other leader":
        node._SyncObj__raftLeader = "leader-b"
    else:
        del node._SyncObj__raftLog[7:]            # a newer leader truncated entries 8-10
    node._make_durable()
    assert events == [("sync",)]
    assert node._held_acks == {}
