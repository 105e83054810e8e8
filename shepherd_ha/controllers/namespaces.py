"""Namespace controller: empties a Terminating namespace, then finalizes it
(Kubernetes' namespace lifecycle).

A namespace delete only marks the namespace (deletionTimestamp, phase Terminating,
the `kubernetes` spec finalizer; store/namespace_lifecycle.py), and from then on the store refuses
new content in it (403, cause NamespaceTerminating). Keys are namespace names.
Reconciling a Terminating one deletes everything in it as single deletes would:
pods on a node gracefully (their agents stop them within their grace periods and
then delete them), other objects at once unless finalizers hold them. It reports
what is left in the namespace's status conditions (NamespaceContentRemaining,
NamespaceFinalizersRemaining, NamespaceDeletionContentFailure, as Kubernetes names
them). Once nothing is left, it removes its finalizer (finalize, guarded by the
resourceVersion it read); the store then deletes the namespace, unless a metadata
finalizer of someone else still holds it.

A look lists the whole namespace, so it is not repeated for every change in it: a
pass remembers what it left, each of those deleted is crossed off, and the key comes
back when none is left (or after LOOK_AGAIN, whatever was missed).
"""
import threading

from shepherd_ha.model.namespaces import NAMESPACE_FINALIZER, spec_finalizers
from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.model.times import now_rfc3339
from shepherd_ha.store import commands
from shepherd_ha.store.deletion import delete_object_op

from .controller import Controller, Retry, WriteFailed

NAMESPACED = tuple(plural for plural, info in RESOURCES.items() if info.namespaced)
LOOK_AGAIN = 10.0    # seconds between looks at a namespace whose contents are still going (a safety net)
CONTENT_BATCH = 1.0   # seconds the last deletions in a Terminating namespace are gathered for


def _terminating(namespace):
    return bool(((namespace or {}).get("metadata") or {}).get("deletionTimestamp"))


def _finalizers(obj):
    found = obj["metadata"].get("finalizers")
    return [f for f in found if isinstance(f, str)] if isinstance(found, list) else []


def _count_phrase(counts):
    return ", ".join("%s has %d resource instances" % (what, n) for what, n in sorted(counts.items()))


