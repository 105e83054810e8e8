"""A deployment's status from its pods: counts, the Available and Progressing
conditions, and what the progress tracker decided (deployments.py)."""
from shepherd_ha.model.times import now_rfc3339

from .deployment_util import REVISION_ANNOTATION, is_ready, max_unavailable

# Progressing condition reasons
NEW_PODS_AVAILABLE = "NewPodsAvailable"
PODS_UPDATING = "PodsUpdating"
DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"


def condition(old_conditions, type_, status, reason, message, now):
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


def deployment_status(p, pods, updated):
    """(status, outcome) of pass `p` (deployments._Pass) given its live pods and the
    updated ones (of the template's ReplicaSet)."""
    ready = sum(1 for pod in pods if is_ready(pod))
    waits = []
    available = 0
    for pod in pods:
        ok, left = p.availability(pod)
        available += ok
        if left is not None:
            waits.append(left)
    updated_available = sum(1 for pod in updated if p.available(pod))
    old = len(pods) - len(updated)
    total = len(pods)
    complete = (not p.paused and len(updated) == p.replicas and total == p.replicas and available == p.replicas)
    reason, deadline_left = p.ctl.tracker(p.key, p.d, (len(updated), ready, available, old), complete, p.paused)
    now = now_rfc3339()
    old_conditions = [c for c in (p.d.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
    minimum = p.replicas - max_unavailable(p.spec, p.replicas)
    if available >= minimum:
        available_cond = condition(old_conditions, "Available", "True", "MinimumReplicasAvailable",
                                   "Deployment has minimum availability.", now)
    else:
        available_cond = condition(old_conditions, "Available", "False", "MinimumReplicasUnavailable",
                                   "Deployment does not have minimum availability (%d of %d required "
                                   "pods available)." % (available, minimum), now)
    revision = (p.meta.get("annotations") or {}).get(REVISION_ANNOTATION, "?")
    progress = "revision %s has %d of %d pods updated, %d available" % (
        revision, len(updated), p.replicas, updated_available)
    if old:
        progress += ", %d old pods left" % old
    if reason == PAUSED:
        progressing = condition(old_conditions, "Progressing", "Unknown", PAUSED, "Deployment is paused.", now)
    elif reason == NEW_PODS_AVAILABLE:
        # kubectl rollout status waits for this reason ("NewReplicaSetAvailable" upstream is
        # not required: it reads the counts and the ProgressDeadlineExceeded reason only).
        progressing = condition(old_conditions, "Progressing", "True", NEW_PODS_AVAILABLE,
                                'Deployment "%s" has successfully progressed: revision %s is available.'
                                % (p.name, revision), now)
    elif reason == DEADLINE_EXCEEDED:
        progressing = condition(old_conditions, "Progressing", "False", DEADLINE_EXCEEDED,
                                'Deployment "%s" has timed out progressing: %s.' % (p.name, progress), now)
    else:
        progressing = condition(old_conditions, "Progressing", "True", PODS_UPDATING,
                                'Deployment "%s" is progressing: %s.' % (p.name, progress), now)
    status = {"observedGeneration": p.meta.get("generation", 1), "replicas": total,
              "updatedReplicas": len(updated), "readyReplicas": ready, "availableReplicas": available,
              "unavailableReplicas": max(0, total - available),
              "conditions": [available_cond, progressing]}
    outcome = {"waits": waits, "deadline_left": deadline_left, "reason": reason, "available": available}
    return status, outcome
