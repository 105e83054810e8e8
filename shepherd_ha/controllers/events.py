"""Events from controllers: what happened to an object, aggregated, best effort.

An event's name is derived from what it says (model/events.py), so the same thing
happening again updates that event (`count` + 1, new `lastTimestamp`) instead of
adding one: repeats cost nothing in the store.
A failed event write is logged and dropped: events never block a controller.

Events are rate limited (`EventBudget`: --event-qps, --event-burst), one budget per
component as each of Kubernetes' components has its own rate-limited client (the
scheduler's Scheduled events cannot crowd out the controller manager's NodeNotReady or
Evicted); one over the budget is dropped and counted
(`shepherd_controller_events_dropped_total{component}`). Kubernetes' components drop
theirs too: events go out through a rate-limited client from a bounded queue that drops
what it cannot hold. Without it, a rollout of 30,000 pods wrote 30,000 Scheduled events, a
quarter of its changes, and the event pruner then deleted 20,000 of them.
"""
import logging
import threading

from shepherd_ha.model.events import event_name, event_namespace, new_event
from shepherd_ha.store import commands
from shepherd_ha.store.raft_node import Unavailable
from shepherd_ha.model.times import now_rfc3339
from shepherd_ha.store.stamping import stamp_new
from shepherd_ha.token_bucket import TokenBucket

log = logging.getLogger("shepherd_ha.controllers")


def involved_reference(obj):
    meta = obj.get("metadata", {})
    ref = {"kind": obj.get("kind"), "apiVersion": obj.get("apiVersion"), "name": meta.get("name"),
           "uid": meta.get("uid")}
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return ref


def _where(obj, reason, message, type_):
    """(involvedObject, namespace, name) of the event saying `reason: message` about `obj`."""
    ref = involved_reference(obj)
    return ref, event_namespace(ref), event_name(ref, reason, message, type_)


def event_op(store, obj, reason, message, type_, now, component):
    """The op that records `reason: message` about `obj`, read against `store` now: a create,
    or the count-increment update (resourceVersion precondition) of the same event."""
    ref, namespace, name = _where(obj, reason, message, type_)
    existing = store.get("events", namespace, name)
    if existing is None:
        return commands.create("events", stamp_new(new_event(ref, reason, message, type_, now,
                                                             component=component)))
    event = dict(existing, count=existing.get("count", 1) + 1, lastTimestamp=now)
    return commands.update("events", namespace, name, event,
                           precondition={"resourceVersion": existing["metadata"]["resourceVersion"]})


class EventBudget:
    """How many events one component may write: `burst` at once, `rate` per second."""

    def __init__(self, rate, burst, clock=None):
        self._tokens = TokenBucket(rate, burst) if clock is None else TokenBucket(rate, burst, clock)
        self._lock = threading.Lock()
        self.dropped = 0

    def allow(self):
        """True if one more event may be written now; else counts it dropped."""
        if self._tokens.take():
            return True
        with self._lock:
            self.dropped += 1
            dropped = self.dropped
        if dropped == 1 or dropped % 1000 == 0:
            log.info("%d event(s) dropped so far: over --event-qps %g (--event-burst %g)",
                     dropped, self._tokens.rate, self._tokens.burst)
        return False


class EventBudgets:
    """An EventBudget per component, made on first use; they outlive controller epochs."""

    def __init__(self, rate, burst, clock=None):
        self.rate, self.burst, self.clock = rate, burst, clock
        self._lock = threading.Lock()
        self._budgets = {}

    def of(self, component):
        with self._lock:
            if component not in self._budgets:
                self._budgets[component] = EventBudget(self.rate, self.burst, self.clock)
            return self._budgets[component]

    def dropped(self):
        """{component: events dropped}."""
        with self._lock:
            return {component: budget.dropped for component, budget in sorted(self._budgets.items())}


class EventRecorder:
    def __init__(self, store, component, now=now_rfc3339, budget=None):
        self.store = store
        self.component = component
        self.now = now
        self.budget = budget        # this component's EventBudget, or None: no limit

    def admits(self):
        """Whether one more event may be written now (one over the budget is counted dropped)."""
        return self.budget is None or self.budget.allow()

    def emit(self, obj, reason, message, type_="Normal"):
        """Record that `reason: message` happened to `obj`. Returns the event or None
        (dropped: over the budget, no quorum, or refused)."""
        if not self.admits():
            return None
        _, namespace, name = _where(obj, reason, message, type_)
        now = self.now()
        for _ in range(3):      # a lost race with another writer of the same event: read it again
            op = event_op(self.store, obj, reason, message, type_, now, self.component)
            try:
                result = self.store.write([op])
            except Unavailable as exc:
                log.info("event %s/%s dropped: %s", namespace, name, exc)
                return None
            if result.get("ok"):
                return result["results"][0]["object"]
            if result.get("reason") not in ("Conflict", "AlreadyExists"):
                log.info("event %s/%s dropped: %s", namespace, name, result.get("message"))
                return None
        return None
