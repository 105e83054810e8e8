"""How one pass of the deployment controller scales its ReplicaSets, decided on plain
numbers (Kubernetes' rolling update, recreate and paused scaling).

Each ReplicaSet is a `Scale`: its `replicas` (spec, what it is asked for) and how many
of its pods are `available`. The plans return target replica counts; the ReplicaSet
controller creates and deletes the pods (unscheduled, then not ready, then newest go first).
"""


class Scale:
    """One ReplicaSet's numbers in a pass; `rs` is the object (None in pure tests)."""
    __slots__ = ("rs", "replicas", "pods", "available", "revision")

    def __init__(self, replicas, pods=0, available=0, revision=0, rs=None):
        self.rs, self.replicas, self.pods, self.available, self.revision = rs, replicas, pods, available, revision

    def __repr__(self):
        return "Scale(replicas=%d, pods=%d, available=%d, revision=%d)" % (
            self.replicas, self.pods, self.available, self.revision)


def plan_rolling(new, olds, replicas, surge, unavailable):
    """RollingUpdate: (new replicas, [old replicas]) with `olds` oldest revision first.

    - the new ReplicaSet grows while all ReplicaSets together ask for at most
      replicas + surge pods; beyond `replicas` (a scale-down) it shrinks at once;
    - old ReplicaSets shrink by their unavailable pods first (removing them costs no
      availability), then by available ones only while more than replicas - unavailable
      pods stay available, counting the new ReplicaSet's unavailable pods as missing."""
    total = new.replicas + sum(o.replicas for o in olds)
    if new.replicas >= replicas:
        target = replicas
    else:
        target = new.replicas + max(0, min(replicas + surge - total, replicas - new.replicas))
    old = [o.replicas for o in olds]
    if not any(old):
        return target, old
    min_available = replicas - unavailable
    new_unavailable = max(0, target - new.available)
    max_scaled_down = target + sum(old) - min_available - new_unavailable
    if max_scaled_down <= 0:
        return target, old
    for i, o in enumerate(olds):
        cut = min(max(0, old[i] - o.available), max_scaled_down)
        old[i] -= cut
        max_scaled_down -= cut
    scale_down = new.available + sum(min(o.available, old[i]) for i, o in enumerate(olds)) - min_available
    for i in range(len(olds)):
        if scale_down <= 0:
            break
        cut = min(old[i], scale_down)
        old[i] -= cut
        scale_down -= cut
    return target, old


def plan_recreate(new, olds, replicas):
    """Recreate: every old ReplicaSet goes to 0 first; the new one grows only once no old pod is left."""
    old = [0 for _ in olds]
    if any(o.pods or o.replicas for o in olds):
        return min(new.replicas, replicas), old
    return replicas, old


def plan_scale(current, others, replicas):
    """A paused deployment only scales: the current revision's ReplicaSet takes what is
    missing (none: nothing is created); a scale-down shrinks older revisions first."""
    others_total = sum(o.replicas for o in others)
    total = others_total + (current.replicas if current is not None else 0)
    old = [o.replicas for o in others]
    if total < replicas:
        return (current.replicas + replicas - total) if current is not None else None, old
    excess = total - replicas
    for i in range(len(others)):
        cut = min(old[i], excess)
        old[i] -= cut
        excess -= cut
    if current is None:
        return None, old
    return current.replicas - min(current.replicas, excess), old
