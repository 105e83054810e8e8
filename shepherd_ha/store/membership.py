"""Membership change while serving: add or remove one replica, on the leader's store process.

PySyncObj's dynamic membership is Raft's single-server change: the new configuration
counts from the moment its entry is in the leader's log, not once it commits. There
are no learners: an added replica is a voter at once, and until it has caught up (a
snapshot, then the entries after it) the quorum of the new set must be found among
the others. So a change is only started when the NEW set keeps a quorum without
counting anyone who is behind:

  add X:    the caught-up members (the leader among them) are a majority of members + X
            (3 -> 4 needs all 3 caught up, 4 -> 5 needs 3 of 4); X is not counted.
  remove X: the caught-up members other than X are a majority of members - X.

"Caught up": answered within the last second, and holds entries (a new replica's match
index is 0 until its snapshot is in) up to CATCH_UP_LAG below the leader's commit index. One change at a time: a second
request while one runs is refused (409), and a new change waits until every entry in
the leader's log (an earlier change a previous leader left behind among them) has
committed. The leader itself is removed by handing leadership to a caught-up member
first; the new leader then removes it.

Besides Raft's voter set (addresses only), the replicated table of members (FSM
`members`: id, Raft address, API URL) tells every replica the others' ids and API
URLs, so the cluster view, forwarding and the clients follow the membership.
"""
import dataclasses
import threading
import time

from . import commands
from .raft_node import Unavailable

CATCH_UP_LAG = 100            # entries a follower may trail the commit index and count as caught up
ANSWER_AGE = 1.0              # seconds since a follower last answered the leader
CHANGE_TIMEOUT = 10.0         # seconds for the membership entry to commit
SETTLE_TIMEOUT = 3.0          # seconds for earlier entries (an earlier change) to commit first


