"""Admission control: a bound on the requests a replica works on at once, by priority.

In the spirit of Kubernetes' API Priority and Fairness (much smaller): every request
but /healthz and /readyz needs a seat at its priority level before its handler runs,
and keeps it until its response is in the server's hands (api/app.py).

  system    node leases, Node objects and their status written by agents, agents'
            watches (and their pod lists by node)
  late      the lease renewal of a node whose heartbeat is late (its stored lease
            older than model/node_lease.py's renewal_late_after: 7.5 s for 5 s
            renewals and a 15 s grace period), when every system seat is busy: the
            renewal that keeps a node from being marked NotReady does not queue
            behind the fleet's on-time ones
  status    operators' and monitors' view of the replica: /shepherd/v1/replica,
            /metrics, /version (cheap, local); seats of their own so that a fleet
            holding every system seat does not hide which replica leads
  workload  everything else: ordinary reads and writes
  bulk      lists of large collections (pods, events, leases, ...) without a label or
            field selector, and watches that start with such a list

Each level owns a share of --max-requests-inflight seats and a FIFO queue as long as
its seats. A request that finds every seat taken waits in the queue for at most
--request-queue-wait seconds; a full queue or a wait that runs out is a 429 with
`Retry-After`. Levels do not lend seats, so a burst of 30,000-pod lists waits (or is
refused) in `bulk` while lease renewals still find free `system` seats. A late lease
renewal looks for a `late` seat only while `system` has none free (the age of the lease
is read from this replica's copy of the store, so only then), and nobody else may take
one: under a flood of renewals, those whose earlier tries failed go first (while `late`
has room; beyond it they queue in `system` as before).

Long-running requests (watches, followed pod logs) hold their seat only while they
start (the watch's initial list), like Kubernetes after a watch's init, but they hold
a server thread for their whole life: they also take a slot of one of two pools,
agents' watches (3/4 of --max-watches) and everyone else's (1/4), refused at once
with 429 when full. In everyone else's pool one user (without tokens: one client
address) holds at most --max-watches-per-user slots, so one cannot take them all.

Seats only help if a request reaches this code: waitress must have a thread for every
seat, every queued request and every long-running slot in use, plus spares for the
exempt paths and for answering 429s, or requests would wait in waitress's own queue,
unclassified. The threads besides the watches (threads_without_watches) are started
with the worker; one for each slot as watches take them (api/thread_budget.py, told by
observe_long_running), up to threads_needed.

The module is plain Python (no Flask) so it can be tested alone; app.py wires it in.
"""
import collections
import dataclasses
import logging
import math
import threading
import time

log = logging.getLogger("shepherd_ha.api")

from shepherd_ha.model.node_lease import LEASE_NAMESPACE, renewal_late_after
from shepherd_ha.options import ConfigError

SYSTEM, STATUS, WORKLOAD, BULK, LATE = "system", "status", "workload", "bulk", "late"
LONG_RUNNING_SYSTEM, LONG_RUNNING_OTHER = "long-running-system", "long-running"
# Shares of --max-requests-inflight: 16 / 2 / 45 / 1 / 2 of 66, i.e. 16 / 2 / 44 / 1 / 2 seats
# of the default 64 (65 in all: each level's seats are rounded up). Bulk
# stays tiny on purpose: a big list is CPU under the GIL, so two at once are no faster
# than one after the other, and each one more slows everything else down, the Raft
# tick included (docs/benchmarks.md, flow control). Half the seats to system (32 / 31 / 1)
# was tried at 1,000 nodes: fewer 429s for renewals, but no clear change in nodes falsely
# NotReady or in convergence over two runs each (docs/benchmarks.md, run N).
# Status got its 2 seats when a 1,000-node fleet's renewals, queued in system, kept
# /shepherd/v1/replica from answering for a minute (docs/benchmarks.md, run O).
# Late renewals got 2 seats of their own when, at 1,000 nodes, a node whose renewals had
# failed waited in the same queue as the on-time ones until its grace period ran out
# (docs/benchmarks.md, run AI).
SHARES = {SYSTEM: 16, STATUS: 2, WORKLOAD: 45, BULK: 1, LATE: 2}
SYSTEM_WATCH_SHARE = 0.75
RETRY_AFTER = {SYSTEM: 1, STATUS: 1, WORKLOAD: 1, BULK: 2, LATE: 1, LONG_RUNNING_SYSTEM: 1, LONG_RUNNING_OTHER: 2}
SPARE_THREADS = 16      # exempt paths (/healthz, /readyz) and 429 answers
GROUP_NODES = "system:nodes"
AGENT_USER_AGENT = "shepherd-agent/"        # agent/main.py's client

