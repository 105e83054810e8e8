"""Deployment controller: rolls a deployment's pod template out through ReplicaSets
(RollingUpdate or Recreate), keeps them as its revision history, reports status.

Ownership, as Kubernetes: a deployment owns one ReplicaSet per distinct template
(`<deployment>-<pod-template-hash>`, controller ownerReference; deployment_history.py),
and each ReplicaSet owns its pods (replica_sets.py keeps their count). This controller
only sets the ReplicaSets' `spec.replicas` (deployment_plan.py): the template's
ReplicaSet grows within maxSurge, older ones shrink within maxUnavailable, judged on
their pods' availability (ready for minReadySeconds). A ReplicaSet of the namespace
without a controller whose labels the deployment selects is adopted first, as
Kubernetes' controller-ref manager does (a deployment deleted with --cascade=orphan
and created again takes its ReplicaSets back instead of doubling their pods).
ControllerRevisions and directly owned pods of older servers are migrated
(deployment_history.migrate) without restarting a pod.

One pass (`reconcile`) reads the deployment, its ReplicaSets and their pods from the
leader's store, records the template's ReplicaSet if it is new (with the revision
annotation, atomically with the deployment's), then submits the scale changes, the
history cleanup and the new status in one `write_many`. The ReplicaSets' and pods'
changes come back and queue the next pass. Time-based work (minReadySeconds, the
progress deadline) re-queues the key when it is due.

The progress deadline is judged on the leader's monotonic clock: the time since
this leader last saw the rollout progress (more pods updated, ready or available,
fewer old ones). A new leader gives a rollout a full deadline again, except one
already marked ProgressDeadlineExceeded, which stays so until it progresses.
"""
import logging
import threading
import time

from shepherd_ha.model.selectors import LabelSelector, SelectorError
from shepherd_ha.store import commands
from shepherd_ha.store.raft_node import Unavailable

from .controller import Controller, Retry, WriteFailed, key_of
from .deployment_history import migrate
from .deployment_pass import DeploymentPass
from .deployment_status import DEADLINE_EXCEEDED, NEW_PODS_AVAILABLE, PAUSED, PODS_UPDATING, find_condition
from .deployment_util import controller_ref, owner_reference, pod_change_matters

log = logging.getLogger("shepherd_ha.controllers")

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


def _selector(deployment):
    """The deployment's selector, or None when it cannot be read (validation keeps that out)."""
    try:
        return LabelSelector.from_spec((deployment.get("spec") or {}).get("selector"))
    except SelectorError:
        return None


