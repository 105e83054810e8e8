"""Deployment controller: keeps `spec.replicas` pods of a deployment's template, rolls
template changes out (RollingUpdate or Recreate), keeps revision history, reports status.

Ownership. A deployment's pods are the pods whose controller ownerReference carries
its uid; nothing is adopted because its labels match. Pods are named
`<deployment>-<template hash>-<5 random chars>` and labelled with the template's
labels plus `pod-template-hash`. An owned pod whose labels stop matching the
selector is released (our reference removed), as Kubernetes does; a pod that
finished (Succeeded/Failed) is deleted and replaced.

Revisions. Each distinct template has a ControllerRevision `<deployment>-<hash>`
owned by the deployment (`revision`, `data.template`, the deployment's
`kubernetes.io/change-cause` at the time), playing the part Kubernetes'
ReplicaSets play for history. The current template's revision is the highest;
rolling back to an old template gives it the next number, and the deployment
carries it in `deployment.kubernetes.io/revision`. Old revisions whose pods are all
gone are kept up to `spec.revisionHistoryLimit`.

One pass (`reconcile`) reads the deployment, its pods and revisions from the
leader's store, records the revision if the template is new, then plans creations
and deletions (deployment_plan.py) and submits them with the new status, each pod
an independent write, all in one `write_many` (group commit spreads it over Raft
entries of at most 64 KiB). Its own writes come back as pod changes and queue the next
pass, so a rollout moves as far as its bounds allow without waiting, then waits for
pods to become ready. Time-based work (minReadySeconds, the progress deadline)
re-queues the key when it is due.

The progress deadline is judged on the leader's monotonic clock: the time since
this leader last saw the rollout progress (more pods updated, ready or available,
fewer old ones). A new leader gives a rollout a full deadline again, except one
already marked ProgressDeadlineExceeded, which stays so until it progresses.
"""
import logging
import threading
import time

from shepherd_ha.model.selectors import LabelSelector, SelectorError
from shepherd_ha.model.validation import describe_causes, validate_object
from shepherd_ha.store import commands
from shepherd_ha.store.deletion import delete_object_op
from shepherd_ha.store.raft_node import Unavailable
from shepherd_ha.store.stamping import now_rfc3339, stamp_new

from .controller import Controller, Retry, WriteFailed, key_of
from .deployment_plan import plan_recreate, plan_rolling, plan_scale
from .deployment_util import (CHANGE_CAUSE_ANNOTATION, HASH_LABEL, REVISION_ANNOTATION, availability,
                              controller_ref, hash_of, is_ready, is_terminal, ready_condition, max_unavailable, names_summary,
                              new_pod, owned_by, owner_reference, plural, pod_name, pod_prototype,
                              revision_name, rolling_bounds, strategy_type, template_hash)

log = logging.getLogger("shepherd_ha.controllers")

# Progressing condition reasons
NEW_PODS_AVAILABLE = "NewPodsAvailable"
PODS_UPDATING = "PodsUpdating"
DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"


class _Tracker:
    """What this leader knows of a rollout's progress (in memory, per deployment)."""
    __slots__ = ("identity", "counts", "since", "reason", "complete")

    def __init__(self, identity, counts, since, reason=None):
        self.identity, self.counts, self.since, self.reason = identity, counts, since, reason
        self.complete = False


def _progressed(before, after):
    """Kubernetes' notion of progress: more updated, ready or available pods, or fewer old ones."""
    updated0, ready0, available0, old0 = before
    updated1, ready1, available1, old1 = after
    return updated1 > updated0 or ready1 > ready0 or available1 > available0 or old1 < old0


def _condition(old_conditions, type_, status, reason, message, now):
    for old in old_conditions:
        if old.get("type") == type_:
            if (old.get("status"), old.get("reason"), old.get("message")) == (status, reason, message):
                return old
            transition = old.get("lastTransitionTime") if old.get("status") == status else now
            return {"type": type_, "status": status, "reason": reason, "message": message,
                    "lastUpdateTime": now, "lastTransitionTime": transition or now}
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastUpdateTime": now, "lastTransitionTime": now}


