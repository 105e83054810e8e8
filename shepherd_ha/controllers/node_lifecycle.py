"""Node lifecycle controller: nodes that stop sending heartbeats become NotReady, and
their pods are evicted so their owners recreate them elsewhere.

A heartbeat is, as Kubernetes' probeTimestamp, either of: the node's lease
(namespace kube-node-lease, same name as the node) changing resourceVersion, or
the Ready condition of the node's status getting a new lastHeartbeatTime (the
agent's status post). Liveness is judged only by when THIS leader saw one, on its
own monotonic clock (`store.clock`); the times agents wrote are compared for
change, never trusted as times. Every node gets a full grace period from the
moment this controller first sees it (a new leader has not seen any heartbeat
yet), lease or no lease.

- no heartbeat for `node_grace_period`: the node's Ready condition becomes
  Unknown (reason NodeStatusUnknown), its pods' Ready condition False (so the
  endpoints stop sending them traffic), and a Warning event NodeNotReady.
- `pod_eviction_timeout` later: its pods are deleted (uid precondition, one Raft
  entry), an Evicted event each; pods bound to it later are deleted too. Evictions
  start at a paced rate per zone, slower or not at all while many of a zone's nodes
  are NotReady at once (eviction_pacing.py).
- a heartbeat again: Ready True (reason NodeLeaseRenewed, or the agent's own
  status), event NodeReady.

Deadlines are delayed re-queues of the node's key (at most one pending per node),
never a ticker over all nodes.
"""
import copy
import threading

from shepherd_ha.model.node_lease import LEASE_NAMESPACE, renewal_late_after
from shepherd_ha.store import commands
from shepherd_ha.model.times import now_rfc3339

from .controller import Controller, Retry
from .eviction_pacing import EvictionPacer, zone_of


def ready_condition(obj):
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond
    return None


def with_ready_condition(obj, status, reason, message, now):
    """A copy of obj's status with its Ready condition set (others kept)."""
    new_status = copy.deepcopy(obj.get("status") or {})
    conditions = [c for c in new_status.get("conditions") or [] if not (isinstance(c, dict) and c.get("type") == "Ready")]
    old = ready_condition(obj)
    transition = old.get("lastTransitionTime") if old and old.get("status") == status else now
    cond = {"type": "Ready", "status": status, "reason": reason, "message": message,
            "lastTransitionTime": transition or now}
    # The agent's last heartbeat stays (as Kubernetes keeps it): `kubectl describe node` shows
    # when the node was last heard from, and an unchanged time is no new post (heartbeat_of).
    if heartbeat_of(old):
        cond["lastHeartbeatTime"] = old["lastHeartbeatTime"]
    conditions.append(cond)
    new_status["conditions"] = conditions
    return new_status


def _seconds(value):
    return "%ds" % round(value) if value >= 1 else "%.1fs" % value


def heartbeat_of(cond):
    """The Ready condition's lastHeartbeatTime, compared for change only (None: absent).
    This controller's own writes of the condition keep the one it had, so they are no post."""
    value = cond.get("lastHeartbeatTime") if cond is not None else None
    return value if isinstance(value, str) and value else None


class _Seen:
    __slots__ = ("lease_rv", "heartbeat", "since", "moved")

    def __init__(self, lease_rv, heartbeat, since):
        self.lease_rv = lease_rv      # the lease resourceVersion last seen (None: no lease)
        self.heartbeat = heartbeat    # the last lastHeartbeatTime seen in the Ready condition (None: none)
        self.since = since            # store.clock() when it was first seen or last heard from
        self.moved = False            # heard from (lease or status) since this controller started


