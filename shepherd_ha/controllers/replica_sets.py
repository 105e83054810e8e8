"""ReplicaSet controller: keeps `spec.replicas` pods of a ReplicaSet's template.

Ownership by ownerReferences only: a ReplicaSet's pods are the pods whose controller
reference carries its uid (nothing is adopted because its labels match; the deployment
controller moves pods of older servers over, see deployment_history.py). An owned pod
whose labels stop matching the selector is released; a finished pod (Succeeded/Failed)
is deleted and replaced. Pods are named `<replica set>-<5 random chars>`, which for a
deployment's ReplicaSet is `<deployment>-<pod-template-hash>-<suffix>`.

Scale-down picks unscheduled, then not ready, then the newest pods (deletion_order).

A pass whose writes end with an unknown outcome (the store timed out, or the batch was
cut short) may still have created pods that land after the next pass reads the store.
That pass creates under the same names first (`unsettled`, those its own read of the
ReplicaSet's pods does not hold), so a creation landing late and its retry are one pod:
an AlreadyExists for such a name counts as created. (The kube-controller-manager waits
on "expectations" instead; names need no timeout.)

Status: replicas, fullyLabeledReplicas, readyReplicas, availableReplicas (ready for
minReadySeconds), observedGeneration. All writes of a pass go in one write_many.
"""
import time

from shepherd_ha.model.selectors import LabelSelector, SelectorError
from shepherd_ha.model.validation import describe_causes, validate_object
from shepherd_ha.store import commands
from shepherd_ha.store.deletion import delete_object_op

from .controller import Controller, Retry, key_of
from .deployment_util import (availability, controller_ref, deletion_order, is_ready, is_terminal,
                              names_summary, new_pod, plural, pod_change_matters, random_suffix,
                              rs_pod_prototype, _name_base)


class ReplicaSetController(Controller):
    name = "replicasets"
    watches = ("replicasets", "pods")
    workers = 4
    max_creates_per_pass = 5000      # as the deployment controller did: one write_many, about 1 s

    def __init__(self, store, events=None, settings=None, wall=time.time, max_pods_per_entry=None):
        super().__init__(store, events)
        if settings is not None:
            self.resync_period = settings.resync_period
            self.batch_periods = {"pods": settings.pod_batch_period}
        self.wall = wall
        self.max_pods_per_entry = max_pods_per_entry
        # key -> (the ReplicaSet's uid, names of pods whose creation's outcome is unknown:
        # a pass raised while writing them). A key is reconciled by one worker at a time.
        self.unsettled = {}

    def keys_for(self, change):
        if change.resource == "replicasets":
            return [key_of(change.object or change.previous)]
        if not pod_change_matters(change.object, change.previous):
            return []
        keys = []
        for obj in (change.object, change.previous):
            ref = controller_ref(obj) if obj else None
            if ref and ref.get("kind") == "ReplicaSet" and ref.get("name"):
                key = (obj["metadata"].get("namespace") or "", ref["name"])
                if key not in keys:
                    keys.append(key)
        return keys

    def emit(self, obj, reason, message, type_="Normal"):
        if self.events is not None:
            self.events.emit(obj, reason, message, type_)

    def reconcile(self, key):
        namespace, name = key
        rs = self.store.get("replicasets", namespace, name)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            self.unsettled.pop(key, None)
            return None
        owned = self.owned("pods", namespace, rs["metadata"]["uid"], "ReplicaSet")
        pods = [p for p in owned if not p["metadata"].get("deletionTimestamp")]
        return _Pass(self, key, rs, pods, {p["metadata"]["name"] for p in owned}).run()


