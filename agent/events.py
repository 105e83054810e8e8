"""Events from the agent about its pods, as the kubelet posts them: Pulling, Pulled,
Created, Started, Killing, BackOff, Unhealthy, Failed ...

`EventSink.emit()` never blocks the caller and never talks to the API: it puts the
event in a bounded queue that one thread posts from. Repeats are aggregated twice:
- in the queue: the same (pod uid, reason, message, type, container) again bumps
  the queued entry's count (a crash loop does not fill the queue);
- in the API: an event's name is derived from what it says, so the same thing
  happening again is a merge patch of `count` and `lastTimestamp` of that event
  instead of a new object (also across agent restarts: a create that finds the
  event already there reads its count and patches it).

While no replica answers, events wait in the queue (retried with back-off); when
it is full the oldest are dropped, with a log line. Posts are rate limited
(--event-qps, a token bucket with a burst of EVENT_BURST, as the kubelet's
--event-qps/--event-burst); 0 posts nothing. Events are best effort: a refused
one (bad request) is logged and dropped, and the queue is not flushed when the
agent stops.
"""
import collections
import dataclasses
import logging
import threading
import time

from shepherd_ha.backoff import Backoff
from shepherd_ha.client import ApiError, ClientError
from shepherd_ha.model.events import event_name, event_namespace, new_event
from shepherd_ha.model.namespaces import NAMESPACE_TERMINATING
from shepherd_ha.model.times import now_rfc3339
from shepherd_ha.token_bucket import TokenBucket

log = logging.getLogger(__name__)

COMPONENT = "shepherd-agent"
DEFAULT_CAP = 1000          # events waiting to be posted, at most
KNOWN_CAP = 4096            # posted events remembered (name and count) for aggregation
RETRY_FIRST, RETRY_MAX = 0.5, 10.0
DEFAULT_QPS = 50.0
EVENT_BURST = 100


def pod_reference(pod, container=None):
    """involvedObject of an event about `pod` (or one of its containers)."""
    meta = pod.get("metadata") or {}
    ref = {"kind": "Pod", "apiVersion": "v1", "name": meta.get("name") or "",
           "namespace": meta.get("namespace") or "default", "uid": meta.get("uid") or ""}
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = str(meta["resourceVersion"])
    if container:
        ref["fieldPath"] = "spec.containers{%s}" % container
    return ref


def node_reference(node):
    """involvedObject of an event about this agent's Node (the kubelet's: its uid is the
    node's name, so the reference needs no read of the Node)."""
    return {"kind": "Node", "apiVersion": "v1", "name": node, "uid": node}


@dataclasses.dataclass
class _Pending:
    ref: dict
    reason: str
    message: str
    type: str
    count: int            # occurrences not yet posted
    first: str
    last: str