EXEMPT_PATHS = frozenset(("/healthz", "/readyz"))
# The cluster view is not here: it waits on the other replicas (0.5 s each when one is
# down), and what it asks them for (/shepherd/v1/replica) is.
STATUS_PATHS = frozenset(("/metrics", "/version", "/version/", "/shepherd/v1/replica"))
BULK_PATHS = frozenset(("/shepherd/v1/snapshot",))     # every object of the store, streamed
LARGE_COLLECTIONS = frozenset(("pods", "events", "leases", "nodes", "endpoints", "controllerrevisions"))
_DESCRIPTIONS = {
    SYSTEM: "node leases, node status and agents' watches",
    STATUS: "replica status, metrics and version",
    WORKLOAD: "ordinary reads and writes",
    BULK: "lists of large collections without a label or field selector",
    LATE: "renewals of node leases that are late",
    LONG_RUNNING_SYSTEM: "agents' watches",
    LONG_RUNNING_OTHER: "watches and followed logs of people and tools",
}
_ADVICE = {
    SYSTEM: "retry after %d s or use another replica",
    STATUS: "retry after %d s or use another replica",
    WORKLOAD: "retry after %d s or use another replica",
    BULK: "retry after %d s, narrow the list with a label or field selector, or use another replica",
    LATE: "retry after %d s or use another replica",
    LONG_RUNNING_SYSTEM: "retry after %d s or use another replica",
    LONG_RUNNING_OTHER: "close watches you no longer need, retry after %d s, or use another replica",
}


@dataclasses.dataclass(frozen=True)
class Classification:
    level: str                      # priority level of the seat; None: exempt, no seat at all
    long_running: str = None        # the long-running pool it also needs, or None
    lease: str = None               # a node lease renewal: the node's name (a `late` seat, maybe)


class Rejected(Exception):
    """No seat (or slot): answer 429 with this message and Retry-After."""

    def __init__(self, level, reason, message, retry_after):
        super().__init__(message)
        self.level, self.reason, self.message, self.retry_after = level, reason, message, retry_after


