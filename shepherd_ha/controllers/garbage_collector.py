"""Garbage collector: objects whose owners (metadata.ownerReferences) are all gone are
deleted (background propagation, the default).

Keys are owner uids. The collector keeps an index owner uid -> dependents, fed by
the informer: an owner's deletion queues its uid, and a dependent created (or
re-pointed) queues the uids it references, which catches a dependent created
after its owner was already deleted. Reconciling a uid re-reads each dependent and
its owners on the leader's state:

- an owner is present when an object of its kind and name (in the dependent's
  namespace, or cluster-wide for cluster-scoped kinds) has the referenced uid;
- a dependent all of whose owners are absent is deleted, with its uid and
  resourceVersion as precondition (so a dependent changed meanwhile is re-checked
  rather than deleted on stale grounds);
- a dependent with some owners present loses only its references to the absent
  ones; a dependent whose owners all exist, or that has no ownerReferences, is
  never touched; an owner kind this store does not know is never judged absent.

Foreground deletion: the FSM marks an owner deleted with the foregroundDeletion
finalizer (propagationPolicy Foreground) and keeps it; the collector deletes its
dependents (in the foreground too, so a chain waits from the bottom up) and, once
none is left (terminating pods included), removes the finalizer, which completes
the owner's deletion. Those keys are ("foreground", resource, namespace, name).

All deletes for one owner go in one write_many. Orphan deletes strip
the references inside the FSM in the owner's own write, so they need nothing here;
a namespace's contents are the namespace controller's (controllers/namespaces.py), and
the store refuses to delete a built-in namespace whoever asks.
"""
import threading

from shepherd_ha.model.resources import RESOURCES, resource_for_kind
from shepherd_ha.store import commands
from shepherd_ha.store.deletion import delete_op
from shepherd_ha.store.fsm import FOREGROUND_FINALIZER

from .controller import Controller, Retry

BATCH = 500     # dependents per write_many


class RefusedForGood(Exception):
    """The store refused a dependent's deletion for a reason a retry cannot change."""


def _refs(obj):
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    if not isinstance(refs, list):       # stored past validation: it names no owner we can judge
        return []
    return [r for r in refs if isinstance(r, dict) and isinstance(r.get("uid"), str) and r["uid"]]


def _ref_map(obj):
    return {r["uid"]: (r.get("kind"), r.get("name")) for r in _refs(obj)}


def _deleting_in_foreground(obj):
    meta = (obj or {}).get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and FOREGROUND_FINALIZER in (meta.get("finalizers") or [])


def _dkey(resource, obj):
    meta = obj["metadata"]
    return (resource, meta.get("namespace") or "", meta["name"])


def _owner_uids(held):
    """The uids `_owners_of` holds for a dependent: one uid as itself, more as a tuple."""
    return (held,) if isinstance(held, str) else held


def _remember(dependents, owners_of, dkey, refs):
    """Record dependent `dkey` naming `refs` ({uid: (kind, name)}) in the two maps, kept
    small: at 30,000 pods they were 12.8 MB of the leader's worker (docs/benchmarks.md,
    run AA) with a set of owner uids per dependent (216 bytes for one uid) and a (kind,
    name) tuple per dependent. So one owner is kept as its uid, and the dependents of an
    owner share the first one's tuple when they name it alike (they nearly always do)."""
    uids = tuple(refs)
    owners_of[dkey] = uids[0] if len(uids) == 1 else uids
    for uid, ref in refs.items():
        deps = dependents.get(uid)
        if deps is None:
            deps = dependents[uid] = {}
        else:
            first = next(iter(deps.values()), None)
            if first == ref:
                ref = first
        deps[dkey] = ref


def _describe(dkey):
    resource, namespace, name = dkey
    return "%s %s/%s" % (resource, namespace, name) if namespace else "%s %s" % (resource, name)


