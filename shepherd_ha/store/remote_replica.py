"""What an API worker uses as its replica: the store process behind the local
socket, with a Mirror of the store fed by the change stream.

The same surface as Replica for the API and the ControllerManager:
- reads come from the mirror; a linearizable one takes a read-barrier revision
  from the store and answers once the mirror has reached it;
- a write goes to the store's group commit and answers once the mirror holds its
  revision (read-your-writes, on this worker);
- `node` is a view for the controller manager: leadership and term from the
  stream's state frames (the store reads them on its tick thread), the mirror as
  the FSM. A worker cut off from its store stops leading at once; fencing stays in
  the FSM, so a late controller write is refused whatever this worker believes.
"""
import logging
import os
import threading
import time
import uuid

from . import commands
from . import gc_tuning
from . import local_protocol as lp
from .mirror import Mirror
from .raft_node import Unavailable
from .tick_gaps import TickGapMeter
from .watch_log import WatchLog

log = logging.getLogger("shepherd_ha.store.remote")

RECONNECT_DELAY = 0.2
STREAM_SILENCE = 5.0       # seconds without a frame (the store pings every second) before reconnecting
UNREACHABLE = "store process unreachable"


class _Node:
    """The part of RaftNode the controller manager reads."""

    def __init__(self, mirror):
        self.lock = mirror.lock
        self.fsm = mirror
        self.leading, self.current_term = False, 0

    def is_leader(self):
        return self.leading

    def term(self):
        return self.current_term


class _Committer:
    """GroupCommitter's call/call_many, through the store; each returns once the
    mirror holds what it wrote, so a controller reads its own writes."""

    def __init__(self, replica):
        self._replica = replica

    def call(self, command, timeout, retry=True):
        result = self._replica.client.call("submit", timeout, command=command, timeout=timeout)
        self._replica.wait_until_visible(result.get("revision") if isinstance(result, dict) else None, timeout)
        return result

    def call_many(self, commands_, timeout, retry=True):
        results = self._submit_many(commands_, timeout)
        revisions = [r.get("revision") or 0 for r in results if isinstance(r, dict)]
        self._replica.wait_until_visible(max(revisions, default=0), timeout)
        return results


    def _submit_many(self, commands_, timeout):
        """One call, or one per half when the commands together would pass the frame cap."""
        try:
            return self._replica.client.call("submit_many", timeout, commands=commands_, timeout=timeout)
        except lp.ProtocolError:
            if len(commands_) <= 1:
                raise
            half = len(commands_) // 2
            return self._submit_many(commands_[:half], timeout) + self._submit_many(commands_[half:], timeout)


class _BarrierCount:
    barriers_sent = 0


