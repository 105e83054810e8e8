"""PySyncObj wrapper: one replica's Raft member, with the settings our machines need.

Lessons measured on our machines are built in here, not left to callers:
- appendEntriesUseBatch=False: batching makes every write wait for the next
  heartbeat (~100 ms).
- journalFile always together with fullDumpFile: a journal alone loses all
  state on a full restart after log compaction.
- a Raft password always: without one, any peer message is unpickled (remote
  code execution).
- leaderFallbackTimeout ~1 s: the default 30 s lets an isolated leader believe
  it leads for 30 s.
- a huge connectionTimeout plus TCP keepalive: otherwise idle follower links
  are closed, the first vote request after a leader dies is dropped and
  failover time doubles.
- the FSM lives in a SyncObjConsumer that is fully built before SyncObj starts
  its tick thread (attributes set after the base __init__ are snapshotted, and
  the tick thread may replay the journal before a subclass __init__ returns).
"""
import dataclasses
import logging
import os
import random
import socket
import threading
import time

_INET_NTOP, _INET_PTON = socket.inet_ntop, socket.inet_pton
import pysyncobj.syncobj as _pysyncobj_module  # noqa: E402
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated  # noqa: E402
from pysyncobj.monotonic import monotonic as raft_clock  # noqa: E402  (PySyncObj's deadline clock)
from pysyncobj.syncobj import _RAFT_STATE  # noqa: E402

# PySyncObj's win_inet_pton replaces socket.inet_ntop on every platform with a
# Windows-only version (psutil.net_connections() then raises): put ours back.
socket.inet_ntop, socket.inet_pton = _INET_NTOP, _INET_PTON

from shepherd_ha.options import ConfigError  # noqa: E402

from .durable_journal import DurableFileJournal, align_journal_to_dump
from .entry_size import ENTRY_THRESHOLD
from .fsm import StoreFSM
from .raft_cipher import RaftCipher
from . import snapshot_child

log = logging.getLogger(__name__)
DUMP_FILE = "raft.dump"


@dataclasses.dataclass
class RaftSettings:
    self_address: str                      # host:port other replicas dial (also the bind address)
    peer_addresses: list                   # host:port of every other replica
    data_dir: str
    password: str
    bind_address: str = None               # defaults to self_address
    heartbeat: float = 0.05                # appendEntriesPeriod
    election_timeout_min: float = 0.3
    election_timeout_max: float = 0.6
    leader_fallback: float = 1.0
    log_compaction_entries: int = 20000
    log_compaction_seconds: int = 600
    # PySyncObj sends an entry this big or bigger in chunks, a path that breaks: above any
    # command a body the API accepts makes (see entry_size); bigger ones are refused.
    append_batch_bytes: int = ENTRY_THRESHOLD

    def validate(self):
        if not self.password:
            raise ConfigError("a Raft password is required: without one any peer message is unpickled "
                              "(remote code execution). Set --raft-password or SHEPHERD_RAFT_PASSWORD")
        for addr in [self.self_address] + list(self.peer_addresses):
            host, _, port = addr.rpartition(":")
            if not host or not (port.isascii() and port.isdigit()):
                raise ConfigError("Raft address %r is not host:port" % addr)
        if self.self_address in self.peer_addresses:
            raise ConfigError("peers list contains this replica's own Raft address %s" % self.self_address)
        if not self.heartbeat > 0:
            raise ConfigError("heartbeat must be positive")
        if self.election_timeout_min <= 3 * self.heartbeat:
            raise ConfigError("election timeout min (%.3fs) must exceed 3 x heartbeat (%.3fs), or one late "
                              "heartbeat starts an election" % (self.election_timeout_min, 3 * self.heartbeat))
        if self.election_timeout_max <= self.election_timeout_min:
            raise ConfigError("election timeout max (%.3fs) must exceed min (%.3fs)"
                              % (self.election_timeout_max, self.election_timeout_min))
        if self.leader_fallback <= 2 * self.heartbeat:
            raise ConfigError("leader fallback (%.3fs) must exceed 2 x heartbeat" % self.leader_fallback)


class FSMConsumer(SyncObjConsumer):
    """Holds the FSM; PySyncObj snapshots and restores `self.fsm`."""

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


