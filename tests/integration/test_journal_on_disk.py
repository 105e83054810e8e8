"""Three real PySyncObj members on loopback (in this process) with a journal that keeps only
its 4 newest entries in memory (journal_entries.py): a follower that was down catches up
from the leader's log, read back from the leader's journal file, and a member restarted
from its own journal replays entries that are on disk only; every member ends with the
same state."""
import time

from shepherd_ha.store.pysyncobj_overrides.journal_entries import JournalEntries
from shepherd_ha.store.raft_node import RaftNode

from .helpers import loopback_raft_settings
from .test_raft_sync_order import namespace_command

WRITES = 300


def _wait(what, check, seconds=30):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "%s: not within %d s" % (what, seconds)
        time.sleep(0.05)


def _leader(nodes):
    found = [n for n in nodes if n is not None and n.is_leader()]
    return found[0] if found else None


def test_a_follower_catches_up_from_entries_the_leader_reads_back_from_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(JournalEntries, "HOT_ENTRIES", 4)
    settings = loopback_raft_settings(tmp_path, 190)
    for s in settings:
        s.log_compaction_entries = 100000          # no dump: catching up must use the log
    nodes = [RaftNode(s, lambda changes: None, lambda revision: None) for s in settings]
    try:
        _wait("a leader", lambda: _leader(nodes) is not None)
        leader = _leader(nodes)
        down = next(i for i, n in enumerate(nodes) if n is not leader)
        nodes[down].destroy()
        nodes[down] = None
        for i in range(WRITES):
            assert leader.submit(namespace_command("ns-%d" % i), timeout=10)["ok"]
        log = leader.log_status()
        assert log["entries"] > WRITES and log["entriesInMemory"] == 4, log
        assert log["bytes"] > 10 * log["bytesInMemory"] > 0, log

        nodes[down] = RaftNode(settings[down], lambda changes: None, lambda revision: None)
        target = leader.applied_index()
        _wait("the restarted follower catching up", lambda: nodes[down].applied_index() >= target)
        digests = {n.consumer.fsm.digest() for n in nodes}
        assert len(digests) == 1, "members disagree after catching up"
        assert len(nodes[down].consumer.fsm.objects["namespaces"]) >= WRITES

        # A member restarted from its own journal replays entries read back from its file.
        again = next(i for i, n in enumerate(nodes) if n is not leader and i != down)
        nodes[again].destroy()
        nodes[again] = RaftNode(settings[again], lambda changes: None, lambda revision: None)
        _wait("the member restarted from its journal", lambda: nodes[again].applied_index() >= target)
        assert nodes[again].consumer.fsm.digest() == leader.consumer.fsm.digest()
    finally:
        for node in nodes:
            if node is not None:
                node.destroy()
