"""One control-plane replica's store: Raft member + watch log + reads and writes.

This is what the API layer talks to. Reads take the store lock only long enough
to collect references (stored objects are immutable), writes go through Raft.
"""
import dataclasses
import threading
import uuid

from shepherd_ha.model.namespaces import BOOTSTRAP_NAMESPACES, NAMESPACE_FINALIZER
from shepherd_ha.model.times import now_rfc3339

from . import commands, gc_tuning
from .group_commit import GroupCommitter
from .membership import MembershipChanger, majority
from .raft_node import RaftNode, Unavailable
from .read_barrier import ReadBarrier
from .fsm import MODIFIED
from .watch_log import DecodedWatchLog, WatchLog

WRITE_TIMEOUT = 2.0      # seconds a write or linearizable read may wait for Raft before 503


@dataclasses.dataclass
class Peer:
    id: str
    raft: str          # host:port
    api: str = None    # http://host:port


class Replica:
    def __init__(self, replica_id, settings, peers, api_url=None, write_timeout=WRITE_TIMEOUT,
                 watch_log_size=WatchLog.CAPACITY, on_leadership=None, previous_in_log=True):
        self.id = replica_id
        self.api_url = api_url
        self.config_peers = list(peers)             # the other replicas as the flags name them
        self.cluster_id = settings.cluster_id
        self.write_timeout = write_timeout
        # The changes as the FSM made them (objects as stored bytes), which the store process
        # streams to its API workers; `watch_log` is the same log with dicts, for readers here.
        self.change_log = WatchLog(watch_log_size)
        self.watch_log = DecodedWatchLog(self.change_log)
        # The change stream sends a modification without its previous version (the
        # worker's mirror has it): the store process need not keep it (cli/server.py).
        self._previous_in_log = previous_in_log
        self._on_leadership = on_leadership
        self.controller_status = None     # set by the controller manager, for the status report
        self._leading = False
        self.committer = None             # set just below; the Raft callbacks may fire as soon as it starts
        self.node = RaftNode(settings, self._log_changes, self.change_log.reset, self._leadership_changed)
        self.committer = GroupCommitter(self.node, stale_after=write_timeout)
        self.barrier = ReadBarrier(self.committer.call, write_timeout)
        self.changer = MembershipChanger(self)

    # ---- identity and membership (Raft's voters, named by the replicated table) ----

    def members(self, voters=None):
        """[{"id", "raft", "api"}] of every Raft member, this one included: ids and API URLs
        from the replicated table (store/membership.py), else from the flags."""
        voters = self.node.voters() if voters is None else voters
        with self.node.lock:
            table = dict(getattr(self.node.fsm, "members", None) or {})
        by_raft = {p.raft: {"id": p.id, "raft": p.raft, "api": p.api} for p in self.config_peers}
        by_raft[self.node.settings.self_address] = {"id": self.id, "raft": self.node.settings.self_address,
                                                    "api": self.api_url}
        for entry in table.values():
            if entry["raft"] != self.node.settings.self_address:
                by_raft[entry["raft"]] = dict(entry)
        return [by_raft.get(a, {"id": a, "raft": a, "api": None}) for a in voters]

    def member(self, ident):
        for entry in self.members():
            if entry["id"] == ident:
                return entry
        return None

    def api_of(self, ident):
        entry = self.member(ident) if ident else None
        return entry and entry["api"]

    @property
    def peers(self):
        """The other members now, as Peers (the cluster view asks each of them)."""
        return [Peer(m["id"], m["raft"], m["api"]) for m in self.members()
                if m["raft"] != self.node.settings.self_address]

    def membership(self):
        """Members, and on the leader each one's catch-up progress against the commit index."""
        node = self.node
        commit = node.commit_index()
        progress = self.changer.progress()
        rows = []
        for entry in self.members():
            row = dict(entry, voter=True)
            if entry["raft"] == node.settings.self_address:
                row.update(matchIndex=node.last_log_index(), self=True)
            elif entry["raft"] in progress:
                p = progress[entry["raft"]]
                row.update(matchIndex=p.match_index, lastAnswerSeconds=round(p.answer_age, 3),
                           caughtUp=p.caught_up(commit))
            rows.append(row)
        return {"members": rows, "leader": self.leader_id(), "commitIndex": commit,
                "quorum": majority(len(rows)), "changeInProgress": self.changer.current,
                "seenBy": self.id, "progressKnown": node.is_leader()}

    def add_member(self, ident, raft, api=None, force=False):
        return self.changer.add(ident, raft, api, force)

    def remove_member(self, ident):
        return self.changer.remove(ident)

    def id_of_address(self, address):
        for entry in self.members([address]):
            return entry["id"]
        return address

    def leader_id(self):
        address = self.node.leader_address()
        return None if address is None else self.id_of_address(address)

    # ---- reads ----

    def sync(self, consistent):
        """Make local state linearizable (consistent) or accept it as is."""
        if consistent:
            self.barrier.wait()

    def get(self, resource, namespace, name, consistent=True):
        self.sync(consistent)
        with self.node.lock:
            return self.node.fsm.get(resource, namespace, name), self.node.fsm.revision

    def list(self, resource, namespace=None, consistent=True, selection=None):
        self.sync(consistent)
        with self.node.lock:
            return self.node.fsm.list(resource, namespace, selection), self.node.fsm.revision

    def digest(self):
        """(revision, digest of the whole store) taken atomically."""
        with self.node.lock:
            return self.node.fsm.revision, self.node.fsm.digest()

    def revision(self):
        return self.node.fsm.revision

    # ---- writes ----

    def write(self, ops, key=None, epoch=None, timeout=None, digest=None):
        command = commands.write(ops, key or uuid.uuid4().hex, epoch, digest)
        return self.committer.call(command, timeout or self.write_timeout)

    def recall(self, key):
        """The outcome this replica remembers for an idempotency key, or None."""
        with self.node.lock:
            return self.node.fsm.recall(key)

    # ---- state ----

    def status(self):
        node = self.node
        fsm = node.fsm
        return {
            "id": self.id, "clusterId": self.cluster_id, "api": self.api_url, "raft": node.settings.self_address,
            "role": node.role(), "term": node.term(), "leader": self.leader_id(),
            "commitIndex": node.commit_index(), "appliedIndex": node.applied_index(),
            "revision": fsm.revision, "objects": fsm.count(), "epoch": list(fsm.epoch),
            "fencedRejections": fsm.fenced_rejections, "malformedCommands": fsm.malformed_commands,
            "groupCommit": {"groups": self.committer.groups_sent, "commands": self.committer.commands_sent},
            "controllers": self.controller_status() if self.controller_status else None,
            "connectedPeers": [self.id_of_address(a) for a in node.connected_peers()],
            "voters": [m["id"] for m in self.members()],
            "tickGap": self._tick_gap(), "gc": gc_tuning.status(), "raftLog": node.log_status(),
            "reachable": True,
        }

    def tick_gaps(self):
        """The Raft tick's gaps: window maximum, histogram buckets, sum (store/tick_gaps.py)."""
        return self.node.tick_gaps.snapshot()

    def _tick_gap(self):
        gaps = self.tick_gaps()
        return {"maxSeconds": round(gaps["maxSeconds"], 4), "windowSeconds": gaps["windowSeconds"],
                "longestSeconds": round(gaps["longestSeconds"], 4), "ticks": gaps["count"],
                "startupSeconds": round(gaps["startupSeconds"], 4)}

    def ready(self):
        """(ready, reason): knows a leader and has applied what it knows is committed."""
        if self.node.leader_address() is None:
            return False, "no Raft leader known (election in progress or no quorum)"
        if not self.node.caught_up():
            return False, "catching up: applied %d of %d committed entries" % (
                self.node.applied_index(), self.node.commit_index())
        missing = [ns for ns in BOOTSTRAP_NAMESPACES if self.node.fsm.get("namespaces", None, ns) is None]
        if missing:
            return False, "bootstrap namespaces not created yet: %s" % ", ".join(missing)
        return True, "ok"

    # ---- leadership ----

    def _log_changes(self, changes):
        if not self._previous_in_log:
            changes = [c._replace(previous=None) if c.type == MODIFIED else c for c in changes]
        self.change_log.append(changes)

    def _leadership_changed(self, leader):
        # Called on PySyncObj's tick thread: never block it.
        was_leader, self._leading = self._leading, leader
        if leader:
            threading.Thread(target=self._bootstrap, name="bootstrap", daemon=True).start()
        elif was_leader and self.committer is not None:
            self.committer.abandon_in_flight()
        if self._on_leadership is not None:
            self._on_leadership(leader)

    def _bootstrap(self):
        """A new leader makes sure the namespaces every cluster has exist."""
        for name in BOOTSTRAP_NAMESPACES:
            try:
                if self.node.fsm.get("namespaces", None, name) is not None:
                    continue
                obj = {"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": name, "uid": str(uuid.uuid4()),
                                    "creationTimestamp": now_rfc3339()},
                       "spec": {"finalizers": [NAMESPACE_FINALIZER]}, "status": {"phase": "Active"}}
                self.write([commands.create("namespaces", obj)],
                           key="bootstrap-namespace-%s-term-%d" % (name, self.node.term()), timeout=5.0)
            except Unavailable:
                pass  # the next leader tries again

    def close(self):
        self.node.destroy()

