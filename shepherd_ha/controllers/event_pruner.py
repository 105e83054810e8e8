"""Event pruner: keeps events bounded, at most `event_max` of them (the oldest by
lastTimestamp go first) and none older than `event_ttl` (by lastTimestamp).

The pruner keeps an index of every event's lastTimestamp, fed by the informer
(and rebuilt on the framework's resync); it never scans the store on its own.
It has one key, "prune": queued when the index holds more than `event_max`
events, and delayed until the oldest event expires. A pass deletes the expired
events and, past `event_max`, the oldest ones down to 90% of `event_max` (so a
steady stream of new events costs one batch per tenth of the limit, not one
delete per event), in one write_many per 500, each with the
resourceVersion it judged as precondition: an event repeated meanwhile (count + 1,
new lastTimestamp) is kept.

Ages are wall-clock (lastTimestamp is RFC 3339 UTC, written by whichever leader
recorded the event), so a failover does not make old events young again.
"""
import heapq
import threading
import time

from shepherd_ha.model.times import parse_seconds
from shepherd_ha.store import commands

from .controller import Controller

KEY = "prune"
BATCH = 500


def event_time(event):
    """Seconds since the epoch of an event's lastTimestamp (falling back to
    firstTimestamp, eventTime, then metadata.creationTimestamp); 0 when none parses
    (such an event counts as the oldest)."""
    for value in (event.get("lastTimestamp"), event.get("firstTimestamp"), event.get("eventTime"),
                  (event.get("metadata") or {}).get("creationTimestamp")):
        seconds = parse_seconds(value)
        if seconds is not None:
            return seconds
    return 0.0


class EventPruner(Controller):
    name = "event-pruner"
    watches = ("events",)

    def __init__(self, store, events=None, settings=None, wall=time.time):
        super().__init__(store, events)
        self.ttl = settings.event_ttl
        self.max = settings.event_max
        self.low_water = max(1, self.max - self.max // 10)
        self.resync_period = settings.resync_period
        self.wall = wall
        self._lock = threading.Lock()
        self._index = {}             # (namespace, name) -> (time, resourceVersion)
        self._due = None             # wall time the pending expiry pass is for

    def _entry(self, event):
        meta = event["metadata"]
        return (meta.get("namespace") or "", meta["name"]), (event_time(event), meta.get("resourceVersion"))

    def keys_for(self, change):
        with self._lock:
            if change.object is None:
                key, _ = self._entry(change.previous)
                self._index.pop(key, None)
                return []
            key, entry = self._entry(change.object)
            self._index[key] = entry
            over = len(self._index) > self.max
        if over:
            return [KEY]
        self._schedule(entry[0] + self.ttl)
        return []

    def all_keys(self):
        index = dict(self._entry(e) for e in self.store.list("events"))
        with self._lock:
            self._index = index
            self._due = None
        return [KEY]

    def _schedule(self, expiry):
        """Make sure a pass runs by `expiry` (wall time)."""
        with self._lock:
            if self._due is not None and self._due <= expiry:
                return
            self._due = expiry
        self.queue.add_after(KEY, max(0.0, expiry - self.wall()))

    def reconcile(self, key):
        now = self.wall()
        cutoff = now - self.ttl
        with self._lock:
            self._due = None
            items = list(self._index.items())
        expired = [(t, k, rv) for k, (t, rv) in items if t <= cutoff]
        remaining = len(items) - len(expired)
        excess = []
        if remaining > self.max:
            young = [(t, k, rv) for k, (t, rv) in items if t > cutoff]
            excess = heapq.nsmallest(remaining - self.low_water, young, key=lambda e: (e[0], e[1]))
        doomed = expired + excess
        deleted = 0
        if doomed:
            writes = [[commands.delete("events", k[0], k[1], precondition={"resourceVersion": rv})]
                      for _, k, rv in doomed]
            results = []
            for start in range(0, len(writes), BATCH):
                results.extend(self.write_many(writes[start:start + BATCH]))
            deleted = sum(1 for r in results if r.get("ok"))
            with self._lock:
                for (_, k, rv), r in zip(doomed, results):
                    if r.get("ok") and self._index.get(k, (None, None))[1] == rv:
                        del self._index[k]
        # The next expiry among what is left.
        with self._lock:
            oldest = min((t for t, _ in self._index.values()), default=None)
        if oldest is not None:
            # After a refused delete (the event changed or went meanwhile), give the change a
            # moment to reach the index instead of retrying at once.
            failed = doomed and deleted < len(doomed)
            self._schedule(max(oldest + self.ttl, now + (1.0 if failed else 0.0)))
        if not doomed:
            return None
        kept = len(items) - deleted
        expired_ok = sum(1 for r in results[:len(expired)] if r.get("ok"))
        return "deleted %d event(s): %d older than %ds, %d over the limit of %d; %d kept" % (
            deleted, expired_ok, self.ttl, deleted - expired_ok, self.max, kept)


def controllers(store, recorder, settings):
    return [EventPruner(store, recorder, settings)]