class _PipelinedSyncObj(SyncObj):
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

    def __init__(self, self_address, peers, conf, consumers):
        # Before SyncObj.__init__: its transport asks for the encryptor as it starts,
        # and attributes set later would be part of every snapshot.
        self._raft_cipher = RaftCipher(conf.password) if conf.password else None
        self._held_acks = {}               # node -> (next index, term) held until our log is on disk
        self._batching_commands = False
        self._append_entries_due = False
        super().__init__(self_address, peers, conf, consumers=consumers)

    # ---- one journal sync per tick, not two per entry (see durable_journal) ----
    #
    # A follower acknowledges appended entries only once they are on disk, and a leader
    # counts itself towards a commit only for entries on disk. Instead of syncing each
    # entry as it is added, acks are held back while a tick handles its messages; then
    # one sync covers every entry of the tick and the acks go out (one per leader,
    # the latest: an ack covers all entries before it). The leader likewise appends all
    # commands queued in a tick and sends them in one append_entries per follower.

    def _onTick(self, timeToWait=0.0):
        self._make_durable()            # before the leader counts its own log
        super()._onTick(timeToWait)     # ends with the poll that handles incoming messages
        self._make_durable()

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

    def _SyncObj__sendAppendEntries(self):
        if self._batching_commands:
            self._append_entries_due = True
            return
        super()._SyncObj__sendAppendEntries()

    @property
    def encryptor(self):
        """AES-GCM instead of PySyncObj's Fernet (see raft_cipher)."""
        return self._raft_cipher

    def _SyncObj__onMessageReceived(self, node, message):
        if message.get("type") == "next_node_idx" and message.get("success") and not message.get("reset"):
            ahead = self._SyncObj__raftNextIndex.get(node)
            super()._SyncObj__onMessageReceived(node, message)
            if ahead is not None and self._SyncObj__raftNextIndex.get(node, ahead) < ahead:
                self._SyncObj__raftNextIndex[node] = ahead
            return
        super()._SyncObj__onMessageReceived(node, message)

    # Early election after the leader's connection drops. The survivors are staggered
    # by rank (sorted address) so they do not campaign in the same 50 ms tick and split
    # the vote: the first campaigns within 50 ms, the next 150 ms later, and so on.
    EARLY_ELECTION_STEP = 0.15
    EARLY_ELECTION_JITTER = 0.05

    def _SyncObj__onNodeDisconnected(self, node):
        super()._SyncObj__onNodeDisconnected(node)
        # A leader whose process died has its sockets closed by the kernel: there is
        # no need to wait out the election timeout to notice. (A paused or cut-off
        # leader keeps its connections and is caught by the timeout as usual.)
        if node == self._SyncObj__raftLeader and self._SyncObj__raftState != _RAFT_STATE.LEADER:
            survivors = sorted(n.address for n in (self.otherNodes | {self.selfNode}) if n != node)
            rank = survivors.index(self.selfNode.address) if self.selfNode.address in survivors else 0
            soon = raft_clock() + rank * self.EARLY_ELECTION_STEP + random.uniform(0.0, self.EARLY_ELECTION_JITTER)
            self._SyncObj__raftElectionDeadline = min(self._SyncObj__raftElectionDeadline, soon)

    def _SyncObj__loadDumpFile(self, clearJournal):
        # On start, keep the journal entries that follow the dump (see durable_journal).
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


class Unavailable(Exception):
    """The write or read barrier could not be confirmed. `outcome` is 'not-applied'
    when the command never reached Raft, 'unknown' when it may still apply."""

    def __init__(self, message, outcome):
        super().__init__(message)
        self.outcome = outcome


_NOT_APPLIED = {FAIL_REASON.QUEUE_FULL, FAIL_REASON.MISSING_LEADER, FAIL_REASON.DISCARDED,
                FAIL_REASON.REQUEST_DENIED}