def find_condition(status, type_):
    for cond in (status or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


class DeploymentController(Controller):
    name = "deployments"
    watches = ("deployments", "pods", "controllerrevisions")
    workers = 4

    # Pods created in one pass (one write_many): 5,000 take about 1 s to commit here, well
    # inside the store's write timeout; bigger deployments take several passes, each queued
    # by the previous one's own changes.
    max_creates_per_pass = 5000

    def __init__(self, store, events=None, settings=None, wall=time.time, max_pods_per_entry=None):
        super().__init__(store, events)
        if settings is not None:
            self.resync_period = settings.resync_period
        self.wall = wall                      # wall clock: readiness times written by agents
        self.max_pods_per_entry = max_pods_per_entry    # None: a whole pass in one write_many
        self._lock = threading.Lock()
        self._trackers = {}                   # key -> _Tracker
        self._wakeups = {}                    # key -> monotonic time a re-queue is due

    # ---- keys ----

    def keys_for(self, change):
        if change.resource == "deployments":
            return [key_of(change.object or change.previous)]
        if change.resource == "pods" and not _pod_change_matters(change.object, change.previous):
            return []       # e.g. a binding: nothing this controller counts or reports changed
        keys = []
        for obj in (change.object, change.previous):
            ref = controller_ref(obj) if obj else None
            if ref and ref.get("kind") == "Deployment" and ref.get("name"):
                key = (obj["metadata"].get("namespace") or "", ref["name"])
                if key not in keys:
                    keys.append(key)
        return keys

    # ---- one pass ----

    def reconcile(self, key):
        namespace, name = key
        deployment = self.store.get("deployments", namespace, name)
        if deployment is None or deployment["metadata"].get("deletionTimestamp"):
            with self._lock:
                self._trackers.pop(key, None)
                self._wakeups.pop(key, None)
            return None
        uid = deployment["metadata"]["uid"]
        all_pods = self.store.list("pods", namespace)
        # Terminating pods (deletionTimestamp: their agent is stopping them) no longer count.
        pods = self.select("pods", all_pods, lambda p: owned_by(p, uid) and not p["metadata"].get("deletionTimestamp"))
        revisions = self.select("controllerrevisions", self.store.list("controllerrevisions", namespace),
                                lambda r: owned_by(r, uid))
        taken = {p["metadata"]["name"] for p in all_pods}
        return _Pass(self, key, deployment, pods, revisions, taken).run()

    # ---- helpers for _Pass ----

    def emit(self, obj, reason, message, type_="Normal"):
        if self.events is not None:
            self.events.emit(obj, reason, message, type_)

    def write_batch(self, writes):
        """Independent writes, in one write_many (or calls of max_pods_per_entry)."""
        size = self.max_pods_per_entry or len(writes) or 1
        results = []
        for start in range(0, len(writes), size):
            try:
                results += self.store.write_many(writes[start:start + size])
            except Unavailable as exc:
                raise Retry("store unavailable: %s" % exc)
        return results

    def wake_after(self, key, delay):
        """Re-queue `key` in `delay` seconds, unless an earlier re-queue is pending."""
        now = self.store.clock()
        due = now + max(0.0, delay)
        with self._lock:
            pending = self._wakeups.get(key)
            if pending is not None and now < pending <= due:
                return
            self._wakeups[key] = due
        self.queue.add_after(key, max(0.0, delay))

    def tracker(self, key, deployment, counts, complete, paused):
        """The Progressing reason for this pass, and seconds until the deadline (or None)."""
        now = self.store.clock()
        generation = deployment["metadata"].get("generation", 1)
        identity = (deployment["metadata"].get("uid"), generation)    # a re-created namesake starts afresh
        deadline = (deployment.get("spec") or {}).get("progressDeadlineSeconds")
        with self._lock:
            tr = self._trackers.get(key)
            if tr is None:
                tr = self._trackers[key] = _Tracker(identity, counts, now)
                status = deployment.get("status") or {}
                stored = find_condition(status, "Progressing")
                if stored and status.get("observedGeneration") == generation:
                    tr.reason = stored.get("reason")
                    tr.complete = tr.reason == NEW_PODS_AVAILABLE
                    if tr.reason == DEADLINE_EXCEEDED:
                        tr.since = float("-inf")
            elif tr.identity != identity:
                tr.identity, tr.since, tr.reason, tr.complete = identity, now, None, False
            elif _progressed(tr.counts, counts) or (tr.complete and not complete):
                tr.since = now
            tr.counts = counts
            left = None
            if paused:
                reason = PAUSED
                tr.since = now
            elif complete:
                reason = NEW_PODS_AVAILABLE
                tr.since = now
            elif tr.reason == NEW_PODS_AVAILABLE:
                reason = NEW_PODS_AVAILABLE     # rolled out; pods failing since is not a rollout
            elif deadline is not None and now - tr.since > deadline:
                reason = DEADLINE_EXCEEDED
            else:
                reason = PODS_UPDATING
                if deadline is not None:
                    left = tr.since + deadline - now
            tr.reason, tr.complete = reason, complete
            return reason, left


class _Pass:
    """One reconcile of one deployment."""

    def __init__(self, ctl, key, deployment, pods, revisions, taken_names=()):
        self.ctl = ctl
        self.key = key
        self.d = deployment
        self.pods = pods
        self.revisions = revisions
        self.meta = deployment["metadata"]
        self.spec = deployment.get("spec") or {}
        self.name = self.meta["name"]
        self.namespace = self.meta.get("namespace") or "default"
        self.replicas = self.spec.get("replicas", 1)
        self.paused = bool(self.spec.get("paused"))
        self.min_ready = self.spec.get("minReadySeconds") or 0
        self.taken_names = set(taken_names)   # pod names in use in the namespace
        self.done = []           # what this pass did, for the sentence
        self.now = ctl.wall()
        self._availability = {}

    # ---- helpers ----

    def availability(self, pod):
        """(available, seconds until it will be) for this pass's time."""
        uid = pod["metadata"].get("uid")
        if uid not in self._availability:
            self._availability[uid] = availability(pod, self.min_ready, self.now)
        return self._availability[uid]

    def available(self, pod):
        return self.availability(pod)[0]

    def revision_of(self, pod):
        return self.revision_by_hash.get(hash_of(pod), 0)

    def _write(self, ops):
        try:
            return self.ctl.write(ops)
        except WriteFailed as exc:
            if "Conflict" in str(exc) or "NotFound" in str(exc):
                raise Retry("deployment %s/%s changed while reconciling: %s" % (self.namespace, self.name, exc),
                            delay=0)
            raise

    # ---- the pass ----

    def run(self):
        spec_hash = template_hash(self.spec.get("template") or {})
        if self.paused:
            target_hash, target_template = self._current_revision()
        else:
            target_hash, target_template = spec_hash, self.spec.get("template") or {}
            self._sync_revision(spec_hash)
        self.revision_by_hash = {hash_of(r): r.get("revision", 0) for r in self.revisions}

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

        create, delete = self._plan(active, target_hash)
        create = min(create, self.ctl.max_creates_per_pass)
        prototype = None
        if create:
            prototype = pod_prototype(self.d, target_hash, target_template)
            causes = validate_object("pods", dict(prototype, metadata=dict(prototype["metadata"], name="p")))
            if causes:
                message = "pod template is invalid: %s" % describe_causes(causes)
                self.ctl.emit(self.d, "FailedCreate", message, "Warning")
                raise Retry(message, delay=30.0)
        created = [new_pod(prototype, self._unique_pod_name(target_hash)) for _ in range(create)]

        deleted_ids = {id(p) for p in delete}
        after = [p for p in active if id(p) not in deleted_ids] + created
        history_deletes = self._history_to_delete(after, target_hash)
        status, outcome = self._status(after, spec_hash, target_hash)

        writes = [[commands.create("pods", p)] for p in created]
        writes += [[self._release_op(p)] for p in release]
        writes += [[self._delete_op("pods", p)] for p in delete + finished]
        writes += [[self._delete_op("controllerrevisions", r)] for r in history_deletes]
        status_changed = status != (self.d.get("status") or None)
        if status_changed:
            writes.append([commands.update("deployments", self.namespace, self.name, dict(self.d, status=status),
                                           precondition={"uid": self.meta["uid"]}, subresource="status")])
        results = self.ctl.write_batch(writes) if writes else []
        self._report(results, created, release, delete, finished, history_deletes, status_changed,
                     len(after))
        self._after_status(status, outcome)
        return ("deployment %s/%s: %s" % (self.namespace, self.name, "; ".join(self.done))) if self.done else None

    # ---- revisions ----

    def _current_revision(self):
        """(hash, template) a paused deployment keeps scaling: its current revision's,
        or (None, None) when it has none yet (it then creates nothing)."""
        number = str((self.meta.get("annotations") or {}).get(REVISION_ANNOTATION, ""))
        chosen = None
        for r in self.revisions:
            if str(r.get("revision")) == number:
                chosen = r
                break
            if chosen is None or r.get("revision", 0) > chosen.get("revision", 0):
                chosen = r
        template = ((chosen or {}).get("data") or {}).get("template")
        if not isinstance(template, dict):
            return None, None
        return hash_of(chosen), template

    def _sync_revision(self, spec_hash):
        """Record the template's revision (new: max + 1; an old one come back: max + 1),
        the change cause, and the deployment's revision annotation, atomically."""
        same = [r for r in self.revisions if hash_of(r) == spec_hash]
        current = max(same, key=lambda r: r.get("revision", 0)) if same else None
        highest_other = max([r.get("revision", 0) for r in self.revisions if hash_of(r) != spec_hash] or [0])
        annotations = self.meta.get("annotations") or {}
        cause = annotations.get(CHANGE_CAUSE_ANNOTATION)
        ops = []
        if current is None:
            number = highest_other + 1
            template = self.spec.get("template") or {}
            labels = dict((template.get("metadata") or {}).get("labels") or {})
            labels[HASH_LABEL] = spec_hash
            name = revision_name(self.name, spec_hash)
            taken = self.ctl.store.get("controllerrevisions", self.namespace, name)
            if taken is not None:       # a stranger's, e.g. of a deleted namesake not yet collected
                name = pod_name(self.name, spec_hash)
            meta = {"name": name, "namespace": self.namespace, "labels": labels,
                    "ownerReferences": [owner_reference(self.d)]}
            if cause:
                meta["annotations"] = {CHANGE_CAUSE_ANNOTATION: cause}
            revision = stamp_new({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": meta,
                                  "revision": number, "data": {"template": template}})
            ops.append(commands.create("controllerrevisions", revision))
            self.done.append("recorded revision %d" % number)
        else:
            number = current.get("revision", 0)
            rmeta = current["metadata"]
            rcause = (rmeta.get("annotations") or {}).get(CHANGE_CAUSE_ANNOTATION)
            if number <= highest_other or (cause and cause != rcause):
                if number <= highest_other:
                    self.done.append("template of revision %d is back as revision %d"
                                     % (number, highest_other + 1))
                    number = highest_other + 1
                new_meta = dict(rmeta)
                if cause:
                    new_meta["annotations"] = dict(rmeta.get("annotations") or {}, **{CHANGE_CAUSE_ANNOTATION: cause})
                ops.append(commands.update("controllerrevisions", self.namespace, rmeta["name"],
                                           dict(current, metadata=new_meta, revision=number),
                                           precondition={"resourceVersion": rmeta["resourceVersion"]}))
        if str(annotations.get(REVISION_ANNOTATION)) != str(number):
            meta = dict(self.meta, annotations=dict(annotations, **{REVISION_ANNOTATION: str(number)}))
            ops.append(commands.update("deployments", self.namespace, self.name, dict(self.d, metadata=meta),
                                       precondition={"resourceVersion": self.meta["resourceVersion"]}))
        if not ops:
            return
        result = self._write(ops)
        for op_result in result["results"]:
            obj = op_result["object"]
            if op_result["resource"] == "deployments":
                self.d, self.meta = obj, obj["metadata"]
            else:
                self.revisions = [r for r in self.revisions if r["metadata"]["uid"] != obj["metadata"]["uid"]]
                self.revisions.append(obj)

    def _history_to_delete(self, pods_after, target_hash):
        """Old revisions beyond revisionHistoryLimit whose pods are all gone, oldest first."""
        limit = self.spec.get("revisionHistoryLimit", 10)
        if limit is None:
            return []
        live = {hash_of(p) for p in pods_after}
        old = sorted((r for r in self.revisions if hash_of(r) != target_hash),
                     key=lambda r: r.get("revision", 0))
        excess = len(old) - limit
        if excess <= 0:
            return []
        return [r for r in old if hash_of(r) not in live][:excess]

    # ---- pods ----

    def _plan(self, active, target_hash):
        new = [p for p in active if target_hash is not None and hash_of(p) == target_hash]
        new_ids = {id(p) for p in new}
        old = [p for p in active if id(p) not in new_ids]
        if self.paused:
            return plan_scale(active, self.replicas, target_hash is not None, self.revision_of)
        if strategy_type(self.spec) == "Recreate":
            return plan_recreate(new, old, self.replicas)
        surge, unavailable = rolling_bounds(self.spec, self.replicas)
        return plan_rolling(new, old, self.replicas, surge, unavailable, self.available, self.revision_of)

    def _unique_pod_name(self, hash_):
        """A random name not in use: 27^5 suffixes make a clash likely among thousands of pods."""
        while True:
            name = pod_name(self.name, hash_)
            if name not in self.taken_names:
                self.taken_names.add(name)
                return name

    def _release_op(self, pod):
        meta = pod["metadata"]
        refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != self.meta["uid"]]
        new_meta = dict(meta, ownerReferences=refs)
        if not refs:
            new_meta.pop("ownerReferences")
        return commands.update("pods", self.namespace, meta["name"], dict(pod, metadata=new_meta),
                               precondition={"resourceVersion": meta["resourceVersion"]})

    def _delete_op(self, resource, obj):
        return delete_object_op(resource, obj)     # pods on a node: gracefully, through their agent

    # ---- status ----

    def _status(self, pods, spec_hash, target_hash):
        updated = [p for p in pods if hash_of(p) == spec_hash]
        ready = sum(1 for p in pods if is_ready(p))
        waits = []
        available = 0
        for p in pods:
            ok, left = self.availability(p)
            available += ok
            if left is not None:
                waits.append(left)
        updated_available = sum(1 for p in updated if self.available(p))
        old = len(pods) - len(updated)
        total = len(pods)
        complete = (not self.paused and len(updated) == self.replicas and total == self.replicas
                    and available == self.replicas)
        reason, deadline_left = self.ctl.tracker(self.key, self.d, (len(updated), ready, available, old),
                                                 complete, self.paused)
        now = now_rfc3339()
        old_conditions = [c for c in (self.d.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
        minimum = self.replicas - max_unavailable(self.spec, self.replicas)
        if available >= minimum:
            available_cond = _condition(old_conditions, "Available", "True", "MinimumReplicasAvailable",
                                        "Deployment has minimum availability.", now)
        else:
            available_cond = _condition(old_conditions, "Available", "False", "MinimumReplicasUnavailable",
                                        "Deployment does not have minimum availability (%d of %d required "
                                        "pods available)." % (available, minimum), now)
        revision = (self.meta.get("annotations") or {}).get(REVISION_ANNOTATION, "?")
        progress = "revision %s has %d of %d pods updated, %d available" % (
            revision, len(updated), self.replicas, updated_available)
        if old:
            progress += ", %d old pods left" % old
        if reason == PAUSED:
            progressing = _condition(old_conditions, "Progressing", "Unknown", PAUSED, "Deployment is paused.", now)
        elif reason == NEW_PODS_AVAILABLE:
            progressing = _condition(old_conditions, "Progressing", "True", NEW_PODS_AVAILABLE,
                                     'Deployment "%s" has successfully progressed: revision %s is available.'
                                     % (self.name, revision), now)
        elif reason == DEADLINE_EXCEEDED:
            progressing = _condition(old_conditions, "Progressing", "False", DEADLINE_EXCEEDED,
                                     'Deployment "%s" has timed out progressing: %s.' % (self.name, progress), now)
        else:
            progressing = _condition(old_conditions, "Progressing", "True", PODS_UPDATING,
                                     'Deployment "%s" is progressing: %s.' % (self.name, progress), now)
        status = {"observedGeneration": self.meta.get("generation", 1), "replicas": total,
                  "updatedReplicas": len(updated), "readyReplicas": ready, "availableReplicas": available,
                  "unavailableReplicas": max(0, total - available),
                  "conditions": [available_cond, progressing]}
        outcome = {"waits": waits, "deadline_left": deadline_left, "reason": reason, "available": available}
        return status, outcome

    def _after_status(self, status, outcome):
        old = find_condition(self.d.get("status"), "Progressing") or {}
        reason = outcome["reason"]
        revision = (self.meta.get("annotations") or {}).get(REVISION_ANNOTATION, "?")
        if reason != old.get("reason"):
            if reason == NEW_PODS_AVAILABLE:
                self.ctl.emit(self.d, "RolloutComplete", "Deployment %s has successfully rolled out revision %s: "
                              "%s available" % (self.name, revision, plural(outcome["available"], "pod")))
                self.done.append("rollout of revision %s complete" % revision)
            elif reason == DEADLINE_EXCEEDED:
                message = find_condition(status, "Progressing")["message"]
                self.ctl.emit(self.d, DEADLINE_EXCEEDED, message, "Warning")
                self.done.append("progress deadline exceeded")
        delays = list(outcome["waits"])
        if outcome["deadline_left"] is not None:
            delays.append(outcome["deadline_left"])
        if delays:
            self.ctl.wake_after(self.key, min(delays) + 0.01)

    # ---- what happened ----

    def _report(self, results, created, release, delete, finished, history_deletes, status_changed, total_after):
        results = iter(results)
        failures = []

        def outcomes(items, tolerate=()):
            ok = []
            for item in items:
                result = next(results)
                if result.get("ok") or result.get("reason") in tolerate:
                    ok.append(item)
                else:
                    failures.append("%s: %s" % (item["metadata"]["name"], result.get("message")))
            return ok

        made = outcomes(created)
        released = outcomes(release)
        gone = outcomes(delete + finished, tolerate=("NotFound",))
        pruned = outcomes(history_deletes, tolerate=("NotFound",))
        if status_changed:
            status_result = next(results)
            if not status_result.get("ok") and status_result.get("reason") != "NotFound":
                failures.append("status: %s" % status_result.get("message"))
        gone_ids = {id(p) for p in gone}
        scaled_down = [p for p in delete if id(p) in gone_ids]
        removed_finished = [p for p in finished if id(p) in gone_ids]
        names = lambda pods: names_summary(p["metadata"]["name"] for p in pods)   # noqa: E731
        if made:
            self.ctl.emit(self.d, "ScalingUp", "Scaled up deployment %s to %d: created %s"
                          % (self.name, total_after, names(made)))
            self.done.append("created %s (%s)" % (plural(len(made), "pod"), names(made)))
        if scaled_down:
            self.ctl.emit(self.d, "ScalingDown", "Scaled down deployment %s to %d: deleted %s"
                          % (self.name, total_after, names(scaled_down)))
            self.done.append("deleted %s (%s)" % (plural(len(scaled_down), "pod"), names(scaled_down)))
        if removed_finished:
            self.ctl.emit(self.d, "DeletedFinishedPods", "Deleted finished pods of deployment %s: %s"
                          % (self.name, names(removed_finished)))
            self.done.append("deleted %s that had finished (%s)"
                             % (plural(len(removed_finished), "pod"), names(removed_finished)))
        if released:
            self.ctl.emit(self.d, "ReleasedPods", "Released pods whose labels no longer match the selector of "
                          "deployment %s: %s" % (self.name, names(released)))
            self.done.append("released %s (%s)" % (plural(len(released), "pod"), names(released)))
        if pruned:
            self.done.append("removed %s from history" % ", ".join(
                "revision %s" % r.get("revision") for r in pruned))
        if status_changed and not failures:
            self.done.append("status updated")
        if failures:
            raise Retry("deployment %s/%s: %s; %d writes failed: %s" % (
                self.namespace, self.name, "; ".join(self.done) or "nothing done", len(failures),
                "; ".join(failures[:3])))


def _pod_change_matters(pod, previous):
    """Whether a pod change can change what the controller does or reports: its
    existence, labels, owners, readiness or whether it finished. Bindings and other
    status details (PodScheduled, IPs) do not, and with thousands of pods being
    bound they would otherwise cost a pass each."""
    if pod is None or previous is None:
        return True
    meta, before = pod["metadata"], previous["metadata"]
    return (meta.get("labels") != before.get("labels")
            or meta.get("ownerReferences") != before.get("ownerReferences")
            or is_terminal(pod) != is_terminal(previous)
            or ready_condition(pod) != ready_condition(previous))


def controllers(store, recorder, settings):
    return [DeploymentController(store, recorder, settings)]
