"""Our SyncObj subclass, the FSM's consumer and the journal factory swap.

- PipelinedSyncObj keeps pipelined appends, makes the journal durable once per
  tick, asks for pre-votes before it campaigns (pre_vote.py), staggers early elections, aligns the
  journal with the dump on start, takes turns with the other replicas to dump
  (store/dump_turns.py), uses our AES-GCM cipher and times its ticks (see each part below).
- FSMConsumer holds the FSM; PySyncObj snapshots and restores `self.fsm`.
- durable_journals(): PySyncObj builds its journal with a module-level factory; we
  swap in the crash-safe one while a SyncObj is constructed.
"""
import contextlib
import logging
import os
import random

import pysyncobj.syncobj as _pysyncobj_module
from pysyncobj import SyncObj, SyncObjConsumer, replicated
from pysyncobj import pickle as pysyncobj_pickle
from pysyncobj.monotonic import monotonic as raft_clock   # PySyncObj's deadline clock
from pysyncobj.syncobj import _COMMAND_TYPE, _RAFT_STATE

from shepherd_ha.store import gc_tuning
from shepherd_ha.store.fsm import StoreFSM
from shepherd_ha.store.raft_cipher import RaftCipher

from .journal import DurableFileJournal, align_journal_to_dump
from .pre_vote import PreVote
from .restricted_pickle import IGNORED_MEMBERSHIP_CHANGE, RefusedPickle, loads_membership
from .transport import GuardedTransport

log = logging.getLogger("shepherd_ha.store.raft_node")
DUMP_FILE = "raft.dump"
ROLES = {_RAFT_STATE.LEADER: "leader", _RAFT_STATE.CANDIDATE: "candidate", _RAFT_STATE.FOLLOWER: "follower"}


class FSMConsumer(SyncObjConsumer):
    """Holds the FSM; PySyncObj snapshots and restores `self.fsm`."""

    _OVERRIDES = ("_deserialize",)

    def __init__(self, lock, on_changes, on_reset):
        # Set before the base __init__: not part of the snapshot.
        self.lock = lock
        self._on_changes = on_changes
        self._on_reset = on_reset
        super().__init__()
        self.fsm = StoreFSM()

    @replicated
    def apply_command(self, command):
        with self.lock:
            result, changes = self.fsm.apply_with_changes(command)
        if changes:
            self._on_changes(changes)
        return result

    def _deserialize(self, data):
        # A snapshot (ours at start, or the leader's when we lag) replaces the state.
        with self.lock:
            super()._deserialize(data)
        self._on_reset(self.fsm.revision)