class RaftNode:
    """A started Raft member with a blocking, bounded submit."""

    def __init__(self, settings, on_changes, on_reset, on_state_change=None):
        settings.validate()
        os.makedirs(settings.data_dir, exist_ok=True)
        self.settings = settings
        self.lock = threading.RLock()
        self.consumer = FSMConsumer(self.lock, on_changes, on_reset)
        self._on_state_change = on_state_change
        conf = SyncObjConf(
            password=settings.password,
            bindAddress=settings.bind_address or settings.self_address,
            appendEntriesUseBatch=False,
            appendEntriesBatchSizeBytes=settings.append_batch_bytes,
            appendEntriesPeriod=settings.heartbeat,
            raftMinTimeout=settings.election_timeout_min,
            raftMaxTimeout=settings.election_timeout_max,
            leaderFallbackTimeout=settings.leader_fallback,
            connectionTimeout=10 ** 7,
            tcp_keepalive=(2, 1, 3),
            connectionRetryTime=0.5,
            bindRetryTime=0.5,
            maxBindRetries=10,          # then waitBinded() raises: the server exits saying why
            journalFile=os.path.join(settings.data_dir, "raft.journal"),
            fullDumpFile=os.path.join(settings.data_dir, DUMP_FILE),
            logCompactionMinEntries=settings.log_compaction_entries,
            logCompactionMinTime=settings.log_compaction_seconds,
            commandsWaitLeader=True,
            dynamicMembershipChange=False,
            onStateChanged=self._state_changed,
        )
        snapshot_child.install()
        # PySyncObj builds its journal with a module-level factory: swap in the
        # crash-safe one for the duration of the constructor.
        _pysyncobj_module.createJournal = _durable_journal
        try:
            self.syncobj = _PipelinedSyncObj(settings.self_address, settings.peer_addresses, conf,
                                             consumers=[self.consumer])
        finally:
            _pysyncobj_module.createJournal = _ORIGINAL_CREATE_JOURNAL

    def wait_bound(self):
        """Block until the Raft port is bound; ConfigError if it cannot be (in use?)."""
        try:
            self.syncobj.waitBinded()
        except Exception:
            raise ConfigError("cannot bind the Raft address %s (is another process using the port?)"
                              % (self.settings.bind_address or self.settings.self_address))

    @property
    def fsm(self):
        return self.consumer.fsm

    def _state_changed(self, old, new):
        if self._on_state_change is not None:
            self._on_state_change(new == _RAFT_STATE.LEADER)

    # ---- state ----

    def is_leader(self):
        return self.syncobj._isLeader()

    def leader_address(self):
        """The leader this replica can reach, or None. A follower cut off from every
        peer never starts an election (PySyncObj needs a connection to campaign), so it
        keeps naming its old leader: that leader is only ours if we are connected to it."""
        leader = self.syncobj._getLeader()
        if leader is None:
            return None
        if leader != self.syncobj.selfNode and not self.syncobj.isNodeConnected(leader):
            return None
        return getattr(leader, "address", str(leader))

    def term(self):
        return self.syncobj.raftCurrentTerm

    def commit_index(self):
        return self.syncobj.raftCommitIndex

    def applied_index(self):
        return self.syncobj.raftLastApplied

    def role(self):
        state = self.syncobj._SyncObj__raftState
        return {_RAFT_STATE.LEADER: "leader", _RAFT_STATE.CANDIDATE: "candidate"}.get(state, "follower")

    def caught_up(self):
        return self.syncobj.isReady() and self.commit_index() - self.applied_index() < 100

    def connected_peers(self):
        nodes = self.syncobj.otherNodes
        return sorted(n.address for n in nodes if self.syncobj.isNodeConnected(n))

    # ---- submit ----

    def wait_for_leader(self, timeout):
        deadline = time.monotonic() + timeout
        while self.leader_address() is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def submit(self, command, timeout, retry=True):
        """Commit `command` and return the FSM's result once applied on this replica.

        Raises Unavailable after `timeout` seconds at most. With `retry`, a command
        that Raft dropped (leader change) is submitted again: commands that write
        carry an idempotency key, so a second copy is never applied twice.
        """
        deadline = time.monotonic() + timeout
        submitted = False
        while True:
            remaining = deadline - time.monotonic()
            if not self.wait_for_leader(max(0.0, min(remaining, 1.5))):
                outcome = "unknown" if submitted else "not-applied"
                raise Unavailable("no Raft leader: this replica reaches %d of %d peers; a majority "
                                  "must be up to write" % (len(self.connected_peers()),
                                                           len(self.settings.peer_addresses)), outcome)
            done = threading.Event()
            box = {}

            def callback(result, error):
                box["result"], box["error"] = result, error
                done.set()

            self.consumer.apply_command(command, callback=callback)
            submitted = True
            if not done.wait(max(0.0, deadline - time.monotonic())):
                raise Unavailable("write not confirmed within %.1fs (no quorum?); it may still apply: "
                                  "retry with the same Idempotency-Key" % timeout, "unknown")
            if box["error"] == FAIL_REASON.SUCCESS:
                return box["result"]
            if not retry or time.monotonic() >= deadline:
                outcome = "not-applied" if box["error"] in _NOT_APPLIED else "unknown"
                raise Unavailable("Raft did not commit the command (reason %d: leader changed or "
                                  "missing); retry" % box["error"], outcome)
            time.sleep(0.02)

    def destroy(self):
        self.syncobj.destroy()