class GarbageCollector(Controller):
    name = "garbage-collector"
    watches = tuple(RESOURCES)

    def __init__(self, store, events=None):
        super().__init__(store, events)
        self._lock = threading.Lock()
        self._dependents = {}     # owner uid -> {dependent key}
        self._owners_of = {}      # dependent key -> its owner's uid, or a tuple of its owners' uids
        self._foreground = {}     # uid of an owner deleting in the foreground -> its key

    # ---- the index (informer thread writes, workers read) ----

    def _index(self, dkey, refs):
        """Record that dependent `dkey` now names exactly `refs` ({uid: (kind, name)})."""
        with self._lock:
            for uid in _owner_uids(self._owners_of.pop(dkey, ())):
                if uid in refs:
                    continue
                deps = self._dependents.get(uid)
                if deps is not None:
                    deps.pop(dkey, None)
                    if not deps:
                        del self._dependents[uid]
            if refs:
                _remember(self._dependents, self._owners_of, dkey, refs)

    def dependents_of(self, uid):
        """{dependent key: (owner kind, owner name) as that dependent names it}."""
        with self._lock:
            return dict(self._dependents.get(uid, {}))

    def keys_for(self, change):
        obj = change.object or change.previous
        dkey = _dkey(change.resource, obj)
        # A dependent that changed or went may be what a foreground deletion waits for.
        waiting = self._foreground_keys(_ref_map(obj)) + self._foreground_keys(_ref_map(change.previous))
        if change.object is None:
            self._index(dkey, {})
            uid = obj["metadata"].get("uid")
            with self._lock:
                has_dependents = uid in self._dependents
                self._foreground.pop(uid, None)
            return ([uid] if has_dependents else []) + waiting
        if _deleting_in_foreground(change.object):
            key = ("foreground",) + dkey
            with self._lock:
                self._foreground[obj["metadata"].get("uid")] = key
            waiting.append(key)
        refs = _ref_map(change.object)
        before = _ref_map(change.previous) if change.previous is not None else None
        self._index(dkey, refs)
        # A new or re-pointed dependent: check the owners it now names (they may be gone already).
        return (sorted(refs) if refs and set(refs) != set(before or ()) else []) + waiting

    def _foreground_keys(self, refs):
        with self._lock:
            return [self._foreground[uid] for uid in refs if uid in self._foreground]

    def all_keys(self):
        state, _ = self.store.snapshot(list(RESOURCES))
        dependents, owners_of = {}, {}
        for resource, objects in state.items():
            for obj in objects:
                try:
                    refs = _ref_map(obj)
                except Exception as exc:
                    self.object_failed("resync", resource, obj, exc)
                    continue
                if refs:
                    _remember(dependents, owners_of, _dkey(resource, obj), refs)
        foreground = {}
        for resource, objects in state.items():
            for obj in self.select(resource, objects, _deleting_in_foreground, "resync"):
                foreground[obj["metadata"].get("uid")] = ("foreground",) + _dkey(resource, obj)
        with self._lock:
            self._dependents, self._owners_of, self._foreground = dependents, owners_of, foreground
        return sorted(dependents) + sorted(foreground.values())

    # ---- reconcile ----

    def owner_present(self, ref, namespace):
        """True/False, or None when it cannot be judged here (never judged absent): an
        unknown kind, a reference without a uid or name, or a namespaced owner of a
        cluster-scoped dependent (invalid, as in Kubernetes)."""
        info = resource_for_kind(ref.get("kind"))
        if info is None or not ref.get("name") or not ref.get("uid"):
            return None
        if info.namespaced and not namespace:
            return None
        owner = self.store.get(info.plural, namespace if info.namespaced else None, ref["name"])
        return owner is not None and owner["metadata"].get("uid") == ref["uid"]

    def reconcile(self, key):
        if isinstance(key, tuple):
            return self._finish_foreground(*key[1:])
        return self._collect_orphans(key)

    def _finish_foreground(self, resource, namespace, name):
        owner = self.store.get(resource, namespace or None, name)
        if owner is None or not _deleting_in_foreground(owner):
            return None
        meta = owner["metadata"]
        uid = meta.get("uid")
        alive = []
        for dkey in sorted(self.dependents_of(uid)):
            d_resource, d_namespace, d_name = dkey
            obj = self.store.get(d_resource, d_namespace or None, d_name)
            if obj is not None and any(r["uid"] == uid for r in _refs(obj)):
                alive.append((dkey, obj))
        described = _describe((resource, namespace, name))
        doomed = [(dkey, obj) for dkey, obj in alive if not obj["metadata"].get("deletionTimestamp")]
        if doomed:
            writes = [[delete_op(r, ns or None, n, {"uid": obj["metadata"].get("uid")},
                                 propagation_policy="Foreground")] for (r, ns, n), obj in doomed]
            results = []
            for start in range(0, len(writes), BATCH):
                results.extend(self.write_many(writes[start:start + BATCH]))
            done = [dkey for (dkey, _), r in zip(doomed, results) if r.get("ok")]
            return "deleting %s in the foreground: deleted %d dependent(s): %s" % (
                described, len(done), ", ".join(_describe(k) for k in done[:10]) + (" ..." if len(done) > 10 else ""))
        if alive:
            return None     # dependents still terminating: their deletion re-queues this key
        finalizers = [f for f in meta.get("finalizers") or [] if f != FOREGROUND_FINALIZER]
        result = self.write_many([[commands.update(
            resource, namespace or None, name, dict(owner, metadata=dict(meta, finalizers=finalizers)),
            precondition={"uid": uid, "resourceVersion": meta.get("resourceVersion")})]])[0]
        if not result.get("ok"):
            if result.get("reason") == "NotFound":
                return None
            raise Retry("finishing the foreground deletion of %s: %s" % (described, result.get("message")))
        if finalizers:
            return "dependents of %s are gone; it waits for finalizers %s" % (described, ", ".join(finalizers))
        return "deleted %s: its dependents are gone (foreground deletion)" % described

    def _collect_orphans(self, uid):
        dependents = self.dependents_of(uid)
        # Fast path: the owner exists (as every dependent names it), so nothing depends on its absence.
        named = {(kind, name, ns) for (_, ns, _), (kind, name) in dependents.items()}
        if all(self.owner_present({"kind": kind, "name": name, "uid": uid}, ns) is not False
               for kind, name, ns in named):
            return None
        kind, name, ns = sorted(named, key=str)[0] if named else ("owner", "?", "")
        owner = "%s %s" % (kind, "%s/%s" % (ns, name) if ns and getattr(resource_for_kind(kind), "namespaced", False)
                           else name)
        writes, doomed, trimmed = [], [], []
        for dkey in sorted(dependents):
            resource, namespace, name = dkey
            obj = self.store.get(resource, namespace or None, name)
            if obj is None or not any(r["uid"] == uid for r in _refs(obj)):
                continue           # gone or no longer a dependent: the index catches up from the change
            meta = obj["metadata"]
            refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, dict)]
            presence = [self.owner_present(r, namespace) for r in refs]
            if any(p is None for p in presence) or all(presence):
                continue           # an owner exists (or may): never delete
            precondition = {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
            if not any(presence):
                writes.append([delete_op(resource, namespace or None, name, precondition)])
                doomed.append(dkey)
            else:
                kept = [r for r, present in zip(refs, presence) if present]
                writes.append([commands.update(resource, namespace or None, name,
                                               dict(obj, metadata=dict(meta, ownerReferences=kept)),
                                               precondition=precondition)])
                trimmed.append(dkey)
        if not writes:
            return None
        results = []
        for start in range(0, len(writes), BATCH):
            results.extend(self.write_many(writes[start:start + BATCH]))
        keys = doomed + trimmed
        done = [k for k, r in zip(keys, results) if r.get("ok")]
        refused = [(k, r) for k, r in zip(keys, results) if r.get("reason") == "Forbidden"]
        lost = [(k, r) for k, r in zip(keys, results)
                if not r.get("ok") and r.get("reason") not in ("NotFound", "Forbidden")]
        deleted = [k for k in done if k in set(doomed)]
        updated = [k for k in done if k not in set(doomed)]
        parts = []
        if deleted:
            parts.append("deleted %d dependent(s) of deleted %s (uid %s): %s" % (
                len(deleted), owner, uid, ", ".join(_describe(k) for k in deleted[:10]) + (" ..." if len(deleted) > 10 else "")))
        if updated:
            parts.append("removed the reference to deleted %s (uid %s) from %d dependent(s) with other owners: %s"
                         % (owner, uid, len(updated), ", ".join(_describe(k) for k in updated[:10])))
        for dkey, result in refused:
            # The store will never take it (a built-in namespace): reported once, not retried.
            resource, namespace, name = dkey
            stub = {"metadata": {"namespace": namespace, "name": name}}
            self.object_failed("delete", resource, self.store.get(resource, namespace or None, name) or stub,
                               RefusedForGood(result.get("message")))
        if lost:
            # Changed meanwhile (Conflict): look again with what it is now.
            if parts:
                self.record("; ".join(parts))
            raise Retry("%d dependent(s) of %s changed meanwhile, e.g. %s: %s" % (
                len(lost), uid, _describe(lost[0][0]), lost[0][1].get("message")))
        return "; ".join(parts) or None


def controllers(store, recorder, settings):
    collector = GarbageCollector(store, recorder)
    collector.resync_period = settings.resync_period
    return [collector]
