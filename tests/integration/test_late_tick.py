"""A follower whose own Raft tick stood still (a slow disk sync, the GIL, the CPU) does
not start an election on its next tick while its leader's heartbeats wait unread in its
socket: three real PySyncObj nodes on loopback, in this process, one follower's journal
sync stalled for longer than the election timeout."""
import threading
import time

import pytest

from shepherd_ha.cli.local_cluster import find_base_port
from shepherd_ha.store.raft_node import RaftNode, RaftSettings

STALL = 1.5          # seconds: well over the 0.3-0.6 s election timeout


@pytest.fixture
def nodes(tmp_path):
    made = []
    base = find_base_port(3)
    addresses = ["127.0.0.1:%d" % (base + 170 + i) for i in range(3)]
    for i, address in enumerate(addresses):
        settings = RaftSettings(self_address=address, peer_addresses=[a for a in addresses if a != address],
                                data_dir=str(tmp_path / ("r%d" % i)), password="test-password",
                                salt="00112233445566778899aabbccddeeff")
        made.append(RaftNode(settings, lambda changes: None, lambda revision: None))
    yield made
    for node in made:
        node.destroy()


def _stable_leader(nodes, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        leaders = [n for n in nodes if n.is_leader()]
        if len(leaders) == 1 and all(n.leader_address() == leaders[0].settings.self_address for n in nodes):
            return leaders[0]
        assert time.monotonic() < deadline, "no stable leader in %.0f s" % timeout
        time.sleep(0.05)


def _stall_next_sync(node, seconds):
    """The node's next journal sync (at the start of a tick) takes `seconds`; returns an
    Event set once it has."""
    journal = node.syncobj._SyncObj__raftLog
    real_sync, done = journal.sync, threading.Event()

    def stalled_sync():
        if not done.is_set():
            time.sleep(seconds)
            done.set()
        return real_sync()
    journal.sync = stalled_sync
    return done


@pytest.mark.parametrize("round_", range(3))
def test_a_follower_that_stood_still_reads_its_leader_before_it_campaigns(nodes, round_):
    leader = _stable_leader(nodes)
    time.sleep(1.0)                     # past the early elections
    leader = _stable_leader(nodes)
    terms = [n.term() for n in nodes]
    follower = next(n for n in nodes if n is not leader)
    stalled = _stall_next_sync(follower, STALL)
    assert stalled.wait(10), "the follower's tick never synced its journal"
    time.sleep(1.5)                     # several election timeouts after the stall
    # The gap is counted when the next tick starts, just after the stall.
    assert follower.tick_gaps.longest >= STALL * 0.9, "the stall was not on the tick thread"
    assert [n.term() for n in nodes] == terms, "an election after a follower's own stall"
    assert leader.is_leader()
