"""What one pass of the deployment controller does to its pods, decided on plain
lists: how many pods of the target template to create and which pods to delete.

`available(pod)` says whether a pod counts as available; `revision_of(pod)` orders
old pods (older revisions go first).
"""
from .deployment_util import deletion_order


def _without(pods, gone):
    ids = {id(p) for p in gone}
    return [p for p in pods if id(p) not in ids]


def plan_rolling(new, old, replicas, surge, unavailable, available, revision_of=None):
    """RollingUpdate, as Kubernetes does it with one ReplicaSet per template:

    - never more than replicas + surge pods in all (creations are bounded by it);
    - never fewer than replicas - unavailable available pods because of a deletion
      (old available pods are deleted only while more than that are available);
    - new pods beyond `replicas` (the deployment was scaled down) go at once.

    Returns (number of new pods to create, [pods to delete])."""
    delete = []
    new = list(new)
    if len(new) > replicas:
        excess = deletion_order(new)[:len(new) - replicas]
        delete += excess
        new = _without(new, excess)
    total = len(new) + len(old)
    create = 0
    if len(new) < replicas:
        create = max(0, min(replicas + surge - total, replicas - len(new)))
    if not old:
        return create, delete
    min_available = replicas - unavailable
    available_new = sum(1 for p in new if available(p))
    available_old = sum(1 for p in old if available(p))
    new_count = len(new) + create
    new_unavailable = new_count - available_new
    max_scaled_down = new_count + len(old) - min_available - new_unavailable
    if max_scaled_down <= 0:
        return create, delete
    # Old pods that are not available cost nothing to remove...
    unhealthy = deletion_order([p for p in old if not available(p)], revision_of)[:max_scaled_down]
    delete += unhealthy
    remaining_old = _without(old, unhealthy)
    # ...available ones only while enough others are available.
    scale_down = available_new + available_old - min_available
    if scale_down > 0:
        delete += deletion_order(remaining_old, revision_of)[:scale_down]
    return create, delete


def plan_recreate(new, old, replicas):
    """Recreate: every old pod goes first; new pods only once none is left."""
    if old:
        return 0, list(old)
    if len(new) < replicas:
        return replicas - len(new), []
    return 0, deletion_order(new)[:len(new) - replicas]


def plan_scale(pods, replicas, can_create, revision_of=None):
    """A paused deployment only scales: no template changes roll while paused."""
    if len(pods) < replicas:
        return (replicas - len(pods) if can_create else 0), []
    return 0, deletion_order(pods, revision_of)[:len(pods) - replicas]
