"""Namespace controller: empties a Terminating namespace, then finalizes it
(Kubernetes' namespace lifecycle).

A namespace delete only marks the namespace (deletionTimestamp, phase Terminating,
the `kubernetes` spec finalizer; store/fsm.py), and from then on the store refuses
new content in it (403, cause NamespaceTerminating). Keys are namespace names.
Reconciling a Terminating one deletes everything in it as single deletes would:
pods on a node gracefully (their agents stop them within their grace periods and
then delete them), other objects at once unless finalizers hold them. It reports
what is left in the namespace's status conditions (NamespaceContentRemaining,
NamespaceFinalizersRemaining, NamespaceDeletionContentFailure, as Kubernetes names
them) and looks again when something in the namespace changes. Once nothing is
left, it removes its finalizer (finalize, guarded by the resourceVersion it read);
the store then deletes the namespace, unless a metadata finalizer of someone else
still holds it.
"""
from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.model.times import now_rfc3339
from shepherd_ha.store import commands
from shepherd_ha.store.deletion import delete_object_op
from shepherd_ha.store.fsm import NAMESPACE_FINALIZER

from .controller import Controller, Retry, WriteFailed

NAMESPACED = tuple(plural for plural, info in RESOURCES.items() if info.namespaced)
LOOK_AGAIN = 5.0     # seconds: a safety net; changes in the namespace wake it sooner
CONTENT_BATCH = 1.0   # seconds a burst of changes in a Terminating namespace is gathered for (each look lists it)


def _terminating(namespace):
    return bool(((namespace or {}).get("metadata") or {}).get("deletionTimestamp"))


def _spec_finalizers(namespace):
    spec = namespace.get("spec") if isinstance(namespace.get("spec"), dict) else {}
    finalizers = spec.get("finalizers")
    return [f for f in finalizers if isinstance(f, str)] if isinstance(finalizers, list) else []


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
        self._terminating = set()     # names of namespaces seen Terminating: their content's changes wake them

    def keys_for(self, change):
        obj = change.object or change.previous
        if change.resource == "namespaces":
            name = obj["metadata"]["name"]
            if change.object is not None and _terminating(change.object):
                self._terminating.add(name)
                return [name]
            self._terminating.discard(name)
            return []
        namespace = obj["metadata"].get("namespace")
        return [namespace] if namespace in self._terminating else []

    def all_keys(self):
        names = [n["metadata"]["name"] for n in self.store.list("namespaces") if _terminating(n)]
        self._terminating.update(names)
        return names

    def reconcile(self, name):
        namespace = self.store.get("namespaces", None, name)
        if not _terminating(namespace):
            self._terminating.discard(name)
            return None
        self._terminating.add(name)
        left, to_delete = [], []
        for plural in NAMESPACED:
            for obj in self.store.list(plural, name):
                (left if obj["metadata"].get("deletionTimestamp") else to_delete).append((plural, obj))
        failures = []
        if to_delete:
            kept, failures = self._delete(to_delete)
            left += kept
        if not left:
            return self._finalize(namespace)
        waiting, finalizers = {}, {}
        for plural, obj in left:
            waiting[plural] = waiting.get(plural, 0) + 1
            for finalizer in obj["metadata"].get("finalizers") or []:
                if isinstance(finalizer, str):
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
            elif result.get("reason") in ("NotFound", "Conflict"):
                kept.append((plural, obj))      # gone or replaced meanwhile: the next look sees which
            else:
                kept.append((plural, obj))
                failures.append('%s "%s": %s' % (plural, obj["metadata"]["name"], result.get("message")))
        return kept, failures

    def _finalize(self, namespace):
        meta = namespace["metadata"]
        finalizers = _spec_finalizers(namespace)
        if NAMESPACE_FINALIZER not in finalizers:
            return None       # finalized already; a metadata finalizer of someone else holds it
        kept = [f for f in finalizers if f != NAMESPACE_FINALIZER]
        result = self.write([commands.finalize(meta["name"], kept,
                                               precondition={"resourceVersion": meta.get("resourceVersion")})])
        outcome = result["results"][0]
        if outcome.get("deleted"):
            self._terminating.discard(meta["name"])
            return "namespace %s: empty, deleted" % meta["name"]
        held = kept + list(meta.get("finalizers") or [])
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
        old = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
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