class PipelinedSyncObj(PreVote, SyncObj):
    """SyncObj that keeps its pipelined appends.

    With appendEntriesUseBatch=False the leader sends entries as they arrive and
    advances nextIndex optimistically. PySyncObj then moves nextIndex back down to
    whatever a (late) success acknowledgement covers, so it re-sends entries the
    follower already has, and the follower drops and re-appends them: double the
    Raft traffic under load. A success ack only proves the follower holds entries
    up to its index; appends sent after it are still on their way on the same TCP
    stream, so nextIndex may stay where it was. A failed append (reset=True) still
    rewinds it as before.
    """

    FIRST_ELECTION = (0.3, 0.6)     # seconds after start (see __init__)

    # Checked against SyncObj at import (compat.bad_overrides), with the mangled ones.
    _OVERRIDES = ("_onTick", "_checkCommandsToApply", "encryptor",
                  "_SyncObj__sendNextNodeIdx", "_SyncObj__sendAppendEntries", "_SyncObj__onMessageReceived",
                  "_SyncObj__onNodeDisconnected", "_SyncObj__loadDumpFile", "_SyncObj__doApplyCommand",
                  "_SyncObj__parseChangeClusterRequest", "_SyncObj__getEntries")

    def __init__(self, selfNode, otherNodes, conf=None, consumers=None, tick_gaps=None, joining=False,
                 cluster_id=None, salt=None, accepted=(), dump_turns=None,
                 store_size=None):
        # Before SyncObj.__init__: its transport asks for the encryptor as it starts,
        # and attributes set later would be part of every snapshot.
        self._raft_cipher = (RaftCipher(conf.password, salt, cluster_id, accepted)
                             if conf.password else None)
        self._held_acks = {}               # node -> (next index, term) held until our log is on disk
        self._batching_commands = False
        self._append_entries_due = False
        self._tick_gaps = tick_gaps        # tick_gaps.TickGapMeter, or None
        self._dump_turns = dump_turns      # dump_turns.DumpTurns: when to dump (None: as PySyncObj does)
        self._store_size = store_size      # () -> objects stored: what a dump pickles
        self._last_poll_end = None
        # A replica started to join (store/membership.py) is not a member yet: every campaign
        # would raise its term, and once added its first vote request would depose the leader.
        # It stays passive until a leader has contacted it (which only a member's leader does).
        self._joining = joining
        self._init_pre_vote()
        # Our transport: checked frame sizes, handshake deadlines, no pickled globals (transport).
        super().__init__(selfNode, otherNodes, conf, consumers=consumers, transportClass=GuardedTransport)
        # Like etcd's initial-election-tick-advance: a starting node asks for pre-votes after
        # FIRST_ELECTION, not a whole (1-2 s) election timeout. Pre-vote keeps this safe: while
        # the others hear a leader they refuse, and this node waits a full timeout after that.
        low, high = (min(bound, limit) for bound, limit in zip(self.FIRST_ELECTION,
                                                                (conf.raftMinTimeout, conf.raftMaxTimeout)))
        self._SyncObj__raftElectionDeadline = min(self._SyncObj__raftElectionDeadline,
                                                  raft_clock() + random.uniform(low, high))

    # ---- state read by RaftNode ----

    def role(self):
        return ROLES.get(self._SyncObj__raftState, "follower")

    def last_log_index(self):
        return self._SyncObj__getCurrentLogIndex()

    def replication_progress(self):
        """On the leader: {address: (match index, seconds since its last answer)} of every
        other member (what a membership change checks); {} elsewhere."""
        if self._SyncObj__raftState != _RAFT_STATE.LEADER:
            return {}
        now = raft_clock()
        match, answered = self._SyncObj__raftMatchIndex, self._SyncObj__lastResponseTime
        return {node.address: (match.get(node, 0), now - answered.get(node, 0.0)) for node in self.otherNodes}

    # ---- one journal sync per tick, not two per entry (see journal) ----
    #
    # A follower acknowledges appended entries only once they are on disk, and a leader
    # counts itself towards a commit only for entries on disk. Instead of syncing each
    # entry as it is added, acks are held back while a tick handles its messages; then
    # one sync covers every entry of the tick and the acks go out (one per leader,
    # the latest: an ack covers all entries before it). The leader likewise appends all
    # commands queued in a tick and sends them in one append_entries per follower.

    def _onTick(self, timeToWait=0.0):
        if self._tick_gaps is not None:
            self._tick_gaps.tick()      # what Raft experiences: wall time between tick starts
        self._make_durable()            # before the leader counts its own log
        if self._joining:
            if self._SyncObj__raftLeader is not None:
                self._joining = False
            else:
                self._SyncObj__raftElectionDeadline = raft_clock() + self.conf.raftMaxTimeout
        self._compact_in_turn()
        self._drain_if_late()
        self._pre_vote_if_due()
        super()._onTick(timeToWait)     # ends with the poll that handles incoming messages
        self._last_poll_end = raft_clock()
        self._pre_vote_after_tick()
        self._make_durable()

    # A tick that starts late (this process stood still: a slow disk sync, the GIL, the CPU,
    # a collection) first reads what the peers sent meanwhile. PySyncObj checks its election
    # deadline (a follower) and its followers' last answers (a leader) before it polls, so a
    # follower would campaign with the leader's heartbeats unread in its socket, and a leader
    # would step down with its followers' acks unread: an election caused by this replica's
    # own stall, not by a silent peer (docs/benchmarks.md, "The store process's tick").
    LATE_TICK = 0.1

    def _drain_if_late(self):
        if self._last_poll_end is None or raft_clock() - self._last_poll_end <= self.LATE_TICK:
            return
        if self._SyncObj__transport.ready:
            self._poller.poll(0)

    def _compact_in_turn(self):
        # PySyncObj's own compaction triggers are out of reach (raft_node): the dump is
        # forced here once it is due and it is this replica's turn (dump_turns). Never while
        # one is being written: PySyncObj keeps a forced request across its dump, and a
        # second full dump at once under the load that made the first is what it would do.
        turns = self._dump_turns
        if turns is None or self._SyncObj__forceLogCompaction:
            return
        journal = self._SyncObj__raftLog
        size = getattr(journal, "byte_size", None)
        now = raft_clock()
        if turns.should_start(now, dumping=self._SyncObj__serializer._Serializer__pid != 0,
                              log_entries=len(journal), log_bytes=size() if size else None,
                              age=now - self._SyncObj__lastSerializedTime, place=self._dump_rank,
                              count_objects=self._store_size or (lambda: 0)):
            self.forceLogCompaction()

    def _dump_rank(self):
        """(this replica's place among the sorted member addresses, how many members)."""
        members = sorted(node.address for node in self.otherNodes | {self.selfNode})
        return members.index(self.selfNode.address), len(members)

    def _make_durable(self):
        journal = self._SyncObj__raftLog
        sync = getattr(journal, "sync", None)
        if sync is not None:
            sync()
        if self._held_acks:
            acks, self._held_acks = self._held_acks, {}
            for node, (next_index, term) in acks.items():
                # PySyncObj's acks carry no term. One held while this node moved on (a new
                # term, another leader, a truncated log) would tell the old leader about a
                # log we no longer hold: drop it; the leader asks again with its next append.
                if (term == self._SyncObj__raftCurrentTerm and node == self._SyncObj__raftLeader
                        and next_index <= self._SyncObj__getCurrentLogIndex() + 1):
                    super()._SyncObj__sendNextNodeIdx(node, nextNodeIdx=next_index, success=True)

    def _SyncObj__sendNextNodeIdx(self, node, reset=False, nextNodeIdx=None, success=False):
        if success and not reset:
            if nextNodeIdx is None:
                nextNodeIdx = self._SyncObj__getCurrentLogIndex() + 1
            self._held_acks[node] = (nextNodeIdx, self._SyncObj__raftCurrentTerm)
            return
        self._make_durable()            # keep the order of what this node says to the leader
        super()._SyncObj__sendNextNodeIdx(node, reset=reset, nextNodeIdx=nextNodeIdx, success=success)

    def _checkCommandsToApply(self):
        self._batching_commands = True
        try:
            super()._checkCommandsToApply()
        finally:
            self._batching_commands = False
        if self._append_entries_due:
            self._append_entries_due = False
            super()._SyncObj__sendAppendEntries()
        # Followers write the new entries while this one syncs them.
        self._make_durable()

    def abandon_dump(self):
        """Before destroy(): a dump our thread is still writing is not renamed into place
        (dump_writer.DumpWriter.abandon)."""
        self._SyncObj__serializer.abandon()

    def log_status(self):
        """The Raft log since the last dump: its entries and bytes, and how many of them the
        journal holds in memory (journal_entries.py; read from another thread: a moment's view)."""
        journal = self._SyncObj__raftLog
        status = {"entries": len(journal)}
        size = getattr(journal, "byte_size", None)
        if size is not None:
            status["bytes"] = size()
        held = getattr(getattr(journal, "_FileJournal__journal", None), "in_memory", None)
        if held is not None:
            status["entriesInMemory"], status["bytesInMemory"] = held()
        return status

    def _SyncObj__getEntries(self, fromIDx, count=None, maxSizeBytes=None):
        # PySyncObj slices the whole tail from fromIDx, then keeps the first maxSizeBytes
        # of it: with older entries on disk (journal_entries.py), a follower far behind
        # would have the whole tail read back on every send. Read only up to the bound.
        log = self._SyncObj__raftLog
        first = log[0][1]
        if fromIDx is None or fromIDx < first:
            return []
        start = fromIDx - first
        stop = len(log) if count is None else min(len(log), start + count)
        if maxSizeBytes is None:
            return log[start:stop]
        entries, size = [], 0
        for position in range(start, stop):
            entries.append(log[position])
            size += len(entries[-1][0])
            if size >= maxSizeBytes:
                break
        return entries

    def _SyncObj__sendAppendEntries(self):
        if self._batching_commands:
            self._append_entries_due = True
            return
        super()._SyncObj__sendAppendEntries()

    @property
    def encryptor(self):
        """AES-GCM instead of PySyncObj's Fernet (see raft_cipher)."""
        return self._raft_cipher

    def _SyncObj__doApplyCommand(self, command):
        # A log entry whose pickle names a global (or is no pickle) came from someone who
        # holds the Raft password but is not one of us: every replica refuses it the same
        # way, as a value, and the log moves on (raising would stall the apply loop).
        try:
            return super()._SyncObj__doApplyCommand(command)
        except RefusedPickle as exc:
            log.error("refused a Raft log entry: %s", exc)
            return {"ok": False, "code": 400, "reason": "BadRequest", "index": None,
                    "message": "refused a Raft log entry: %s" % exc}

    def _SyncObj__parseChangeClusterRequest(self, command):
        # PySyncObj's membership entries pickle a TCPNode, the one global our commands may
        # hold (restricted_pickle.loads_membership); called as entries arrive, are applied
        # and are rolled back, so a refused one becomes a change every replica ignores.
        if ord(command[:1]) != _COMMAND_TYPE.MEMBERSHIP:
            return None
        try:
            return loads_membership(pysyncobj_pickle.to_bytes(command[1:]))
        except RefusedPickle as exc:
            log.error("refused a Raft membership change entry: %s", exc)
            return IGNORED_MEMBERSHIP_CHANGE

    def _SyncObj__onMessageReceived(self, node, message):
        kind = message.get("type")
        if kind == "pre_vote":
            if self.selfNode is not None:
                self._answer_pre_vote(node, message)
            return
        if kind == "pre_vote_response":
            self._count_pre_vote(node, message)
            return
        if kind == "append_entries" and isinstance(message.get("term"), int) \
                and message["term"] >= self._SyncObj__raftCurrentTerm:
            self._pre_vote_leader_heard()
        if kind == "next_node_idx" and message.get("success") and not message.get("reset"):
            ahead = self._SyncObj__raftNextIndex.get(node)
            super()._SyncObj__onMessageReceived(node, message)
            if ahead is not None and self._SyncObj__raftNextIndex.get(node, ahead) < ahead:
                self._SyncObj__raftNextIndex[node] = ahead
            return
        try:
            super()._SyncObj__onMessageReceived(node, message)
        except RefusedPickle as exc:
            # PySyncObj's chunked entries are unpickled here (we never send any: entry_size).
            log.error("refused a Raft message from %s: %s", node, exc)
            self._SyncObj__recvTransmission = ""

    # Early election after the leader's connection drops. The survivors are staggered
    # by rank (sorted address) so they do not campaign in the same 50 ms tick and split
    # the vote: the first campaigns within 50 ms, the next 150 ms later, and so on.
    EARLY_ELECTION_STEP = 0.15
    EARLY_ELECTION_JITTER = 0.05

    def _SyncObj__onNodeDisconnected(self, node):
        super()._SyncObj__onNodeDisconnected(node)
        if node == self._SyncObj__raftLeader:
            self._pre_vote_leader_lost()
        # A leader whose process died has its sockets closed by the kernel: there is
        # no need to wait out the election timeout to notice. (A paused or cut-off
        # leader keeps its connections and is caught by the timeout as usual.)
        if node == self._SyncObj__raftLeader and self._SyncObj__raftState != _RAFT_STATE.LEADER:
            survivors = sorted(n.address for n in (self.otherNodes | {self.selfNode}) if n != node)
            rank = survivors.index(self.selfNode.address) if self.selfNode.address in survivors else 0
            soon = raft_clock() + rank * self.EARLY_ELECTION_STEP + random.uniform(0.0, self.EARLY_ELECTION_JITTER)
            self._SyncObj__raftElectionDeadline = min(self._SyncObj__raftElectionDeadline, soon)

    def _SyncObj__loadDumpFile(self, clearJournal):
        # Our dump on start, or a leader's snapshot installed on a lagging follower: the
        # whole store is rebuilt at once, with no collector pauses, then frozen (gc_tuning).
        with gc_tuning.bulk_load():
            # On start, keep the journal entries that follow the dump (see journal).
            if not clearJournal:
                try:
                    align_journal_to_dump(self._SyncObj__raftLog, self._SyncObj__serializer.deserialize())
                except Exception:
                    log.exception("could not align the Raft journal with the dump; PySyncObj decides")
            super()._SyncObj__loadDumpFile(clearJournal)


def _durable_journal(path):
    if not path:
        return _ORIGINAL_CREATE_JOURNAL(path)
    return DurableFileJournal(path, dump_path=os.path.join(os.path.dirname(path), DUMP_FILE))


_ORIGINAL_CREATE_JOURNAL = _pysyncobj_module.createJournal


@contextlib.contextmanager
def durable_journals():
    """SyncObjs constructed inside get the crash-safe journal (PySyncObj builds its
    journal with the module-level createJournal)."""
    _pysyncobj_module.createJournal = _durable_journal
    try:
        yield
    finally:
        _pysyncobj_module.createJournal = _ORIGINAL_CREATE_JOURNAL
