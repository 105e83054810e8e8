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

Everything that reaches into PySyncObj's internals (our SyncObj subclass, the
crash-safe journal, the FSM consumer) is in pysyncobj_overrides, which checks the
installed PySyncObj at import; this module only configures and drives it.
"""
import dataclasses
import logging
import os
import threading
import time

from shepherd_ha.options import ConfigError

from .pysyncobj_overrides import (DUMP_FILE, FAIL_REASON, ROLES, FSMConsumer, PipelinedSyncObj, raft_clock,
                                  SyncObj, checked_conf, durable_journals)  # noqa: F401
from . import data_at_rest, gc_tuning, raft_secrets
from .dump_turns import DumpTurns
from .entry_size import ENTRY_THRESHOLD
from .tick_gaps import TickGapMeter

NEVER_BY_ITSELF = 2 ** 62      # PySyncObj's compaction bounds: it dumps only when told to

log = logging.getLogger(__name__)


@dataclasses.dataclass
class RaftSettings:
    self_address: str                      # host:port other replicas dial (also the bind address)
    peer_addresses: list                   # host:port of every other replica
    data_dir: str
    password: str
    salt: str = None                       # the cluster's random salt, hex (raft_secrets); required
    accepted_passwords: tuple = ()         # also accepted from peers while the secret is rotated
    bind_address: str = None               # defaults to self_address
    heartbeat: float = 0.05                # appendEntriesPeriod
    # etcd's 1 s election timeout, not PySyncObj's 0.3 s: under load a store process can
    # stand still for 0.3-0.9 s (a 1,000-node fleet on 2 cores, docs/benchmarks.md run O),
    # and both followers losing a stalled leader for 0.3 s was enough for an election. A
    # crashed leader is still noticed at once through its closed connections, and a start
    # campaigns after FIRST_ELECTION (syncobj.py), so only a paused or cut-off leader is
    # found later than before.
    election_timeout_min: float = 1.0
    election_timeout_max: float = 2.0
    # As long as the longest election timeout: a leader that stood still itself (its
    # followers' answers unread in its socket) must not step down before they would elect.
    leader_fallback: float = 2.0
    log_compaction_entries: int = 20000
    log_compaction_seconds: int = 600
    # Also compact once the log holds this many bytes: PySyncObj keeps every entry since the
    # last dump in memory, and group commit packs up to 64 KiB per entry, so 20,000 entries
    # could be over a gigabyte (a 30,000-pod run reached 268 MB with no dump written).
    log_compaction_bytes: int = 64 * 1024 * 1024
    # PySyncObj sends an entry this big or bigger in chunks, a path that breaks: above any
    # command a body the API accepts makes (see entry_size); bigger ones are refused.
    append_batch_bytes: int = ENTRY_THRESHOLD
    joining: bool = False                  # started by --join on an empty data dir: no campaign until contacted
    # In every Raft message (raft_cipher): peers of another cluster are refused. None: unit tests.
    cluster_id: str = None

    def validate(self):
        if not self.password:
            raise ConfigError("a Raft password is required: without one any peer message is unpickled "
                              "(remote code execution). Set --raft-password or SHEPHERD_RAFT_PASSWORD")
        raft_secrets.salt_bytes(self.salt)
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
        if self.log_compaction_entries < 2 or not self.log_compaction_seconds > 0:
            raise ConfigError("log compaction needs at least 2 entries (--log-compaction-entries, %d given) and a "
                              "positive age (%s s given)" % (self.log_compaction_entries, self.log_compaction_seconds))


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
        data_at_rest.secure(settings.data_dir)      # 0700, its files 0600 (finding 8)
        self.settings = settings
        self.lock = threading.RLock()
        self.consumer = FSMConsumer(self.lock, on_changes, on_reset)
        self._on_state_change = on_state_change
        self._led_term = None
        conf = checked_conf(
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
            # Out of reach: the store forces each dump when due, in its turn (dump_turns).
            logCompactionMinEntries=NEVER_BY_ITSELF,
            logCompactionMinTime=NEVER_BY_ITSELF,
            commandsWaitLeader=True,
            dynamicMembershipChange=True,      # store/membership.py: one change at a time, checked
            onStateChanged=self._state_changed,
            onReady=self._loaded,
        )
        # A tick this late may already let the followers campaign: say so when it happens.
        self.tick_gaps = TickGapMeter(warn_after=settings.election_timeout_min, loading=True)
        with durable_journals():
            self.syncobj = PipelinedSyncObj(settings.self_address, settings.peer_addresses, conf,
                                            consumers=[self.consumer], tick_gaps=self.tick_gaps,
                                            dump_turns=DumpTurns(
                                                settings.log_compaction_entries, settings.log_compaction_seconds,
                                                settings.log_compaction_bytes if settings.log_compaction_bytes > 0
                                                else None),      # 0: no byte bound
                                            store_size=lambda: self.consumer.fsm.count(),
                                            joining=settings.joining, cluster_id=settings.cluster_id,
                                            salt=settings.salt, accepted=settings.accepted_passwords)

    def _loaded(self):
        """PySyncObj's onReady: the dump and journal are loaded and applied."""
        self.tick_gaps.loaded()             # the load's long ticks were not stalls
        gc_tuning.freeze_survivors()        # what survived it, out of the collector's way

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
        # Every role change with its term, and why a leader stopped leading: the figures
        # of an election under load start here (docs/benchmarks.md, "Run M").
        term = self.syncobj.raftCurrentTerm if hasattr(self, "syncobj") else None
        why = ""
        if ROLES.get(old) == "leader":
            why = (": no answer from a majority within %.1f s (leader fallback)" % self.settings.leader_fallback
                   if term == self._led_term else ": a higher term was seen")
        elif ROLES.get(new) == "leader":
            self._led_term = term
        elif ROLES.get(new) == "candidate" and term is not None:
            term += 1                   # PySyncObj raises the term just after this callback
            why = self._why_campaign()
        log.info("Raft role %s -> %s at term %s%s", ROLES.get(old), ROLES.get(new), term, why)
        if self._on_state_change is not None:
            self._on_state_change(ROLES.get(new) == "leader")

    def _why_campaign(self):
        """What a candidate saw: how long since a leader last reached it, and how long its
        own tick thread stood still lately (a stall of this process, not of the leader)."""
        heard = getattr(self.syncobj, "_last_leader_contact", None)
        since = ("no leader heard since start, or its connection dropped" if heard is None else
                 "last heard from a leader %.2f s ago" % (raft_clock() - heard))
        gaps = self.tick_gaps.snapshot()
        return ": %s; longest Raft tick gap here in the last minute %.2f s%s" % (
            since, gaps["maxSeconds"], "; still loading its dump and journal, longest tick so far %.2f s"
            % gaps["startupSeconds"] if gaps["loading"] else "")

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
        return self.syncobj.role()

    def log_status(self):
        return self.syncobj.log_status()

    def caught_up(self):
        return self.syncobj.isReady() and self.commit_index() - self.applied_index() < 100

    def connected_peers(self):
        nodes = self.syncobj.otherNodes
        return sorted(n.address for n in nodes if self.syncobj.isNodeConnected(n))

    def voters(self):
        """Raft addresses of every member, this one included, as PySyncObj holds them now
        (a change counts from the moment it is in the log: Raft's single-server changes)."""
        return sorted([self.settings.self_address] + [n.address for n in self.syncobj.otherNodes])

    def last_log_index(self):
        return self.syncobj.last_log_index()

    def replication_progress(self):
        return self.syncobj.replication_progress()

    # ---- membership (store/membership.py decides whether; this only does it) ----

    def _membership_call(self, start, timeout):
        done, box = threading.Event(), {}

        def callback(result, error):
            box["error"] = error
            done.set()

        start(callback)
        if not done.wait(timeout):
            raise Unavailable("the membership change was not confirmed within %.1fs; it may still apply: "
                              "check `sheepctl cluster status` before trying again" % timeout, "unknown")
        if box["error"] != FAIL_REASON.SUCCESS:
            raise Unavailable("Raft refused the membership change (reason %d: leader changed, or another "
                              "change is not committed yet); retry" % box["error"],
                              "not-applied" if box["error"] in _NOT_APPLIED else "unknown")

    def add_member(self, address, timeout):
        self._membership_call(lambda cb: self.syncobj.addNodeToCluster(address, callback=cb), timeout)

    def remove_member(self, address, timeout):
        self._membership_call(lambda cb: self.syncobj.removeNodeFromCluster(address, callback=cb), timeout)

    def transfer_leadership(self, address, timeout):
        """Ask `address` (a caught-up follower) to take over; True once this node no longer leads."""
        self._membership_call(lambda cb: self.syncobj.transferLeadership(address, callback=cb), timeout)
        deadline = time.monotonic() + timeout
        while self.is_leader() and time.monotonic() < deadline:
            time.sleep(0.02)
        return not self.is_leader()

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
                                                           len(self.syncobj.otherNodes)), outcome)
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
        self.syncobj.abandon_dump()     # one still being written must not land after we stopped
        self.syncobj.destroy()
