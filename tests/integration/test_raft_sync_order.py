"""Batched journal syncs keep Raft's durability rules, on three real PySyncObj nodes on
loopback (in this process, so every send can be checked against the journal on disk):

- a follower acknowledges entries only once its journal header counts them (what a power
  cut would keep);
- a leader applies (so answers) an entry only once its own journal counts it;
- and the batching happens: fewer journal syncs than entries under concurrent writes.
"""
import os
import struct
import threading
import time

import pytest
from pysyncobj.journal import FIRST_RECORD_OFFSET, LAST_RECORD_OFFSET_OFFSET
from pysyncobj.syncobj import SyncObj

from shepherd_ha.store.pysyncobj_overrides import journal as durable_journal
from shepherd_ha.store.raft_node import RaftNode

from .helpers import loopback_raft_settings


def durable_last_index(path):
    """Index of the last entry the journal's header counts: what survives a power cut."""
    with open(path, "rb") as fh:
        data = fh.read()
    end = struct.unpack_from("<I", data, LAST_RECORD_OFFSET_OFFSET)[0]
    offset, last = FIRST_RECORD_OFFSET, 0
    while offset < end:
        size = struct.unpack_from("<I", data, offset)[0]
        last = struct.unpack_from("<Q", data, offset + 4)[0]
        offset += size + 8
    return last


def namespace_command(name):
    return {"type": "write", "key": "k-" + name, "ops": [{
        "op": "create", "resource": "namespaces",
        "object": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}}]}


class LeaderApplyCheck:
    """Wraps the FSM lock: a leader must have an entry on disk before it applies it."""

    def __init__(self, node, lock, journal_of, violations):
        self.node, self.lock, self.journal_of, self.violations = node, lock, journal_of, violations

    def __enter__(self):
        syncobj = self.node.syncobj
        if syncobj._isLeader():
            applying = syncobj.raftLastApplied + 1
            durable = durable_last_index(self.journal_of[syncobj])
            if applying > durable:
                self.violations.append("leader applied %d with entries up to %d on disk" % (applying, durable))
        return self.lock.__enter__()

    def __exit__(self, *exc):
        return self.lock.__exit__(*exc)


@pytest.fixture
def watched_nodes(tmp_path, monkeypatch):
    violations, acks, syncs = [], [], []
    journal_of = {}        # SyncObj -> journal path

    real_send_ack = SyncObj._SyncObj__sendNextNodeIdx

    def checked_send_ack(self, node, reset=False, nextNodeIdx=None, success=False):
        if success and not reset:
            durable = durable_last_index(journal_of[self])
            acks.append(nextNodeIdx)
            if nextNodeIdx - 1 > durable:
                violations.append("ack up to %d sent with entries up to %d on disk" % (nextNodeIdx - 1, durable))
        return real_send_ack(self, node, reset=reset, nextNodeIdx=nextNodeIdx, success=success)
    monkeypatch.setattr(SyncObj, "_SyncObj__sendNextNodeIdx", checked_send_ack)

    real_sync = durable_journal.DurableFileJournal.sync

    def counted_sync(self):
        did = real_sync(self)
        if did:
            syncs.append(self._path)
        return did
    monkeypatch.setattr(durable_journal.DurableFileJournal, "sync", counted_sync)

    nodes = []
    for settings in loopback_raft_settings(tmp_path, 150):
        node = RaftNode(settings, lambda changes: None, lambda revision: None)
        journal_of[node.syncobj] = os.path.join(settings.data_dir, "raft.journal")
        # The FSM takes this lock for every entry it applies: check the leader's journal there.
        node.consumer.lock = LeaderApplyCheck(node, node.consumer.lock, journal_of, violations)
        nodes.append(node)
    yield nodes, violations, acks, syncs
    for node in nodes:
        node.destroy()


def test_acks_and_leader_applies_wait_for_the_journal_and_syncs_are_batched(watched_nodes):
    nodes, violations, acks, syncs = watched_nodes
    deadline = time.monotonic() + 20
    while not any(n.is_leader() for n in nodes):
        assert time.monotonic() < deadline, "no leader elected in 20 s"
        time.sleep(0.05)
    errors = []

    def writer(node, prefix, count):
        for i in range(count):
            try:
                node.submit(namespace_command("%s-%d" % (prefix, i)), timeout=10)
            except Exception as exc:      # reported below, with the writer's name
                errors.append("%s: %r" % (prefix, exc))

    threads = [threading.Thread(target=writer, args=(nodes[w % 3], "w%d" % w, 25)) for w in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:5]
    assert violations == [], violations[:5]
    leader = next(n for n in nodes if n.is_leader())
    entries = leader.commit_index()
    assert entries >= 300, entries
    assert acks, "followers acknowledged nothing?"
    assert len(syncs) < entries * 2, \
        "%d journal syncs for %d entries on 3 replicas: syncs are not batched" % (len(syncs), entries)
    revisions = {n.fsm.revision for n in nodes if n.applied_index() == entries}
    assert len(revisions) <= 1