class Refused(Exception):
    """A change that is not started: `code` 409 (conflict with the current state or another
    change), 422 (bad request), 503 (not now: no quorum, not caught up); the message names the fix."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class NotLeader(Exception):
    """This replica does not lead: the caller forwards to `leader` (an id, or None)."""

    def __init__(self, leader, leader_api):
        super().__init__("not the leader")
        self.leader, self.leader_api = leader, leader_api


@dataclasses.dataclass
class Progress:
    address: str
    match_index: int
    answer_age: float

    def caught_up(self, commit_index):
        return (self.answer_age <= ANSWER_AGE and self.match_index > 0
                and self.match_index >= commit_index - CATCH_UP_LAG)


def majority(size):
    return size // 2 + 1


def check_add(voters, leader, progress, commit_index, address, ident, known_ids, force=False):
    """None if adding `address` keeps a quorum, else Refused. `voters`: every member's address;
    `progress`: {address: Progress} of the other members, as the leader sees them."""
    if address in voters:
        raise Refused(409, "Raft address %s is already a member: remove it first, or add the new replica "
                           "at another address" % address)
    if ident in known_ids:
        raise Refused(409, "replica id %s is already a member: pick another id (or remove %s first)"
                           % (ident, ident))
    up = _caught_up(voters, leader, progress, commit_index)
    need = majority(len(voters) + 1)
    if len(up) < need and not force:
        raise Refused(503, "adding %s makes the quorum %d of %d, and only %d member(s) are caught up (%s); "
                           "the new replica has none of the log yet, so writes would stop until it caught up. "
                           "Remove a member that is gone for good first (remove-replica), bring lagging ones back, "
                           "or pass force to accept the stall"
                           % (ident, need, len(voters) + 1, len(up), ", ".join(sorted(up))))
    return None


def check_remove(voters, leader, progress, commit_index, address, ident):
    """None if removing `address` keeps a quorum among the rest, else Refused."""
    if address not in voters:
        raise Refused(404, "replica %s (Raft %s) is not a member: `sheepctl cluster status` lists them"
                           % (ident, address))
    if len(voters) == 1:
        raise Refused(409, "replica %s is the only member: a cluster keeps at least one" % ident)
    rest = [v for v in voters if v != address]
    up = [a for a in _caught_up(voters, leader, progress, commit_index) if a != address]
    need = majority(len(rest))
    if len(up) < need:
        raise Refused(503, "without %s the quorum is %d of %d, and only %d of them are caught up (%s): the "
                           "cluster would stop. Bring the other members back (or wait for them to catch up) first"
                           % (ident, need, len(rest), len(up), ", ".join(sorted(up)) or "none"))
    return None


def _caught_up(voters, leader, progress, commit_index):
    return [leader] + [a for a in voters if a != leader and a in progress
                       and progress[a].caught_up(commit_index)]


class MembershipChanger:
    """Runs membership changes on its replica (store/replica.py), one at a time."""

    def __init__(self, replica):
        self.replica = replica
        self._busy = threading.Lock()
        self.current = None             # what is being changed, for the status

    # ---- what the leader sees ----

    def progress(self):
        node = self.replica.node
        return {address: Progress(address, match, age)
                for address, (match, age) in node.replication_progress().items()}

    def _require_leader(self):
        node = self.replica.node
        if not node.is_leader():
            leader = self.replica.leader_id()
            raise NotLeader(leader, self.replica.api_of(leader))

    def _settle(self):
        """Every entry in the leader's log committed: no earlier change is still pending."""
        node = self.replica.node
        target = node.last_log_index()
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while node.commit_index() < target:
            if time.monotonic() >= deadline:
                raise Refused(503, "the leader's log is not committed up to index %d (at %d): an earlier change "
                                   "or the quorum is pending; retry in a moment" % (target, node.commit_index()))
            time.sleep(0.02)

    # ---- the changes ----

    def add(self, ident, raft, api, force=False):
        if not ident or not isinstance(ident, str) or "@" in ident or "," in ident or "/" in ident:
            raise Refused(422, "a replica id is a short name without @ , or / (e.g. r4), not %r" % (ident,))
        host, _, port = (raft or "").rpartition(":")
        if not host or not port.isdigit():
            raise Refused(422, "--raft must be HOST:PORT, not %r" % (raft,))
        if api is not None and not str(api).startswith(("http://", "https://")):
            raise Refused(422, "--api must be a URL like http://HOST:PORT, not %r" % (api,))
        with self._one_at_a_time("add %s" % ident):
            self._require_leader()
            self._settle()
            node = self.replica.node
            voters = node.voters()
            check_add(voters, node.settings.self_address, self.progress(), node.commit_index(), raft, ident,
                      {m["id"] for m in self.replica.members() if m["raft"] in voters}, force)
            # The table first: once the voter is in the log, every replica can name it.
            self._record(set_=self.replica.members(voters) + [{"id": ident, "raft": raft, "api": api}])
            node.add_member(raft, CHANGE_TIMEOUT)
            return self.replica.membership()

    def remove(self, ident):
        with self._one_at_a_time("remove %s" % ident):
            self._require_leader()
            self._settle()
            node = self.replica.node
            member = self.replica.member(ident)
            if member is None:
                raise Refused(404, "replica %s is not a member: `sheepctl cluster status` lists them" % ident)
            voters = node.voters()
            check_remove(voters, node.settings.self_address, self.progress(), node.commit_index(),
                         member["raft"], ident)
            if member["raft"] == node.settings.self_address:
                return self._hand_over(member)
            node.remove_member(member["raft"], CHANGE_TIMEOUT)
            self._record(set_=self.replica.members(node.voters()), remove=[ident])
            return self.replica.membership()

    def _hand_over(self, member):
        """Removing the leader: a caught-up member takes over, and the caller retries there."""
        node = self.replica.node
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while True:
            # PySyncObj hands over only to a member holding the leader's whole log: under writes
            # the most caught-up one may trail by an entry or two, so try again for a moment.
            commit = node.commit_index()
            candidates = sorted((p.match_index, p.address) for p in self.progress().values()
                                if p.caught_up(commit))
            try:
                if candidates and node.transfer_leadership(candidates[-1][1], 1.0):
                    break
            except Unavailable:
                pass
            if not node.is_leader():
                break                     # it moved (an election, or the transfer answered late)
            if time.monotonic() >= deadline:
                raise Refused(503, "leadership did not move away from %s within %.0fs (no caught-up member took "
                                   "over); retry" % (member["id"], SETTLE_TIMEOUT))
            time.sleep(0.05)
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while self.replica.leader_id() in (None, member["id"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        leader = self.replica.leader_id()
        raise NotLeader(leader, self.replica.api_of(leader))

    def _record(self, set_=(), remove=()):
        self.replica.committer.call(commands.members(set_, remove), CHANGE_TIMEOUT)

    def _one_at_a_time(self, what):
        changer = self

        class _Guard:
            def __enter__(self):
                if not changer._busy.acquire(blocking=False):
                    raise Refused(409, "another membership change is in progress (%s): wait for it to finish"
                                       % changer.current)
                changer.current = what

            def __exit__(self, *exc):
                changer.current = None
                changer._busy.release()
        return _Guard()