class RemoteReplica:
    def __init__(self, replica_id, socket_path, peers, api_url=None, write_timeout=2.0,
                 watch_log_size=WatchLog.CAPACITY, on_leadership=None):
        self.id = replica_id
        self.api_url = api_url
        self.config_peers = list(peers)
        self._members = (0.0, None)        # (when, the store's member list): the cluster view asks often
        self.cluster_id = None          # set by the worker (cli/server.py): the store reports its own too
        self.write_timeout = write_timeout
        self.socket_path = socket_path
        self.mirror = Mirror(watch_log_size)
        self.watch_log = self.mirror.watch_log
        self.node = _Node(self.mirror)
        self.committer = _Committer(self)
        self.barrier = _BarrierCount()
        self.client = lp.Client(socket_path)
        self.controller_status = None
        self._on_leadership = on_leadership
        self.connected = False
        self._closed = False
        self._thread = threading.Thread(target=self._stream_loop, name="change-stream", daemon=True)

    def start(self):
        """Start following the store (after the leadership hook is set: no state frame is missed)."""
        self._thread.start()
        return self

    # ---- the change stream ----

    def _stream_loop(self):
        resync = False
        while not self._closed:
            conn = None
            try:
                conn = lp.connect(self.socket_path)
                # The store pings every second: a store that stopped without closing the
                # socket (SIGSTOP, a wedge) is noticed, and this worker stops leading.
                conn.sock.settimeout(STREAM_SILENCE)
                # From a revision before any watch log: the store sends a snapshot first.
                conn.send({"op": "subscribe", "args": {"from": -1 if resync else self.mirror.revision}})
                resync = False
                self.connected = True
                snapshot_began = None
                while True:
                    frame = conn.recv()
                    kind = frame.get("kind")
                    if kind == "state":
                        self._set_leading(frame["leader"], frame["term"])
                        continue
                    if kind == "snapshot-begin":
                        snapshot_began = time.monotonic()
                    self.mirror.apply_frame(frame)
                    if kind == "snapshot-end" and snapshot_began is not None:
                        # Writes and linearizable reads on this worker wait meanwhile.
                        log.info("copy of the store loaded from a snapshot at revision %d in %.1f s",
                                 frame["revision"], time.monotonic() - snapshot_began)
            except (OSError, EOFError, lp.ProtocolError) as exc:
                if self.connected:
                    log.warning("change stream from the store process lost (%s); reconnecting", exc)
            except Exception:        # a frame this worker cannot apply: start over from a snapshot
                log.exception("change stream frame not applied; resubscribing from a snapshot")
                resync = True
            finally:
                if conn is not None:
                    conn.close()
            self.connected = False
            self._set_leading(False, self.node.current_term)
            time.sleep(RECONNECT_DELAY)

    def _set_leading(self, leader, term):
        node = self.node
        if (node.leading, node.current_term) == (leader, term):
            return
        # Term first: the manager pairs is_leader() with term().
        node.current_term, node.leading = term, leader
        if self._on_leadership is not None:
            self._on_leadership(leader)

    def wait_until_visible(self, revision, timeout):
        """A write is answered only once this worker's mirror holds it (read-your-writes);
        Unavailable when the mirror stays behind (a snapshot or a reconnect in progress):
        the write applied, and a retry with the same Idempotency-Key returns its result."""
        if not self.wait_for_revision(revision, timeout):
            raise Unavailable("the write applied (revision %d), but this worker's copy of the store is still "
                              "at revision %d: retry with the same Idempotency-Key for its result"
                              % (revision, self.mirror.revision), "unknown")

    def wait_for_revision(self, revision, timeout):
        """Block until the mirror holds `revision`; False after `timeout`."""
        if not revision:
            return True
        return self.mirror.wait_for(revision, timeout)

    # ---- identity ----

    def leader_id(self):
        return self.status().get("leader")

    # ---- reads ----

    def sync(self, consistent):
        if not consistent:
            return
        self.barrier.barriers_sent += 1
        revision = self.client.call("barrier", self.write_timeout)
        if not self.wait_for_revision(revision, self.write_timeout):
            raise Unavailable("linearizable read failed: this worker's copy of the store is behind (revision %d "
                              "of %d); use resourceVersion=0 for a possibly stale local read"
                              % (self.mirror.revision, revision), "not-applied")

    def get(self, resource, namespace, name, consistent=True):
        self.sync(consistent)
        with self.mirror.lock:
            return self.mirror.get(resource, namespace, name), self.mirror.revision

    def list(self, resource, namespace=None, consistent=True, selection=None):
        """(objects, revision); `selection` (label selector, field selector) may narrow
        the objects to a superset of its matches (store/selector_index.py)."""
        self.sync(consistent)
        with self.mirror.lock:
            return self.mirror.list(resource, namespace, selection), self.mirror.revision

    def digest(self):
        return tuple(self.client.call("digest", self.write_timeout))

    def change_marks(self, resources):
        return self.mirror.change_marks(resources)

    def revision(self):
        return self.mirror.revision

    # ---- writes ----

    def write(self, ops, key=None, epoch=None, timeout=None, digest=None):
        command = commands.write(ops, key or uuid.uuid4().hex, epoch, digest)
        return self.committer.call(command, timeout or self.write_timeout)

    def recall(self, key):
        return self.client.call("recall", self.write_timeout, key=key)

    # ---- membership (the store process decides; see store/membership.py) ----

    MEMBERS_CACHE = 1.0      # seconds

    def membership(self):
        return self.client.call("membership", self.write_timeout)

    @property
    def peers(self):
        """The other members now (from the store's replicated table), the flags' peers when it is away."""
        from .replica import Peer
        when, members = self._members
        if members is None or time.monotonic() - when > self.MEMBERS_CACHE:
            try:
                members = self.membership()["members"]
                self._members = (time.monotonic(), members)
            except Unavailable:
                return list(self.config_peers)
        return [Peer(m["id"], m["raft"], m.get("api")) for m in members if not m.get("self")]

    def api_of(self, ident):
        return next((p.api for p in self.peers if p.id == ident), self.api_url if ident == self.id else None)

    CHANGE_WAIT = 30.0       # the store bounds a change by its own timeouts (store/membership.py)

    def add_member(self, ident, raft, api=None, force=False):
        self._members = (0.0, None)
        return self.client.call("add_member", self.CHANGE_WAIT, id=ident, raft=raft, api=api, force=force)

    def remove_member(self, ident):
        self._members = (0.0, None)
        return self.client.call("remove_member", self.CHANGE_WAIT, id=ident)

    # ---- state ----

    def _store_status(self):
        return self.client.call("status", self.write_timeout)

    def status(self):
        try:
            status = self._store_status()
        except Unavailable as exc:
            status = {"role": "unknown", "term": self.node.current_term, "leader": None, "commitIndex": 0,
                      "appliedIndex": 0, "revision": self.mirror.revision, "objects": self.mirror.count(),
                      "epoch": None, "fencedRejections": 0, "malformedCommands": 0, "connectedPeers": [],
                      "groupCommit": None, "tickGap": None, "gc": {"frozenObjects": 0},
                      "error": "%s: %s" % (UNREACHABLE, exc)}
        for private in ("ready", "tickGaps", "barriersSent"):
            status.pop(private, None)
        status.update(id=self.id, clusterId=self.cluster_id or status.get("clusterId"), api=self.api_url, reachable=True, mirrorRevision=self.mirror.revision, apiPid=os.getpid(),
                      apiGc=gc_tuning.status(),        # this worker's own collections
                      controllers=self.controller_status() if self.controller_status else None)
        return status

    def tick_gaps(self):
        try:
            return self._store_status()["tickGaps"]
        except Unavailable:
            return TickGapMeter().snapshot()        # nothing measured: the store is not there

    def ready(self):
        if not self.connected:
            return False, "%s (its change stream is down); the supervisor restarts it" % UNREACHABLE
        try:
            status = self._store_status()
        except Unavailable as exc:
            return False, "%s: %s" % (UNREACHABLE, exc)
        ready, reason = status["ready"]
        if ready and not self.wait_for_revision(status["revision"], 1.0):
            return False, "this worker's copy of the store is catching up: revision %d of %d" % (
                self.mirror.revision, status["revision"])
        return ready, reason

    def close(self):
        self._closed = True
        self.client.close()