class Level:
    """`seats` requests at once; up to `queue_length` more wait for a seat, oldest first."""

    def __init__(self, name, seats, queue_length):
        self.name, self.seats, self.queue_length = name, seats, queue_length
        self.in_flight = 0
        self.dispatched = 0
        self.rejected = collections.Counter()    # reason -> count
        self.wait_seconds = 0.0                   # total time admitted requests queued
        self._waiting = collections.deque()       # one Event per queued request
        self._lock = threading.Lock()
        self.on_change = None                     # a pool's: called after in_flight moved (thread_budget.py)
        self.observer_failures = 0

    @property
    def queued(self):
        return len(self._waiting)

    def acquire(self, timeout, count_full=True):
        """Take a seat, waiting up to `timeout` s in the queue; (True, None) or (False, reason).
        count_full=False: a full level is not counted as a refusal (the caller tries another)."""
        with self._lock:
            taken = self.in_flight < self.seats and not self._waiting
            if taken:
                self.in_flight += 1
                self.dispatched += 1
            elif len(self._waiting) >= self.queue_length or timeout <= 0:
                # a pool without a queue is simply at its limit
                reason = "queue-full" if self.queue_length else "concurrency-limit"
                if count_full:
                    self.rejected[reason] += 1
                return False, reason
            else:
                granted = threading.Event()
                self._waiting.append(granted)
        if taken:
            self._changed()      # outside the lock: an observer may start threads
            return True, None
        start = time.monotonic()
        granted.wait(timeout)
        with self._lock:
            # release() hands a seat over by setting the event under this lock, so the
            # event, read here under it, says for sure whether this request got one.
            if not granted.is_set():
                self._waiting.remove(granted)
                self.rejected["time-out"] += 1
                return False, "time-out"
            self.dispatched += 1
            self.wait_seconds += time.monotonic() - start
            return True, None

    def busy(self):
        """Every seat taken, or requests waiting for one."""
        with self._lock:
            return self.in_flight >= self.seats or bool(self._waiting)

    def has_room(self, timeout):
        """Whether acquire(timeout) would seat or queue a request now (nothing counted)."""
        with self._lock:
            if self.in_flight < self.seats and not self._waiting:
                return True
            return len(self._waiting) < self.queue_length and timeout > 0

    def refuse_if_full(self, timeout):
        """What acquire(timeout) would refuse with right now, counted as its refusal
        ("queue-full" or, without a queue, "concurrency-limit"); None, taking nothing,
        if it would not."""
        with self._lock:
            if self.in_flight < self.seats and not self._waiting:
                return None
            if len(self._waiting) < self.queue_length and timeout > 0:
                return None
            reason = "queue-full" if self.queue_length else "concurrency-limit"
            self.rejected[reason] += 1
            return reason

    def release(self):
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()    # the seat passes on: in_flight is unchanged
                return
            self.in_flight -= 1
        self._changed()

    def _changed(self):
        # Never raises: the slot is taken (or given back) either way, and a caller that
        # got an exception here would never release what it holds.
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:     # noqa: BLE001 - logged; the observer counts its own failures
                self.observer_failures += 1
                if self.observer_failures <= 3 or self.observer_failures % 100 == 0:     # not on every watch
                    log.exception("flow control: the long-running slot observer failed (%d times)",
                                  self.observer_failures)

    def pressure(self):
        """(how full the queue is, 0 to 1; requests refused so far)."""
        with self._lock:
            return len(self._waiting) / max(1, self.queue_length), sum(self.rejected.values())

    def snapshot(self):
        with self._lock:
            return {"seats": self.seats, "queueLength": self.queue_length, "inFlight": self.in_flight,
                    "queued": len(self._waiting), "dispatched": self.dispatched,
                    "rejected": dict(self.rejected), "waitSeconds": self.wait_seconds}


class PerUser:
    """Long-running slots by user: at most `limit` each (0: no limit)."""

    def __init__(self, limit):
        self.limit = limit
        self.held = collections.Counter()
        self.rejected = 0
        self._lock = threading.Lock()

    def acquire(self, user):
        with self._lock:
            if self.limit and self.held[user] >= self.limit:
                self.rejected += 1
                return False
            self.held[user] += 1
            return True

    def release(self, user):
        with self._lock:
            self.held[user] -= 1
            if self.held[user] <= 0:
                del self.held[user]


class _UserSlot:
    """A PerUser slot as a Level-like thing a Ticket releases."""

    def __init__(self, per_user, user, pool):
        self.per_user, self.user, self.pool = per_user, user, pool

    def release(self):
        self.per_user.release(self.user)
        self.pool.release()


class Ticket:
    """What an admitted request holds: its seat until the handler returns, and its
    long-running slot (if any) until its response is closed. Each releases once."""

    def __init__(self, seat, slot):
        self._seat, self._slot = seat, slot
        self._lock = threading.Lock()

    def _take(self, name):
        with self._lock:
            level = getattr(self, name)
            setattr(self, name, None)
        if level is not None:
            level.release()

    def release_seat(self):
        self._take("_seat")

    def release_slot(self):
        self._take("_slot")

    def release(self):
        self.release_seat()
        self.release_slot()


def seats_by_level(max_inflight, shares=None):
    """Each level's seats: its share of the limit, rounded up, at least one."""
    shares = shares or SHARES
    total = sum(shares.values())
    return {name: max(1, math.ceil(max_inflight * share / total)) for name, share in shares.items()}