class NodeLifecycleController(Controller):
    name = "node-lifecycle"
    watches = ("nodes", "leases", "pods")
    # Not paced (write_pacing.py): a renewal during the wait before marking a node Unknown
    # would be missed. Evictions have their own pace per zone (eviction_pacing.py).
    paced_writes = False

    def __init__(self, store, events=None, settings=None, now=now_rfc3339):
        super().__init__(store, events)
        self.grace = settings.node_grace_period
        # A node is at risk once its heartbeat is late (model/node_lease.py): the
        # controllers' writes yield while any node is (write_pacing.py).
        self.at_risk_after = renewal_late_after(settings.node_lease_interval, self.grace)
        self.eviction = settings.pod_eviction_timeout
        self.resync_period = settings.resync_period
        self.now = now                  # wall time, only for condition timestamps
        self._seen = {}                 # node name -> _Seen
        self._lease_heard = {}          # node name -> store.clock() when the informer passed on its lease's change
        self._evicting = frozenset()    # nodes past their eviction deadline
        self._lock = threading.Lock()
        self.pacer = EvictionPacer(settings)
        self._zones = {}                # node name -> (its zone, its Ready condition says True)
        self._all_down = False          # every zone was fully disrupted at the last count
        self._held = set()              # nodes past their deadline whose eviction waits for the pacer
        self._counts = None             # (clock time, {zone: (ready, not ready)}), kept a second

    def heartbeats_at_risk(self):
        """How many nodes' last heartbeat, as this controller saw it (its reconcile, or the
        informer passing on a lease change, whichever came last), is `at_risk_after` old
        but not yet a grace period: their renewals are late, not (yet) stopped. Called from
        the write pacer's thread: reads a copy of the table."""
        now = self.store.clock()
        oldest, newest = now - self.grace, now - self.at_risk_after
        heard = self._lease_heard
        return sum(1 for name, seen in list(self._seen.items())
                   if oldest < max(seen.since, heard.get(name, 0.0)) <= newest)

    # ---- keys: node names ----

    def keys_for(self, change):
        obj = change.object or change.previous
        meta = obj["metadata"]
        if change.resource == "nodes":
            return [meta["name"]]
        if change.resource == "leases":
            if meta.get("namespace") != LEASE_NAMESPACE:
                return []
            if change.object is not None:
                # Noted here, on the informer's thread, for heartbeats_at_risk: under load
                # this controller's queue may be seconds behind the renewals.
                self._lease_heard[meta["name"]] = self.store.clock()
            return [meta["name"]]
        # pods: only a pod landing on a node whose pods are being evicted matters
        node = ((change.object or {}).get("spec") or {}).get("nodeName")
        return [node] if node and node in self._evicting else []

    def all_keys(self):
        return [n["metadata"]["name"] for n in self.store.list("nodes")]

    # ---- reconcile ----

    def reconcile(self, name):
        node = self.store.get("nodes", None, name)
        if node is None:
            self._seen.pop(name, None)
            self._lease_heard.pop(name, None)
            self._zones.pop(name, None)
            self._held.discard(name)
            self._set_evicting(name, False)
            return None
        cond = ready_condition(node)
        self._zones[name] = (zone_of(node), cond is not None and cond.get("status") == "True")
        lease = self.store.get("leases", LEASE_NAMESPACE, name)
        lease_rv = lease["metadata"]["resourceVersion"] if lease else None
        heartbeat = heartbeat_of(cond)
        now = self.store.clock()
        seen = self._seen.get(name)
        if seen is None:
            seen = self._seen[name] = _Seen(lease_rv, heartbeat, now)    # first sight: a full grace period
        else:
            renewed = lease_rv is not None and lease_rv != seen.lease_rv
            # A status post: a new heartbeat time (our own writes drop it, which is no post).
            posted = heartbeat is not None and heartbeat != seen.heartbeat
            if renewed or posted:
                seen.since, seen.moved = now, True
            seen.lease_rv = lease_rv      # lease deleted (None): that is no renewal
            if heartbeat is not None:
                seen.heartbeat = heartbeat
        stale = now - seen.since
        if stale < self.grace:
            self._held.discard(name)
            self._set_evicting(name, False)
            self._recheck(name, seen.since + self.grace, now)
            return self._mark_ready(node, seen)
        deadline = seen.since + self.grace + self.eviction
        if stale < self.grace + self.eviction:
            self._set_evicting(name, False)
            self._recheck(name, deadline, now)
            return self._mark_unknown(node, stale, lease is not None)
        marked = self._mark_unknown(node, stale, lease is not None)
        if name not in self._evicting:
            held, why = self._eviction_held(name, now)
            if held:
                return "; ".join(s for s in (marked, why) if s) or None
        self._held.discard(name)
        self._set_evicting(name, True)
        evicted = self._evict(node, stale)
        return "; ".join(s for s in (marked, evicted) if s) or None

    def _count(self, now):
        counts = {}
        for name, (zone, says_ready) in self._zones.items():
            seen = self._seen.get(name)
            ready, not_ready = counts.get(zone, (0, 0))
            if not says_ready or (seen is not None and now - seen.since >= self.grace):
                counts[zone] = (ready, not_ready + 1)
            else:
                counts[zone] = (ready + 1, not_ready)
        return counts

    def _zone_counts(self, now):
        """{zone: (nodes Ready, nodes NotReady)}: lease stopped or Ready condition not True."""
        if self._counts is not None and now - self._counts[0] < 1.0:
            return self._counts[1]
        counts = self._count(now)
        states = self.pacer.states_of(counts)
        all_down = self.pacer.all_down(states)
        if all_down and not self._all_down:
            # As Kubernetes: evictions under way stop too; the nodes were cut off together.
            with self._lock:
                self._evicting = frozenset()
        elif self._all_down and not all_down:
            # Back from every zone down: each node not evicted gets a full grace period again.
            for name, seen in self._seen.items():
                if name not in self._evicting:
                    # (not moved: only its lease moving again makes an Unknown node Ready)
                    seen.since, seen.moved = now, False
                    self._recheck(name, now + self.grace, now)
            self._held.clear()
            self.pacer.reset()
            self.record("a node is Ready again after every zone was down: every other node gets a full grace "
                        "period again")
            counts = self._count(now)
            states = self.pacer.states_of(counts)
        self._all_down = all_down
        for zone, old, state, ready, not_ready in self.pacer.changed_states(states, counts):
            self.record('zone "%s" is %s (was %s): %d of %d nodes NotReady' % (
                zone, state, old, not_ready, ready + not_ready))
        self._counts = (now, counts)
        return counts

    def _eviction_held(self, name, now):
        """(False, None) when the pacer lets node `name` start its eviction now; else True,
        a sentence the first time (None after), and a re-check when it may ask again."""
        counts = self._zone_counts(now)
        seen = self._seen.get(name)
        if seen is not None and now - seen.since < self.grace + self.eviction:
            return True, None          # its grace period started again (every zone was down)
        zone = self._zones.get(name, ("", False))[0]
        allowed, wait, why = self.pacer.allow(zone, counts, now)
        if allowed:
            return False, None
        self._recheck(name, now + wait, now)
        if name in self._held:
            return True, None
        self._held.add(name)
        return True, 'the eviction of node %s\'s pods waits (zone "%s"): %s' % (name, zone, why)

    def _recheck(self, name, due, now):
        """Re-queue `name` at `due`, unless a re-check at or before then is pending (the
        queue keeps the earliest; a retry's backoff that replaced it re-checks sooner)."""
        self.queue.add_after(name, due - now)

    def _set_evicting(self, name, on):
        with self._lock:
            if on != (name in self._evicting):
                self._evicting = self._evicting | {name} if on else self._evicting - {name}

    def _write_node_status(self, node, status):
        meta = node["metadata"]
        self.write([commands.update("nodes", None, meta["name"], {"status": status}, subresource="status",
                                    precondition={"resourceVersion": meta["resourceVersion"],
                                                  "uid": meta.get("uid")})])

    def _mark_ready(self, node, seen):
        cond = ready_condition(node)
        if not seen.moved or (cond is not None and cond.get("status") != "Unknown"):
            # Only a heartbeat this leader saw brings a node back; a Ready False the
            # agent reported is the agent's to change.
            return None
        name = node["metadata"]["name"]
        self._write_node_status(node, with_ready_condition(node, "True", "NodeLeaseRenewed",
                                                           "node lease renewed", self.now()))
        if self.events:
            self.events.emit(node, "NodeReady", "node %s is ready: its lease is renewed again" % name)
        return "node %s is Ready: its lease moved again" % name

    def _mark_unknown(self, node, stale, has_lease=True):
        cond = ready_condition(node)
        if cond is not None and cond.get("status") == "Unknown":
            return None
        name = node["metadata"]["name"]
        message = "%s for %s and no status posted (grace period %s)" % (
            "node lease not renewed" if has_lease else "no node lease seen", _seconds(stale), _seconds(self.grace))
        self._write_node_status(node, with_ready_condition(node, "Unknown", "NodeStatusUnknown", message,
                                                           self.now()))
        if self.events:
            self.events.emit(node, "NodeNotReady", "node %s is not ready: %s" % (name, message), "Warning")
        unready = self._mark_pods_not_ready(name)
        return "node %s is NotReady: %s for %s and no status posted%s" % (
            name, "lease not renewed" if has_lease else "no lease seen", _seconds(stale),
            "; marked %d pod(s) not ready" % unready if unready else "")

    def _pods_on(self, name):
        return self.select("pods", self.store.list("pods"), lambda p: (p.get("spec") or {}).get("nodeName") == name)

    def _mark_pods_not_ready(self, name):
        writes = []
        for pod in self._pods_on(name):
            cond = ready_condition(pod)
            if cond is None or cond.get("status") != "True":
                continue
            meta = pod["metadata"]
            status = with_ready_condition(pod, "False", "NodeNotReady", "node %s is not ready" % name, self.now())
            writes.append([commands.update(
                "pods", meta.get("namespace"), meta["name"], {"status": status}, subresource="status",
                precondition={"resourceVersion": meta["resourceVersion"], "uid": meta.get("uid")})])
        if not writes:
            return 0
        # Best effort: a pod that changed meanwhile is left to its agent (or to eviction).
        return sum(1 for r in self.write_many(writes) if r.get("ok"))

    def _evict(self, node, stale):
        name = node["metadata"]["name"]
        pods = self._pods_on(name)
        if not pods:
            return None
        writes = [[commands.delete("pods", p["metadata"].get("namespace"), p["metadata"]["name"],
                                   precondition={"uid": p["metadata"].get("uid")})] for p in pods]
        results = self.write_many(writes)
        evicted, failed = [], []
        for pod, result in zip(pods, results):
            if result.get("ok"):
                evicted.append(pod)
            elif result.get("reason") != "NotFound":
                failed.append("%s/%s: %s" % (pod["metadata"].get("namespace"), pod["metadata"]["name"],
                                             result.get("message")))
        if self.events:
            for pod in evicted:
                self.events.emit(pod, "Evicted", "node %s not ready for %s" % (name, _seconds(stale)), "Warning")
        if failed:
            raise Retry("evicting pods of node %s: %d failed: %s" % (name, len(failed), "; ".join(failed[:3])))
        if not evicted:
            return None
        return "evicted %d pod(s) from node %s, not ready for %s: %s" % (
            len(evicted), name, _seconds(stale),
            ", ".join("%s/%s" % (p["metadata"].get("namespace"), p["metadata"]["name"]) for p in evicted[:10])
            + (" ..." if len(evicted) > 10 else ""))


def controllers(store, recorder, settings):
    return [NodeLifecycleController(store, recorder, settings)]
