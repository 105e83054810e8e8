"""One reconcile of one deployment (deployments.py): record the template's
ReplicaSet, scale the ReplicaSets, prune history, write the status."""
from shepherd_ha.store import commands
from shepherd_ha.store.deletion import delete_object_op

from .controller import Retry, WriteFailed
from .deployment_history import has_template, history_to_delete, new_replica_set, revision_of, with_revision
from .deployment_plan import Scale, plan_recreate, plan_rolling, plan_scale
from .deployment_status import DEADLINE_EXCEEDED, NEW_PODS_AVAILABLE, deployment_status, find_condition
from .deployment_util import (CHANGE_CAUSE_ANNOTATION, REVISION_ANNOTATION, availability, is_terminal,
                              plural, rolling_bounds, strategy_type, template_hash)


class DeploymentPass:
    def __init__(self, ctl, key, deployment, replica_sets, pods_by_uid):
        self.ctl = ctl
        self.key = key
        self.d = deployment
        self.replica_sets = list(replica_sets)
        self.pods_by_uid = pods_by_uid      # ReplicaSet uid -> its pods (not terminating)
        self.meta = deployment["metadata"]
        self.spec = deployment.get("spec") or {}
        self.name = self.meta["name"]
        self.namespace = self.meta.get("namespace") or "default"
        self.replicas = self.spec.get("replicas", 1)
        self.paused = bool(self.spec.get("paused"))
        self.min_ready = self.spec.get("minReadySeconds") or 0
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

    def _write(self, ops):
        try:
            return self.ctl.write(ops)
        except WriteFailed as exc:
            if "Conflict" in str(exc) or "NotFound" in str(exc) or "AlreadyExists" in str(exc):
                raise Retry("deployment %s/%s changed while reconciling: %s" % (self.namespace, self.name, exc),
                            delay=0)
            raise

    def _pods(self, rs):
        return [p for p in self.pods_by_uid.get(rs["metadata"]["uid"], []) if not is_terminal(p)]

    def _scale(self, rs):
        pods = self._pods(rs)
        return Scale((rs.get("spec") or {}).get("replicas") or 0, len(pods), sum(1 for p in pods if self.available(p)),
                     revision_of(rs), rs)

    # ---- the pass ----

    def run(self):
        spec_hash = template_hash(self.spec.get("template") or {})
        if self.paused:
            target = self._current_replica_set()
        else:
            target = self._sync_revision(spec_hash)
        scales = sorted((self._scale(rs) for rs in self.replica_sets), key=lambda s: s.revision)
        current = next((s for s in scales if target is not None and s.rs is target), None)
        olds = [s for s in scales if s is not current]
        wanted_new, wanted_old = self._plan(current, olds)
        writes, changes = [], []
        for scale, wanted in [(current, wanted_new)] + list(zip(olds, wanted_old)):
            if scale is None or wanted is None:
                continue
            op = self._scale_op(scale.rs, wanted)
            if op is not None:
                writes.append([op])
                changes.append((scale, wanted))
        after_old = [Scale(w, s.pods, s.available, s.revision, s.rs) for s, w in zip(olds, wanted_old)]
        pruned = history_to_delete(self.spec, after_old)
        writes += [[delete_object_op("replicasets", s.rs)] for s in pruned]
        pods = [p for rs in self.replica_sets for p in self._pods(rs)]
        template = self.spec.get("template") or {}
        updated = [p for rs in self.replica_sets if has_template(rs, template, spec_hash) for p in self._pods(rs)]
        status, outcome = deployment_status(self, pods, updated)
        status_changed = status != (self.d.get("status") or None)
        if status_changed:
            writes.append([commands.update("deployments", self.namespace, self.name, dict(self.d, status=status),
                                           precondition={"uid": self.meta["uid"]}, subresource="status")])
        results = self.ctl.write_batch(writes) if writes else []
        self._report(results, changes, pruned, status_changed)
        self._after_status(status, outcome)
        return ("deployment %s/%s: %s" % (self.namespace, self.name, "; ".join(self.done))) if self.done else None

    def _plan(self, current, olds):
        """(replicas for the target ReplicaSet or None, [replicas of the others])."""
        if self.paused:
            return plan_scale(current, olds, self.replicas)
        if strategy_type(self.spec) == "Recreate":
            return plan_recreate(current, olds, self.replicas)
        surge, unavailable = rolling_bounds(self.spec, self.replicas)
        return plan_rolling(current, olds, self.replicas, surge, unavailable)

    def _scale_op(self, rs, replicas):
        spec = rs.get("spec") or {}
        if spec.get("replicas") == replicas and (spec.get("minReadySeconds") or 0) == self.min_ready:
            return None
        meta = rs["metadata"]
        return commands.update("replicasets", self.namespace, meta["name"],
                               dict(rs, spec=dict(spec, replicas=replicas, minReadySeconds=self.min_ready)),
                               precondition={"resourceVersion": meta["resourceVersion"]})

    # ---- revisions ----

    def _current_replica_set(self):
        """The ReplicaSet a paused deployment keeps scaling: its revision's, else the
        newest; None when it has none yet (it then creates nothing)."""
        number = str((self.meta.get("annotations") or {}).get(REVISION_ANNOTATION, ""))
        chosen = None
        for rs in self.replica_sets:
            if str(revision_of(rs)) == number:
                return rs
            if chosen is None or revision_of(rs) > revision_of(chosen):
                chosen = rs
        return chosen

    def _sync_revision(self, spec_hash):
        """The template's ReplicaSet (created at 0 replicas when new) with the highest
        revision (a template come back takes max + 1), the change cause, and the
        deployment's revision annotation, written atomically."""
        template = self.spec.get("template") or {}
        same = [rs for rs in self.replica_sets if has_template(rs, template, spec_hash)]
        current = max(same, key=revision_of) if same else None
        highest_other = max([revision_of(rs) for rs in self.replica_sets if rs not in same] or [0])
        annotations = self.meta.get("annotations") or {}
        cause = annotations.get(CHANGE_CAUSE_ANNOTATION)
        ops = []
        if current is None:
            number = highest_other + 1
            rs = new_replica_set(self.ctl.store, self.d, spec_hash, self.spec.get("template"), number, 0, cause)
            ops.append(commands.create("replicasets", rs))
        else:
            number = revision_of(current)
            if number <= highest_other:
                self.done.append("template of revision %d is back as revision %d" % (number, highest_other + 1))
                number = highest_other + 1
            changed = with_revision(current, number, cause)
            if changed is not None:
                ops.append(commands.update("replicasets", self.namespace, current["metadata"]["name"], changed,
                                           precondition={"resourceVersion": current["metadata"]["resourceVersion"]}))
        if str(annotations.get(REVISION_ANNOTATION)) != str(number):
            meta = dict(self.meta, annotations=dict(annotations, **{REVISION_ANNOTATION: str(number)}))
            ops.append(commands.update("deployments", self.namespace, self.name, dict(self.d, metadata=meta),
                                       precondition={"resourceVersion": self.meta["resourceVersion"]}))
        if not ops:
            return current
        result = self._write(ops)
        target = current
        for op_result in result["results"]:
            obj = op_result["object"]
            if op_result["resource"] == "deployments":
                self.d, self.meta = obj, obj["metadata"]
            else:
                if current is None:     # said once the write took (a conflict creates nothing)
                    self.done.append("created replica set %s (revision %d)" % (obj["metadata"]["name"], number))
                    self.ctl.emit(self.d, "ScalingReplicaSet", "Created new replica set %s" % obj["metadata"]["name"])
                self.replica_sets = [r for r in self.replica_sets if r["metadata"]["uid"] != obj["metadata"]["uid"]]
                self.replica_sets.append(obj)
                target = obj
        return target

    # ---- what happened ----

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

    def _report(self, results, changes, pruned, status_changed):
        results = iter(results)
        failures = []
        for scale, wanted in changes:
            result = next(results)
            name = scale.rs["metadata"]["name"]
            if not result.get("ok"):
                failures.append("%s: %s" % (name, result.get("message")))
            elif wanted != scale.replicas:
                verb = "up" if wanted > scale.replicas else "down"
                self.ctl.emit(self.d, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d"
                              % (verb, name, scale.replicas, wanted))
                self.done.append("scaled %s replica set %s from %d to %d" % (verb, name, scale.replicas, wanted))
        gone = []
        for scale in pruned:
            result = next(results)
            if result.get("ok") or result.get("reason") == "NotFound":
                gone.append(scale)
            else:
                failures.append("%s: %s" % (scale.rs["metadata"]["name"], result.get("message")))
        if gone:
            self.done.append("removed %s from history" % ", ".join("revision %d" % s.revision for s in gone))
        if status_changed:
            status_result = next(results)
            if not status_result.get("ok") and status_result.get("reason") != "NotFound":
                failures.append("status: %s" % status_result.get("message"))
            elif not failures:
                self.done.append("status updated")
        if failures:
            raise Retry("deployment %s/%s: %s; %d writes failed: %s" % (
                self.namespace, self.name, "; ".join(self.done) or "nothing done", len(failures),
                "; ".join(failures[:3])))
