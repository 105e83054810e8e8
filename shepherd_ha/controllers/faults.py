"""What went wrong inside the controllers: objects they could not process, threads that died.

One object that makes a controller raise (a shape validation did not catch, or a
bug) must cost that object only. Whoever catches the exception reports it here:

- counted per (controller, stage, resource, namespace, name), for `/metrics`
  (`shepherd_controller_errors_total`); at most MAX_OBJECTS series, the rest are
  folded into one `name="(others)"` series per controller and stage;
- reported as a Warning `ControllerError` Event on the object, at most once per
  EVENT_INTERVAL per object and controller, and EVENT_BURST in a row overall (a
  poisoned object retried with backoff or seen on every resync does not flood the
  events). Events are written by one background thread: the reporter may hold a
  lock (the scheduler's usage index) or be the informer, which must not wait for
  Raft.

Dead controller threads (restarted by the manager) are counted here too, so
`/shepherd/v1/replica` and `/metrics` say so.

One ControllerFaults lives as long as the manager: counts survive leader changes.
"""
import collections
import logging
import queue
import threading
import time

from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.model.times import now_rfc3339
from shepherd_ha.token_bucket import TokenBucket

log = logging.getLogger("shepherd_ha.controllers")

MAX_OBJECTS = 256
EVENT_INTERVAL = 300.0       # seconds between two events about one object from one controller
EVENT_BURST = 20             # events in a row; then one per EVENT_REFILL seconds
EVENT_REFILL = 3.0
OTHERS = "(others)"
REASON = "ControllerError"


def object_ref(resource, obj):
    """(namespace, name) of a stored object, whatever its shape ("" when unknown)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    namespace, name = meta.get("namespace"), meta.get("name")
    return (namespace if isinstance(namespace, str) else ""), (name if isinstance(name, str) else "")


def describe_error(exc):
    text = "%s: %s" % (type(exc).__name__, exc) if isinstance(exc, BaseException) else str(exc)
    return text if len(text) <= 300 else text[:297] + "..."


class ControllerFaults:
    def __init__(self, clock=time.monotonic, now=now_rfc3339):
        self.clock = clock
        self.now = now
        self._lock = threading.Lock()
        self._counts = collections.OrderedDict()   # (controller, stage, resource, namespace, name) -> n
        self.total = 0
        self.recent = collections.deque(maxlen=5)  # the newest failures, for the replica status
        self._evented = collections.OrderedDict()  # (controller, resource, ns, name) -> clock of its last event
        self._event_tokens = TokenBucket(1.0 / EVENT_REFILL, EVENT_BURST, clock)
        self._events = queue.Queue(maxsize=100)
        self._emitter = None
        self.events_dropped = 0
        self.restarts = collections.Counter()      # thread name -> restarts
        self.last_restart = None

    # ---- objects ----

    def object_failed(self, controller, stage, resource, obj, exc, recorder=None):
        """`controller` could not process `obj` (a `resource` object) at `stage`; it skipped it."""
        namespace, name = object_ref(resource, obj)
        key = (controller, stage, resource, namespace, name)
        error = describe_error(exc)
        with self._lock:
            first = key not in self._counts
        # The first failure with its traceback; repeats (backoff, resyncs) are counted.
        what = "skipped %s %s%s at %s" % (resource, namespace + "/" if namespace else "", name, stage) if name \
            else "%s failed" % stage
        log.log(logging.ERROR if first else logging.DEBUG, "%s: %s: %s", controller, what, error,
                exc_info=exc if first and isinstance(exc, BaseException) else None)
        with self._lock:
            self.total += 1
            self._count(key)
            self.recent.append({"controller": controller, "stage": stage, "resource": resource,
                                "namespace": namespace, "name": name, "error": error, "at": self.now()})
            event_key = (controller,) + key[2:]
            due = recorder is not None and isinstance(obj, dict) and self._event_due(event_key)
        if due:
            self._queue_event(recorder, controller, stage, resource, obj, error, event_key)

    def _count(self, key):
        if key in self._counts:
            self._counts[key] += 1
            self._counts.move_to_end(key)
            return
        if len(self._counts) >= MAX_OBJECTS:
            # Fold the least recently failing object into its (controller, stage) "others" series.
            for old in self._counts:
                if old[4] != OTHERS:
                    break
            n = self._counts.pop(old)
            other = (old[0], old[1], "", "", OTHERS)
            self._counts[other] = self._counts.get(other, 0) + n
        self._counts[key] = 1

    def _event_due(self, key):
        now = self.clock()
        last = self._evented.get(key)
        if last is not None and now - last < EVENT_INTERVAL:
            return False
        if not self._event_tokens.take():
            return False
        self._evented[key] = now
        self._evented.move_to_end(key)
        while len(self._evented) > MAX_OBJECTS:
            self._evented.popitem(last=False)
        return True

    def _queue_event(self, recorder, controller, stage, resource, obj, error, event_key):
        info = RESOURCES.get(resource)
        target = obj if obj.get("kind") or info is None else dict(obj, kind=info.kind, apiVersion=info.api_version)
        message = "%s skipped this %s (%s): %s. Fix the object; it is tried again when it changes" % (
            controller, info.kind if info else resource, stage, error)
        try:
            self._events.put_nowait((recorder, target, message, event_key))
        except queue.Full:
            self.events_dropped += 1
            return
        with self._lock:
            if self._emitter is None or not self._emitter.is_alive():
                self._emitter = threading.Thread(target=self._emit_loop, name="controller-fault-events",
                                                 daemon=True)
                self._emitter.start()

    def _emit_loop(self):
        while True:
            try:
                recorder, target, message, event_key = self._events.get(timeout=5.0)
            except queue.Empty:
                with self._lock:
                    if self._events.empty():
                        self._emitter = None
                        return
                continue
            written = None
            try:
                written = recorder.emit(target, REASON, message, "Warning")
            except Exception:     # best effort, as every event
                log.exception("could not record a %s event", REASON)
            if written is None:
                # Not written (over the recorder's budget, no quorum): the object's next
                # failure may report it, rather than none for EVENT_INTERVAL.
                with self._lock:
                    self._evented.pop(event_key, None)

    # ---- threads ----

    def thread_restarted(self, name, error):
        with self._lock:
            self.restarts[name] += 1
            self.last_restart = {"thread": name, "error": error, "at": self.now()}

    # ---- reading ----

    def counts(self):
        """[(controller, stage, resource, namespace, name, n)]"""
        with self._lock:
            return [key + (n,) for key, n in self._counts.items()]

    def summary(self):
        with self._lock:
            return {"objectErrors": self.total, "recentErrors": list(self.recent),
                    "threadRestarts": sum(self.restarts.values()), "lastRestart": self.last_restart}