# Defaults of the server options --max-requests-inflight, --max-watches, --request-queue-wait.
MAX_INFLIGHT = 64
MAX_WATCHES = 4096
QUEUE_WAIT = 1.0
MAX_WATCHES_PER_USER = 16        # --max-watches-per-user: of the people-and-tools pool (1,024 by default)


class FlowControl:
    """max_inflight: seats over all levels (0: no limit); max_watches: long-running
    requests at once (0: no limit); queue_wait: seconds a request may wait for a seat."""

    def __init__(self, max_inflight=MAX_INFLIGHT, max_watches=MAX_WATCHES, queue_wait=QUEUE_WAIT, replica_id=None,
                 shares=None, max_watches_per_user=MAX_WATCHES_PER_USER, late_after=None):
        self.max_inflight, self.max_watches, self.queue_wait = max_inflight, max_watches, queue_wait
        # A lease renewal is late when its stored lease is older than this (None: never;
        # the server's is from its --node-lease-interval and --node-grace-period).
        self.late_after = late_after
        self.lease_age = None       # node name -> seconds since its stored lease's renewTime, or None (app.py)
        self.lease_age_failures = 0
        self.per_user = PerUser(max_watches_per_user)
        self.where = " on replica %s" % replica_id if replica_id else ""
        self.levels = {}
        if max_inflight > 0:
            for name, seats in seats_by_level(max_inflight, shares).items():
                self.levels[name] = Level(name, seats, seats)
        self.pools = {}
        if max_watches > 0:
            system = max(1, int(max_watches * SYSTEM_WATCH_SHARE))
            self.pools[LONG_RUNNING_SYSTEM] = Level(LONG_RUNNING_SYSTEM, system, 0)
            self.pools[LONG_RUNNING_OTHER] = Level(LONG_RUNNING_OTHER, max(1, max_watches - system), 0)

    @classmethod
    def from_values(cls, values, replica_id=None):
        """From resolved server options; ConfigError names a bad one."""
        for key in ("max_requests_inflight", "max_watches", "request_queue_wait"):
            if values[key] < 0:
                raise ConfigError("--%s must be 0 or more (0: %s)" % (key.replace("_", "-"),
                                  "no wait" if key == "request_queue_wait" else "no limit"))
        per_user = values.get("max_watches_per_user", MAX_WATCHES_PER_USER)
        if per_user < 0:
            raise ConfigError("--max-watches-per-user must be 0 or more (0: no limit)")
        interval, grace = values.get("node_lease_interval"), values.get("node_grace_period")
        late_after = None if interval is None or grace is None else renewal_late_after(interval, grace)
        return cls(values["max_requests_inflight"], values["max_watches"], values["request_queue_wait"], replica_id,
                   max_watches_per_user=per_user, late_after=late_after)

    def threads_without_watches(self):
        """Server threads that every seat, queued request and spare answer need besides
        the long-running requests, or None when a limit is off (api/thread_budget.py)."""
        if not self.levels or not self.pools:
            return None
        return sum(level.seats + level.queue_length for level in self.levels.values()) + SPARE_THREADS

    def long_running_held(self):
        """Long-running slots (watches, followed logs) in use now."""
        return sum(pool.in_flight for pool in self.pools.values())

    def observe_long_running(self, callback):
        """Call `callback()` whenever a long-running slot is taken or given back (one
        observer: a second call replaces the first)."""
        for pool in self.pools.values():
            pool.on_change = callback

    def threads_needed(self):
        """Server threads that let every seat, queued request and long-running slot
        have one, or None when a limit is off (nothing bounds the threads then)."""
        without = self.threads_without_watches()
        return None if without is None else without + sum(pool.seats for pool in self.pools.values())

    def describe(self):
        seats = ", ".join("%s %d" % (n, l.seats) for n, l in self.levels.items()) or "no limit"
        watches = ", ".join("%s %d" % (n, p.seats) for n, p in self.pools.items()) or "no limit"
        return "seats %s (queues as long, %.1f s wait); long-running %s" % (seats, self.queue_wait, watches)

    # ---- classification ----

    def classify(self, method, path, args, groups=None, authenticated=False, user_agent=None):
        """The Classification of one request. args: its query (a mapping); groups: the
        caller's groups when tokens are on (authenticated=True); without tokens every
        caller is anonymous and paths (and, for watches, the agent's User-Agent) decide."""
        if path in EXEMPT_PATHS:
            return Classification(None)
        if path in STATUS_PATHS:
            return Classification(STATUS)
        if path in BULK_PATHS:
            return Classification(BULK)
        agent = GROUP_NODES in (groups or ()) if authenticated else None   # None: cannot tell
        resource, namespace, name, sub = object_path(path)
        watch = method == "GET" and name is None and _true(args.get("watch"))
        follow = method == "GET" and sub == "log" and _true(args.get("follow"))
        if watch or follow:
            by_agent = agent if agent is not None else \
                (_agent_shaped(resource, name, args) or _agent_client(user_agent))
            pool = LONG_RUNNING_SYSTEM if watch and by_agent else LONG_RUNNING_OTHER
            # A watch without a revision starts with a list of everything it matches.
            starts_with_list = watch and args.get("resourceVersion") in (None, "", "0")
            if starts_with_list and _bulk_list(resource, args):
                return Classification(BULK, pool)
            return Classification(SYSTEM if watch and by_agent else WORKLOAD, pool)
        if method == "GET" and name is None and _bulk_list(resource, args):
            return Classification(BULK)
        if agent is not False and _liveness(method, resource, namespace, name, args):
            renewal = resource == "leases" and name is not None and method in ("PUT", "PATCH")
            return Classification(SYSTEM, lease=name if renewal else None)
        return Classification(WORKLOAD)

    # ---- admission ----

    def admit(self, classification, user=None):
        """A Ticket, or Rejected. A long-running slot is taken first and never waited
        for (a watch that cannot start now is better retried than queued). `user`: who
        asks (a user name, or a client address without tokens), for the per-user bound."""
        if classification.level is None:
            return Ticket(None, None)
        slot = self.pools.get(classification.long_running) if classification.long_running else None
        if slot is not None:
            # The user's own bound first: a refusal there never takes (and gives back) a
            # pool slot, which would start server threads for nothing (api/thread_budget.py).
            per_user = classification.long_running == LONG_RUNNING_OTHER and user is not None
            if per_user and not self.per_user.acquire(user):
                slot.rejected["per-user"] += 1
                raise Rejected(slot.name, "per-user", "too many watches: %s already holds %d watches or "
                               "followed logs%s, the most one user may (the limit is --max-watches-per-user); "
                               "close watches you no longer need, or watch a wider selection with one"
                               % (user, self.per_user.limit, self.where), RETRY_AFTER[slot.name])
            ok, reason = slot.acquire(0)
            if not ok:
                if per_user:
                    self.per_user.release(user)
                raise self._rejection(slot, reason)
            if per_user:
                slot = _UserSlot(self.per_user, user, slot)
        seat, ok, reason = self._take_seat(classification)
        if not ok:
            if slot is not None:
                slot.release()
            raise self._rejection(seat, reason)
        return Ticket(seat, slot)

    def _take_seat(self, classification):
        """(level, ok, reason): a seat at the request's level, or at `late`, waiting up to
        queue_wait; (None, True, None) for a request that needs none."""
        level = self._level_of(classification)
        if level is None:
            return None, True, None
        if level.name == LATE:
            ok, reason = level.acquire(self.queue_wait, count_full=False)
            if ok or reason == "time-out":
                return level, ok, reason
            level = self.levels[classification.level]    # filled since it was chosen: queue in system, as before
        ok, reason = level.acquire(self.queue_wait)
        return level, ok, reason

    def refuse_if_full(self, classification):
        """Rejected if the request's level would refuse it at once now (every seat busy and
        the queue full, or no queue wait), counted as a refusal of that level; None
        otherwise. For requests without a long-running pool: early_refusal.py answers
        these before the app."""
        seat = self._level_of(classification)
        if seat is not None and seat.name == LATE and not seat.has_room(self.queue_wait):
            seat = self.levels.get(classification.level)     # filled since it was chosen
        reason = seat.refuse_if_full(self.queue_wait) if seat is not None else None
        return self._rejection(seat, reason) if reason else None

    def _level_of(self, classification):
        """The level whose seat the request takes: its own, or `late` for the renewal of a
        late lease while every system seat is busy and `late` has room (when many nodes
        are late at once, after a stall, the rest queue in `system` as before)."""
        level = self.levels.get(classification.level)
        late = self.levels.get(LATE)
        if classification.lease is None or level is None or late is None or not level.busy() \
                or not late.has_room(self.queue_wait):
            return level
        return late if self._late(classification.lease) else level

    def _late(self, node):
        if self.lease_age is None or self.late_after is None:
            return False
        try:
            age = self.lease_age(node)
        except Exception:     # noqa: BLE001 - a renewal is never refused for this: it queues as before
            self.lease_age_failures += 1
            if self.lease_age_failures <= 3 or self.lease_age_failures % 100 == 0:
                log.exception("flow control: reading the age of node %s's lease failed (%d times)",
                              node, self.lease_age_failures)
            return False
        return age is not None and age >= self.late_after

    def _rejection(self, level, reason):
        retry = RETRY_AFTER[level.name]
        if level.name in self.pools:
            what = "%d of %d long-running requests (%s) are open%s" % (
                level.seats, level.seats, _DESCRIPTIONS[level.name], self.where)
            limit = "--max-watches"
        elif reason == "queue-full":
            what = "priority level %s (%s) has every seat busy (%d) and a full queue (%d)%s" % (
                level.name, _DESCRIPTIONS[level.name], level.seats, level.queue_length, self.where)
            limit = "--max-requests-inflight"
        else:
            what = "priority level %s (%s) had no seat free (of %d) within %.1f s%s" % (
                level.name, _DESCRIPTIONS[level.name], level.seats, self.queue_wait, self.where)
            limit = "--max-requests-inflight"
        message = "too many requests: %s; %s (the limit is %s)" % (what, _ADVICE[level.name] % retry, limit)
        return Rejected(level.name, reason, message, retry)

    def system_pressure(self):
        """(how full its queue is now, 0 to 1; requests refused so far) at the system level
        (node heartbeats); (0, 0) without a bound. The controllers' write pacer reads it."""
        level = self.levels.get(SYSTEM)
        return level.pressure() if level is not None else (0.0, 0)

    def snapshot(self):
        """{level or pool name: its counters}, for /metrics."""
        return {name: level.snapshot() for name, level in list(self.levels.items()) + list(self.pools.items())}