class EventSink:
    """Posts the agent's events from a bounded queue, on its own thread."""

    def __init__(self, client, node, stop, cap=DEFAULT_CAP, now=now_rfc3339, qps=DEFAULT_QPS):
        self.client = client
        self.qps = float(qps)
        self._tokens = TokenBucket(self.qps, EVENT_BURST) if self.qps > 0 else None
        self.node = node
        self.stop = stop
        self.cap = max(1, int(cap))
        self.now = now
        self._cond = threading.Condition()
        self._pending = collections.OrderedDict()      # key -> _Pending, oldest first
        self._known = collections.OrderedDict()        # key -> (namespace, name, count) posted
        self._thread = None
        self.dropped = 0
        self.posted = 0
        self._unreachable_since = None

    # ---- producers (pod workers, prober): never block ----

    def emit(self, pod, reason, message, type_="Normal", container=None):
        self.emit_about(pod_reference(pod, container), reason, message, type_)

    def emit_node(self, reason, message, type_="Normal"):
        """An event about this agent's Node (what `sheepctl describe node` lists)."""
        self.emit_about(node_reference(self.node), reason, message, type_)

    def emit_about(self, ref, reason, message, type_="Normal"):
        if self.qps <= 0:
            return                  # --event-qps 0: no events
        if not ref["uid"] or not ref["name"]:
            return
        key = (ref["uid"], ref.get("fieldPath") or "", reason, message, type_)
        now = self.now()
        with self._cond:
            entry = self._pending.get(key)
            if entry is not None:
                entry.count += 1
                entry.last = now
            else:
                while len(self._pending) >= self.cap:
                    _, old = self._pending.popitem(last=False)
                    self.dropped += 1
                    log.warning("event queue full (%d waiting, the API is not answering?): dropped the oldest, "
                                "%s %s/%s: %s (x%d)", self.cap, old.reason, event_namespace(old.ref),
                                old.ref.get("name"), old.message, old.count)
                self._pending[key] = _Pending(ref, reason, message, type_, 1, now, now)
            self._cond.notify()

    def pending(self):
        """[(reason, message, type, count)] waiting to be posted (for tests and debugging)."""
        with self._cond:
            return [(p.reason, p.message, p.type, p.count) for p in self._pending.values()]

    # ---- the posting thread ----

    def start(self):
        if self.qps <= 0:
            return
        self._thread = threading.Thread(target=self._run, name="event-sink", daemon=True)
        self._thread.start()

    def join(self, timeout=None):
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def _take(self, timeout):
        with self._cond:
            if not self._pending:
                self._cond.wait(timeout)
            if not self._pending:
                return None
            return self._pending.popitem(last=False)

    def _put_back(self, key, entry):
        """A post failed: the entry goes back to the front, merged with repeats queued meanwhile."""
        with self._cond:
            newer = self._pending.pop(key, None)
            if newer is not None:
                entry.count += newer.count
                entry.last = newer.last
            if len(self._pending) >= self.cap:
                self.dropped += 1
                log.warning("event queue full: dropped %s %s/%s: %s (x%d)", entry.reason,
                            event_namespace(entry.ref), entry.ref.get("name"), entry.message, entry.count)
                return
            self._pending[key] = entry
            self._pending.move_to_end(key, last=False)

    def _wait_for_token(self):
        """EVENT_BURST posts at once, then qps per second."""
        while not self._tokens.take():
            if self.stop.wait(self._tokens.wait_time()):
                return

    def _run(self):
        retry = Backoff(RETRY_FIRST, RETRY_MAX)
        while not self.stop.is_set():
            self._wait_for_token()
            item = self._take(0.5)
            if item is None:
                continue
            key, entry = item
            try:
                self.post(key, entry)
            except (ClientError, OSError) as exc:     # no replica answers, or 503/429
                self._put_back(key, entry)
                if self._unreachable_since is None:
                    self._unreachable_since = time.monotonic()
                    log.warning("cannot post events: %s; %d event(s) wait (at most %d, the oldest are dropped)",
                                exc, len(self._pending), self.cap)
                retry.wait(self.stop)
                continue
            except Exception:  # noqa: BLE001 - the sink must survive anything
                log.exception("posting event %s failed; dropped", entry.reason)
            if self._unreachable_since is not None:
                log.info("posting events again after %.0fs", time.monotonic() - self._unreachable_since)
                self._unreachable_since = None
            retry.reset()

    def flush(self):
        """Post everything queued now, on the caller's thread (tests)."""
        while True:
            item = self._take(0)
            if item is None:
                return
            self.post(*item)

    # ---- one post: create, or merge-patch the count of the event already there ----

    def _remember(self, key, namespace, name, count):
        self._known[key] = (namespace, name, count)
        self._known.move_to_end(key)
        while len(self._known) > KNOWN_CAP:
            self._known.popitem(last=False)

    def post(self, key, entry):
        """Write one queued entry. Raises ClientError when no replica answers (or a
        503/429); an ApiError that retrying cannot fix drops the entry."""
        namespace = event_namespace(entry.ref)
        name = event_name(entry.ref, entry.reason, entry.message, entry.type)
        known = self._known.get(key)
        try:
            for _ in range(3):
                if known is not None:
                    count = known[2] + entry.count
                    try:
                        self.client.patch("events", name, {"count": count, "lastTimestamp": entry.last},
                                          namespace=namespace)
                        self._remember(key, namespace, name, count)
                        self.posted += 1
                        return
                    except ApiError as err:
                        if err.code != 404:
                            raise
                        known = None          # pruned meanwhile: create it again
                        self._known.pop(key, None)
                        continue
                try:
                    self.client.create("events", self._body(entry), namespace=namespace)
                    self._remember(key, namespace, name, entry.count)
                    self.posted += 1
                    return
                except ApiError as err:
                    if err.code != 409:
                        raise
                # there already (posted by an earlier run of this agent): add to its count
                existing = self.client.get("events", name, namespace=namespace)
                known = (namespace, name, int(existing.get("count") or 1))
            log.info("event %s/%s dropped: it changed under us three times", namespace, name)
        except ApiError as err:
            if err.code >= 500 or err.code == 429:
                raise                 # no leader, overloaded: retried like an unreachable API
            # A namespace being deleted refuses new content, its pods' events too: expected, not a warning.
            causes = (err.details or {}).get("causes") or []
            terminating = any(isinstance(c, dict) and c.get("reason") == NAMESPACE_TERMINATING for c in causes)
            level = logging.DEBUG if err.code == 403 and terminating else logging.WARNING
            log.log(level, "event %s for %s %s/%s refused by the API (dropped): %s", entry.reason,
                    (entry.ref.get("kind") or "object").lower(), namespace, entry.ref.get("name"), err)

    def _body(self, entry):
        return new_event(entry.ref, entry.reason, entry.message, entry.type, entry.first, entry.last,
                         count=entry.count, component=COMPONENT, host=self.node)