class _Pass:
    def __init__(self, ctl, key, rs, pods, seen=()):
        self.ctl, self.key, self.rs, self.pods = ctl, key, rs, pods
        self.seen = seen             # names of every pod it owned as this pass read them
        self.taken = set()           # names given out in this pass
        self.retried = set()         # names of an earlier pass's unknown creations, created again
        self.meta = rs["metadata"]
        self.spec = rs.get("spec") or {}
        self.name = self.meta["name"]
        self.namespace = self.meta.get("namespace") or "default"
        self.replicas = self.spec.get("replicas", 1)
        self.min_ready = self.spec.get("minReadySeconds") or 0
        self.now = ctl.wall()

    def _names(self, count):
        """`count` names for new pods: first those of an earlier pass's creations whose
        outcome is unknown and that this pass did not read (one landing since then is
        an AlreadyExists, counted as created), then new ones."""
        uid, names = self.ctl.unsettled.get(self.key, (None, ()))
        again = [n for n in names if n not in self.seen][:count] if uid == self.meta["uid"] else []
        self.retried.update(again)
        self.taken.update(again)
        return again + [self._unique_name() for _ in range(count - len(again))]

    def _unique_name(self):
        base = _name_base(self.name, 6)
        while True:
            name = "%s-%s" % (base, random_suffix())
            if name not in self.taken and self.ctl.store.get("pods", self.namespace, name) is None:
                self.taken.add(name)
                return name

    def run(self):
        try:
            selector = LabelSelector.from_spec(self.spec.get("selector"))
        except SelectorError:
            selector = None
        active, release, finished = [], [], []
        for pod in self.pods:
            labels = pod["metadata"].get("labels") or {}
            if selector is not None and not selector.empty and not selector.matches(labels):
                release.append(pod)
            elif is_terminal(pod):
                finished.append(pod)
            else:
                active.append(pod)
        create = max(0, min(self.replicas - len(active), self.ctl.max_creates_per_pass))
        excess = len(active) - self.replicas
        delete = deletion_order(active)[:excess] if excess > 0 else []     # (a sort of every pod)
        created = []
        if create:
            prototype = rs_pod_prototype(self.rs)
            causes = validate_object("pods", dict(prototype, metadata=dict(prototype["metadata"], name="p")))
            if causes:
                message = "pod template is invalid: %s" % describe_causes(causes)
                self.ctl.emit(self.rs, "FailedCreate", message, "Warning")
                raise Retry(message, delay=30.0)
            created = [new_pod(prototype, name) for name in self._names(create)]
        gone = {id(p) for p in delete}
        after = [p for p in active if id(p) not in gone] + created
        status, waits = self._status(after)
        writes = [[commands.create("pods", p)] for p in created]
        writes += [[self._release_op(p)] for p in release]
        writes += [[delete_object_op("pods", p)] for p in delete + finished]
        status_changed = status != (self.rs.get("status") or None)
        if status_changed:
            writes.append([commands.update("replicasets", self.namespace, self.name, dict(self.rs, status=status),
                                           precondition={"uid": self.meta["uid"]}, subresource="status")])
        if created:      # until their outcome is known (the write raises: not known)
            self.ctl.unsettled[self.key] = (self.meta["uid"], [p["metadata"]["name"] for p in created])
        results = self._write_batch(writes) if writes else []
        self.ctl.unsettled.pop(self.key, None)
        done = self._report(results, created, release, delete, finished, status_changed)
        if waits:
            self.ctl.queue.add_after(self.key, min(waits) + 0.01)
        return ("replicaset %s/%s: %s" % (self.namespace, self.name, "; ".join(done))) if done else None

    def _write_batch(self, writes):
        size = self.ctl.max_pods_per_entry or len(writes) or 1
        results = []
        for start in range(0, len(writes), size):
            results += self.ctl.write_many(writes[start:start + size])
        return results

    def _release_op(self, pod):
        meta = pod["metadata"]
        refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != self.meta["uid"]]
        new_meta = dict(meta, ownerReferences=refs)
        if not refs:
            new_meta.pop("ownerReferences")
        return commands.update("pods", self.namespace, meta["name"], dict(pod, metadata=new_meta),
                               precondition={"resourceVersion": meta["resourceVersion"]})

    def _status(self, pods):
        template_labels = ((self.spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        available, waits = 0, []
        for p in pods:
            ok, left = availability(p, self.min_ready, self.now)
            available += ok
            if left is not None:
                waits.append(left)
        labelled = sum(1 for p in pods
                       if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in template_labels.items()))
        status = {"replicas": len(pods), "fullyLabeledReplicas": labelled,
                  "readyReplicas": sum(1 for p in pods if is_ready(p)), "availableReplicas": available,
                  "observedGeneration": self.meta.get("generation", 1)}
        return status, waits

    def _report(self, results, created, release, delete, finished, status_changed):
        results = iter(results)
        failures, done = [], []

        def outcomes(items, tolerate=(), retried=()):
            ok = []
            for item in items:
                result = next(results)
                if result.get("ok") or result.get("reason") in tolerate or \
                        (result.get("reason") == "AlreadyExists" and item["metadata"]["name"] in retried):
                    ok.append(item)
                else:
                    failures.append("%s: %s" % (item["metadata"]["name"], result.get("message")))
            return ok
        names = lambda pods: names_summary(p["metadata"]["name"] for p in pods)   # noqa: E731
        made = outcomes(created, retried=self.retried)     # (an earlier pass's creation landed first)
        released = outcomes(release)
        gone = outcomes(delete + finished, tolerate=("NotFound",))
        if status_changed:
            result = next(results)
            if not result.get("ok") and result.get("reason") != "NotFound":
                failures.append("status: %s" % result.get("message"))
        gone_ids = {id(p) for p in gone}
        scaled_down = [p for p in delete if id(p) in gone_ids]
        removed_finished = [p for p in finished if id(p) in gone_ids]
        if made:
            self.ctl.emit(self.rs, "SuccessfulCreate", "Created %s: %s" % (plural(len(made), "pod"), names(made)))
            done.append("created %s (%s)" % (plural(len(made), "pod"), names(made)))
        if scaled_down:
            self.ctl.emit(self.rs, "SuccessfulDelete", "Deleted %s: %s"
                          % (plural(len(scaled_down), "pod"), names(scaled_down)))
            done.append("deleted %s (%s)" % (plural(len(scaled_down), "pod"), names(scaled_down)))
        if removed_finished:
            self.ctl.emit(self.rs, "DeletedFinishedPods", "Deleted finished pods: %s" % names(removed_finished))
            done.append("deleted %s that had finished (%s)"
                        % (plural(len(removed_finished), "pod"), names(removed_finished)))
        if released:
            self.ctl.emit(self.rs, "ReleasedPods", "Released pods whose labels no longer match the selector: %s"
                          % names(released))
            done.append("released %s (%s)" % (plural(len(released), "pod"), names(released)))
        if status_changed and not failures:
            done.append("status updated")
        if failures:
            raise Retry("replicaset %s/%s: %s; %d writes failed: %s" % (
                self.namespace, self.name, "; ".join(done) or "nothing done", len(failures), "; ".join(failures[:3])))
        return done


def controllers(store, recorder, settings):
    return [ReplicaSetController(store, recorder, settings)]