def _true(value):
    return value is not None and value.lower() in ("1", "true", "yes")     # as api/bodies.flag


def object_path(path):
    """(resource, namespace, name, subresource) of an object path, Nones where absent."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        rest = parts[3:]
    else:
        return None, None, None, None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    rest = rest + [None] * (3 - len(rest))
    return rest[0], namespace, rest[1], rest[2]


def _selected(args):
    return bool(args.get("labelSelector") or args.get("fieldSelector"))


def _bulk_list(resource, args):
    return resource in LARGE_COLLECTIONS and not _selected(args)


def _node_field_selector(args):
    return (args.get("fieldSelector") or "").replace(" ", "").startswith("spec.nodeName=")


def _agent_client(user_agent):
    """Without tokens: the agent's DNS, proxy and pod network watch Services, Endpoints
    and Nodes, which only its User-Agent tells apart from a person's watch (agents on
    one host share an address, so counted per user they hit --max-watches-per-user).
    Anyone may send it, but without tokens anyone may do anything anyway."""
    return bool(user_agent) and user_agent.startswith(AGENT_USER_AGENT)


def _agent_shaped(resource, name, args):
    """Without tokens: an agent's pod watch selects the pods of its node."""
    return resource == "pods" and name is None and _node_field_selector(args)


def _liveness(method, resource, namespace, name, args):
    """What keeps nodes alive: their lease, their Node and its status, the pods of a node."""
    if resource == "leases" and namespace == LEASE_NAMESPACE:
        return name is not None or method == "POST"
    if resource == "nodes" and namespace is None:
        return name is not None or method == "POST"
    return resource == "pods" and method == "GET" and name is None and _node_field_selector(args)
