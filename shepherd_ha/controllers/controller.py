"""The one controller shape: changes become keys, keys are reconciled.

A controller names the resources it watches, maps each change to the keys it
affects (`keys_for`), and converges one key at a time (`reconcile`), returning a
sentence saying what it did, or None when nothing needed doing. A transient
failure (no quorum, a lost race) re-queues the key with backoff; a periodic
resync re-queues every key, catching anything a change did not.

Any other exception costs one key only: it is counted and reported on the key's
object (`faults.py`), and the key is retried with backoff. `thread_specs` names
the threads a controller runs, so the manager can restart one that died.
"""
import collections
import logging
import threading

from shepherd_ha.controllers.settings import ControllerSettings
from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.store.owner_index import UnreadableOwner
from shepherd_ha.store.raft_node import Unavailable

from shepherd_ha.workqueue import WorkQueue

from .deployment_util import controller_ref
from .faults import ControllerFaults

log = logging.getLogger("shepherd_ha.controllers")


class Retry(Exception):
    """Reconcile could not finish now (lost a race, waiting on something): try again later."""

    def __init__(self, message, delay=None):
        super().__init__(message)
        self.delay = delay


class WriteFailed(Retry):
    """A write the controller made was refused; the message says why."""


def key_of(obj):
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


class Controller:
    name = "controller"
    watches = ()             # resource plurals whose changes this controller sees
    resync_period = ControllerSettings.resync_period   # seconds between full re-queues (what changes missed)
    workers = 1
    # resource -> seconds: a key its changes affect waits this long for more of them
    # (WorkQueue.add_batched), so a burst costs one reconcile; other resources are immediate.
    batch_periods = {}
    # Whether this controller's writes wait while node heartbeats do (write_pacing.py).
    paced_writes = True

    def __init__(self, store, events=None):
        self.store = store
        self.events = events
        self.queue = WorkQueue(clock=store.clock)
        self.sentences = collections.deque(maxlen=500)   # what it did, newest last (tests read it)
        self._last_resync = store.clock()
        self.faults = ControllerFaults()   # the manager gives every controller its own, longer-lived one

    # ---- what subclasses write ----

    def keys_for(self, change):
        """Keys a change affects; by default the changed object of the first watched resource."""
        if change.resource == self.watches[0]:
            return [key_of(change.object or change.previous)]
        return []

    def all_keys(self):
        """Every key a resync should re-check."""
        return [key_of(o) for o in self.store.list(self.watches[0])]

    def reconcile(self, key):
        raise NotImplementedError

    # ---- plumbing ----

    def handle(self, change):
        period = self.batch_periods.get(change.resource)
        for key in self.keys_for(change):
            if period:
                self.queue.add_batched(key, period)
            else:
                self.queue.add(key)

    def resync(self):
        self._last_resync = self.store.clock()
        for key in self.all_keys():
            self.queue.add(key)

    def maybe_resync(self):
        if self.store.clock() - self._last_resync >= self.resync_period:
            self.resync()

    def write(self, ops, key=None):
        """A fenced write; raises WriteFailed with the store's reason when refused."""
        try:
            result = self.store.write(ops, key=key)
        except Unavailable as exc:
            raise Retry("store unavailable: %s" % exc)
        if not result.get("ok"):
            raise WriteFailed("%s (%s)" % (result.get("message"), result.get("reason")))
        return result

    def write_many(self, writes):
        """Independent writes in one batch (bounded Raft entries), one result each; Retry
        when the store is unavailable or this controller's epoch is over (a Fenced result)."""
        try:
            results = self.store.write_many(writes)
        except Unavailable as exc:
            raise Retry("store unavailable: %s" % exc)
        fenced = [r for r in results if r.get("reason") == "Fenced"]
        if fenced:
            raise Retry("fenced: %s" % fenced[0].get("message"))
        return results

    def object_failed(self, stage, resource, obj, exc):
        """This controller skipped `obj` (a `resource` object) because processing it raised."""
        self.faults.object_failed(self.name, stage, resource, obj, exc, self.events)

    def select(self, resource, objects, predicate, stage="reconcile"):
        """The objects for which predicate(obj) is true; one it cannot read (it raises) is
        left out and reported, instead of failing the key of every object it sits beside."""
        chosen = []
        for obj in objects:
            try:
                if predicate(obj):
                    chosen.append(obj)
            except Exception as exc:
                self.object_failed(stage, resource, obj, exc)
        return chosen

    def owned(self, resource, namespace, uid, kind, stage="reconcile"):
        """The `resource` objects in `namespace` whose controller ownerReference is to
        the `kind` with `uid`, from the store's owner index (no scan of the kind); one
        whose ownerReferences cannot be read is left out and reported, as select does."""
        objects, unreadable = self.store.owned(resource, namespace, uid)
        for obj in unreadable:
            self.object_failed(stage, resource, obj, UnreadableOwner("its ownerReferences cannot be read"))
        return [o for o in objects if controller_ref(o).get("kind") == kind]

    def key_failed(self, key, exc):
        """reconcile(key) raised: report it on the key's object (of the first watched resource)."""
        resource = self.watches[0] if self.watches else self.name
        namespace, name = key if isinstance(key, tuple) and len(key) == 2 else (None, key)
        obj = None
        try:
            if resource in RESOURCES:
                obj = self.store.get(resource, namespace or None, name)
        except Exception:         # a key that names no object (e.g. "prune") is reported without one
            obj = None
        if isinstance(obj, dict):
            self.object_failed("reconcile", resource, obj, exc)
        else:
            stub = {"metadata": {"namespace": namespace or "", "name": str(name)}}
            self.faults.object_failed(self.name, "reconcile", resource, stub, exc)

    def record(self, sentence):
        self.sentences.append(sentence)
        log.info("%s: %s", self.name, sentence)

    def process_one(self, timeout=0.2):
        """Reconcile the next key, if one is ready within `timeout`. True if one was processed."""
        key = self.queue.get(timeout)
        if key is None:
            return False
        try:
            sentence = self.reconcile(key)
            self.queue.forget(key)
            if sentence:
                self.record(sentence)
        except Retry as exc:
            log.debug("%s: %s: %s; retrying", self.name, key, exc)
            if exc.delay is not None:
                self.queue.add_after(key, exc.delay)
            else:
                self.queue.add_with_backoff(key)
        except Exception as exc:
            self.key_failed(key, exc)
            self.queue.add_with_backoff(key)
        finally:
            self.queue.done(key)
        return True

    def run_until_idle(self, limit=10000):
        """Unit tests: process ready keys synchronously until none is ready now."""
        done = 0
        while done < limit and self.process_one(timeout=0):
            done += 1
        return done

    def run(self, stop):
        while not stop.is_set():
            self.process_one(timeout=0.1)

    def thread_specs(self):
        """[(thread name, target(stop))]: what start() runs, and what the manager restarts."""
        return [("%s-%d" % (self.name, i), self.run) for i in range(self.workers)]

    def thread_restarted(self, name):
        """The manager restarted thread `name` after it died: re-check every key, as
        whatever it was doing may be lost."""
        self.resync()

    def start(self, stop):
        threads = [threading.Thread(target=target, args=(stop,), name=name, daemon=True)
                   for name, target in self.thread_specs()]
        for t in threads:
            t.start()
        return threads
