"""An API worker's copy of the store (a watch cache), fed by the store process's
change stream.

It has the FSM's read side (get, list, count, revision) at a known revision, its
own WatchLog with the store's revisions (watches are served here), and the lock
StoreAccess and the API take to read it. A snapshot replaces it wholesale and
resets the watch log: watchers get 410 and list again, as after a snapshot install.
Stored objects are immutable (copy on write in the FSM), so readers may keep them.
"""
import heapq
import itertools
import threading

from .encoded_objects import decode, decoded
from .fsm import DELETED, MODIFIED, Change
from .interning import Interner
from .object_reads import ObjectReads
from .owner_index import OwnerIndex
from .selector_index import SelectorIndex
from .watch_log import WatchLog


def _key(obj):
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


class Mirror(ObjectReads):
    def __init__(self, watch_log_size=WatchLog.CAPACITY):
        self.lock = threading.RLock()
        self.objects = {}            # resource -> {(namespace, name): object}
        self.revision = 0
        self.synced = False          # True once a first snapshot or stream position is known
        self.watch_log = WatchLog(watch_log_size)
        self._incoming = None        # snapshot being received: (revision, {resource: {...}})
        # Writers waiting for their revision, each woken alone (not every waiter on every change).
        self._waiters = []           # heap of (revision, sequence, Event)
        self._waiters_lock = threading.Lock()
        self._sequence = itertools.count()
        # What changed when, per resource: the authorizer rebuilds its RBAC index only
        # when the RBAC kinds' marks move (api/authz/authorizer.py), not on every write.
        self._changed_at = {}        # resource -> revision of its last change
        self._snapshots = 0          # bumped by replace(): every resource may have changed
        # A resource is indexed on its first owned() (the controllers' worker asks for
        # pods, replicasets and controllerrevisions; other workers never pay).
        self._owners = OwnerIndex()
        # Likewise on a resource's first selected list or watch (store/selector_index.py).
        self._selector_index = SelectorIndex()
        self._shared = Interner()    # equal parts of objects kept once (store/interning.py)

    # ---- fed by the stream ----

    def apply_frame(self, frame):
        """One change-stream frame (changes or a snapshot part); other kinds are ignored."""
        kind = frame.get("kind")
        if kind == "changes":
            self.apply_changes([Change(*c) for c in frame["changes"]])
        elif kind == "snapshot-begin":
            self._incoming = (frame["revision"], {})
        elif kind == "snapshot-chunk":
            bucket = self._incoming[1].setdefault(frame["resource"], {})
            for obj in frame["objects"]:
                obj = decode(obj)       # the store sends its bytes (store/encoded_objects.py)
                bucket[_key(obj)] = self._shared.intern_object(obj, kind=frame["resource"])
        elif kind == "snapshot-end":
            revision, objects = self._incoming
            self._incoming = None
            self.replace(objects, revision)

    def apply_changes(self, changes):
        with self.lock:
            fresh = []
            for change in changes:
                if change.revision <= self.revision:
                    continue
                change = decoded(change)        # objects come as the store's bytes (compressed JSON)
                bucket = self.objects.setdefault(change.resource, {})
                self._changed_at[change.resource] = change.revision
                key = _key(change.object or change.previous)
                stored = bucket.get(key)
                if change.type == DELETED:
                    # Its previous is the object as deleted (the FSM stamps the delete's revision).
                    self._shared.forget(change.resource, bucket.pop(key, None))
                else:
                    # A modification comes without its previous version (store_service.py):
                    # ours is that version, and already shared (store/interning.py).
                    previous = stored if change.type == MODIFIED and stored is not None else change.previous
                    change = change._replace(object=self._shared.intern_object(change.object, previous,
                                                                               change.resource),
                                             previous=previous)
                    bucket[key] = change.object
                fresh.append(change)
                self._owners.replace(change.resource, key, stored, change.object)
                self._selector_index.replace(change.resource, key, stored, change.object)
                self.revision = change.revision
            # Under the lock, as the store appends: watchers see changes in revision order.
            if fresh:
                self.watch_log.append(fresh)
        if fresh:
            self._release()

    def replace(self, objects, revision):
        # The resources indexed before are indexed again from the new objects, before the
        # lock: the first selected reads after a snapshot (every kubelet's re-list after its
        # 410) find the index ready instead of one of them building it under the lock.
        selector_index = SelectorIndex()
        for resource in self._selector_index.resources():
            selector_index.add(resource, objects.get(resource, {}))
        with self.lock:
            self.objects, self.revision, self.synced = objects, revision, True
            self._owners = OwnerIndex()
            self._selector_index = selector_index
            self._snapshots += 1
            self.watch_log.reset(revision)
        self._release()

    def list(self, resource, namespace=None, selection=None):
        """As ObjectReads.list; with `selection` (label selector, field selector), only
        the objects its indexed requirements allow: a superset of what the selectors match,
        which the caller still checks, in no particular order (the API sorts a list; nothing
        is sorted under the lock, which every change of the stream waits for)."""
        if selection is None or not SelectorIndex.narrows(resource, *selection):
            return super().list(resource, namespace)
        with self.lock:
            bucket = self.objects.get(resource, {})
            if not self._selector_index.covers(resource):
                self._selector_index.add(resource, bucket)
            keys = self._selector_index.candidates(resource, *selection)
            return [bucket[key] for key in keys if namespace is None or key[0] == namespace]

    def owned(self, resource, namespace, uid):
        """As ObjectReads.owned, from the owner index instead of a scan."""
        with self.lock:
            if not self._owners.covers(resource):
                self._owners.add(resource, self.objects.get(resource, {}))
            return self._owners.owned(resource, namespace, uid)

    def change_marks(self, resources):
        """A value that differs whenever one of `resources` changed (cheap: no scan)."""
        return (self._snapshots,) + tuple(self._changed_at.get(r, 0) for r in resources)

    def wait_for(self, revision, timeout):
        """True once the mirror holds `revision` (within `timeout` s)."""
        with self._waiters_lock:
            if self.revision >= revision:
                return True
            event = threading.Event()
            heapq.heappush(self._waiters, (revision, next(self._sequence), event))
        return event.wait(timeout) or self.revision >= revision

    def _release(self):
        # The revision moved before this takes the lock; a waiter checks it under the lock.
        with self._waiters_lock:
            while self._waiters and self._waiters[0][0] <= self.revision:
                heapq.heappop(self._waiters)[2].set()

    def mark_synced(self):
        self.synced = True