class DeploymentController(Controller):
    name = "deployments"
    watches = ("deployments", "replicasets", "pods", "controllerrevisions")
    workers = 4

    def __init__(self, store, events=None, settings=None, wall=time.time, max_pods_per_entry=None):
        super().__init__(store, events)
        if settings is not None:
            self.resync_period = settings.resync_period
            self.batch_periods = {"pods": settings.pod_batch_period}
        self.wall = wall                      # wall clock: readiness times written by agents
        self.max_pods_per_entry = max_pods_per_entry    # None: a whole pass in one write_many
        self._lock = threading.Lock()
        self._trackers = {}                   # key -> _Tracker
        # Namespaces where a ReplicaSet without a controller was seen (its change, or the scan
        # at resync): only their deployments look for one to adopt, so a pass never lists
        # every ReplicaSet of its namespace (the owner index spares that).
        self._orphans_in = set()

    # ---- keys ----

    def keys_for(self, change):
        if change.resource == "deployments":
            return [key_of(change.object or change.previous)]
        if change.resource == "replicasets" and change.object is not None and controller_ref(change.object) is None:
            with self._lock:
                self._orphans_in.add(change.object["metadata"].get("namespace"))
            return self._selecting(change.object)       # an orphan: the deployments that would adopt it
        if change.resource == "pods" and not pod_change_matters(change.object, change.previous):
            return []       # e.g. a binding: nothing this controller counts or reports changed
        keys = []
        for obj in (change.object, change.previous):
            ref = controller_ref(obj) if obj else None
            if ref and ref.get("kind") == "ReplicaSet" and ref.get("name") and change.resource == "pods":
                rs = self.store.get("replicasets", obj["metadata"].get("namespace") or None, ref["name"])
                ref = controller_ref(rs) if rs is not None and rs["metadata"].get("uid") == ref.get("uid") else None
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
            return None
        uid = deployment["metadata"]["uid"]
        adopted = self._adopt_orphans(deployment) if namespace in self._orphans_in else []
        if adopted:
            self.queue.add(key)          # the next pass counts them as its own
            return "deployment %s/%s: adopted replica set(s) %s" % (namespace, name, ", ".join(adopted))
        live = lambda o: not o["metadata"].get("deletionTimestamp")      # noqa: E731
        replica_sets = [r for r in self.owned("replicasets", namespace, uid, "Deployment") if live(r)]
        # Terminating pods (deletionTimestamp: their agent is stopping them) no longer count.
        by_uid = {rs["metadata"]["uid"]: [p for p in self.owned("pods", namespace, rs["metadata"]["uid"], "ReplicaSet")
                                          if live(p)]
                  for rs in replica_sets}
        legacy = [p for p in self.owned("pods", namespace, uid, "Deployment") if live(p)]
        revisions = self.owned("controllerrevisions", namespace, uid, "Deployment")
        if revisions or legacy:
            done = migrate(self, deployment, revisions, legacy, replica_sets)
            self.queue.add(key)          # the next pass starts from the migrated state
            return "deployment %s/%s: migrated: %s" % (namespace, name, done) if done else None
        return DeploymentPass(self, key, deployment, replica_sets, by_uid).run()

    # ---- adoption ----

    def resync(self):
        # Orphans from before this leader (or missed): one scan per resync period.
        found = {rs["metadata"].get("namespace") for rs in self.store.list("replicasets")
                 if controller_ref(rs) is None and not rs["metadata"].get("deletionTimestamp")}
        with self._lock:
            self._orphans_in |= found
        super().resync()

    def _adopt_orphans(self, deployment):
        """Take the namespace's ReplicaSets that have no controller and carry labels the
        deployment's selector matches (not while either is being deleted), each in a write
        of its own: one the store refuses is reported and skipped, never blocking the
        rollout. Returns the names adopted."""
        selector = _selector(deployment)
        if selector is None or selector.empty:
            return []
        namespace = deployment["metadata"].get("namespace")
        uncontrolled = [rs for rs in self.store.list("replicasets", namespace)
                        if controller_ref(rs) is None and not rs["metadata"].get("deletionTimestamp")]
        if not uncontrolled:
            with self._lock:
                self._orphans_in.discard(namespace)
            return []
        ref = owner_reference(dict(deployment, kind="Deployment"))
        adopted = []
        for rs in uncontrolled:
            meta = rs["metadata"]
            if not selector.matches(meta.get("labels")):
                continue
            refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, dict)] + [ref]
            try:
                self.write([commands.update("replicasets", meta.get("namespace"), meta["name"],
                                            dict(rs, metadata=dict(meta, ownerReferences=refs)),
                                            precondition={"resourceVersion": meta["resourceVersion"]})])
            except WriteFailed as exc:
                self.object_failed("adopt", "replicasets", rs, exc)
                continue
            adopted.append(meta["name"])
        return adopted

    def _selecting(self, rs):
        """Keys of the deployments of `rs`'s namespace whose selector matches its labels."""
        namespace = rs["metadata"].get("namespace")
        keys = []
        for d in self.store.list("deployments", namespace):
            selector = _selector(d)
            if selector is not None and not selector.empty and selector.matches(rs["metadata"].get("labels")):
                keys.append(key_of(d))
        return keys

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
        """Re-queue `key` in `delay` seconds, unless an earlier re-queue is pending: the
        queue keeps the earliest, and that pass schedules the next. (A record of our own
        here could believe in a wake the queue dropped for an earlier backoff retry, and
        lose it: a progress deadline then waited for the next resync.)"""
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


def controllers(store, recorder, settings):
    return [DeploymentController(store, recorder, settings)]