class NamespaceController(Controller):
    name = "namespace"
    watches = ("namespaces",) + NAMESPACED
    batch_periods = {plural: CONTENT_BATCH for plural in NAMESPACED}

    def __init__(self, store, events=None, settings=None, now=now_rfc3339):
        super().__init__(store, events)
        if settings is not None:
            self.resync_period = settings.resync_period
        self.now = now
        self._lock = threading.Lock()
        # Terminating namespace -> {(resource, name)} its last look left in it (None: not looked at yet)
        self._left = {}

    def keys_for(self, change):
        obj = change.object or change.previous
        if change.resource == "namespaces":
            return self._namespace_changed(obj["metadata"]["name"], change)
        namespace = obj["metadata"].get("namespace")
        if change.object is not None:
            return []       # nothing new gets into a Terminating namespace; a change in one is not what it waits for
        with self._lock:
            if namespace not in self._left:
                return []
            left = self._left[namespace]
            if left is None:
                return [namespace]
            if (change.resource, obj["metadata"]["name"]) not in left:
                return []        # not one the last look waits for (one it deleted at once, say)
            left.discard((change.resource, obj["metadata"]["name"]))
        return [] if left else [namespace]

    def _namespace_changed(self, name, change):
        now, before = change.object, change.previous
        with self._lock:
            if now is None or not _terminating(now):
                self._left.pop(name, None)
                return []
            self._left.setdefault(name, None)
        # Its own status writes change nothing a look depends on: only the marking, and finalizers.
        if before is not None and _terminating(before) and _finalizers(before) == _finalizers(now) \
                and spec_finalizers(before) == spec_finalizers(now):
            return []
        return [name]

    def all_keys(self):
        names = [n["metadata"]["name"] for n in self.store.list("namespaces") if _terminating(n)]
        with self._lock:
            for name in names:
                self._left.setdefault(name, None)
        return names

    def reconcile(self, name):
        namespace = self.store.get("namespaces", None, name)
        if not _terminating(namespace):
            with self._lock:
                self._left.pop(name, None)
            return None
        left, to_delete = [], []
        for plural in NAMESPACED:
            for obj in self.store.list(plural, name):
                (left if obj["metadata"].get("deletionTimestamp") else to_delete).append((plural, obj))
        failures = []
        if to_delete:
            kept, failures = self._delete(to_delete)
            left += kept
        with self._lock:
            if name in self._left:
                self._left[name] = {(plural, obj["metadata"]["name"]) for plural, obj in left}
        if not left:
            return self._finalize(namespace)
        waiting, finalizers = {}, {}
        for plural, obj in left:
            waiting[plural] = waiting.get(plural, 0) + 1
            for finalizer in _finalizers(obj):
                finalizers[finalizer] = finalizers.get(finalizer, 0) + 1
        self._report(namespace, waiting, finalizers, failures)
        raise Retry("namespace %s: waiting for %s" % (name, _count_phrase(waiting)), delay=LOOK_AGAIN)

    def _delete(self, objects):
        """Delete `objects` ([(plural, obj)]) as single deletes would. Returns what is
        still there ([(plural, obj)]: a pod its agent is stopping, an object held by
        finalizers, one not deleted) and the refusals that matter (not those of an
        object gone or replaced meanwhile), as sentences."""
        results = self.write_many([[delete_object_op(plural, obj)] for plural, obj in objects])
        kept, failures = [], []
        for (plural, obj), result in zip(objects, results):
            if result.get("ok"):
                outcome = result["results"][0]
                if outcome.get("terminating") or outcome.get("finalizing"):
                    kept.append((plural, outcome["object"]))
            elif result.get("reason") == "NotFound":
                continue           # gone meanwhile
            else:
                kept.append((plural, obj))      # (a Conflict: replaced meanwhile; the next look sees it)
                if result.get("reason") != "Conflict":
                    failures.append('%s "%s": %s' % (plural, obj["metadata"]["name"], result.get("message")))
        return kept, failures

    def _finalize(self, namespace):
        meta = namespace["metadata"]
        finalizers = spec_finalizers(namespace)
        if NAMESPACE_FINALIZER not in finalizers:
            self._report(namespace, {}, {}, [])    # empty: what holds it is in metadata.finalizers
            return None
        kept = [f for f in finalizers if f != NAMESPACE_FINALIZER]
        result = self.write([commands.finalize(meta["name"], kept,
                                               precondition={"resourceVersion": meta.get("resourceVersion")})])
        outcome = result["results"][0]
        # (A retried write answered from the store's memory of it carries no "deleted": look.)
        if outcome.get("deleted") or self.store.get("namespaces", None, meta["name"]) is None:
            with self._lock:
                self._left.pop(meta["name"], None)
            return "namespace %s: empty, deleted" % meta["name"]
        self._report(outcome["object"], {}, {}, [])
        held = kept + _finalizers(namespace)
        return "namespace %s: empty, finalized; still held by finalizers %s" % (meta["name"], ", ".join(held))

    def _report(self, namespace, waiting, finalizers, failures):
        """The namespace's status conditions say what is left, written only when they change."""
        wanted = [
            ("NamespaceDeletionContentFailure", bool(failures),
             "ContentDeletionFailed" if failures else "ContentDeleted",
             "Failed to delete all resource types, %d remaining: %s" % (len(failures), "; ".join(failures[:5]))
             if failures else "All content successfully deleted, may be waiting on finalization"),
            ("NamespaceContentRemaining", bool(waiting),
             "SomeResourcesRemain" if waiting else "ContentRemoved",
             "Some resources are remaining: %s" % _count_phrase(waiting) if waiting
             else "All content successfully removed"),
            ("NamespaceFinalizersRemaining", bool(finalizers),
             "SomeFinalizersRemain" if finalizers else "ContentHasNoFinalizers",
             "Some content in the namespace has finalizers remaining: %s" % ", ".join(
                 "%s in %d resource instances" % (f, n) for f, n in sorted(finalizers.items()))
             if finalizers else "All content-preserving finalizers finished"),
        ]
        status = namespace.get("status") if isinstance(namespace.get("status"), dict) else {}
        conds = status.get("conditions") if isinstance(status.get("conditions"), list) else []
        old = {c.get("type"): c for c in conds if isinstance(c, dict)}
        conditions, changed = [], False
        for kind, true, reason, message in wanted:
            value = "True" if true else "False"
            before = old.get(kind) or {}
            if (before.get("status"), before.get("reason"), before.get("message")) == (value, reason, message):
                conditions.append(before)
                continue
            changed = True
            since = before.get("lastTransitionTime") if before.get("status") == value else None
            conditions.append({"type": kind, "status": value, "lastTransitionTime": since or self.now(),
                               "reason": reason, "message": message})
        if not changed:
            return
        meta = namespace["metadata"]
        new_status = dict(status, conditions=conditions)
        try:
            self.write([commands.update("namespaces", None, meta["name"], {"status": new_status},
                                        precondition={"resourceVersion": meta.get("resourceVersion")},
                                        subresource="status")])
        except WriteFailed:
            pass      # a lost race (the namespace changed meanwhile): the next look writes them


def controllers(store, recorder, settings):
    return [NamespaceController(store, recorder, settings)]
