"""What the caller computes before submitting a create: the FSM may not (no clock,
no randomness inside it). Used by the API and by controllers alike."""
import uuid

from shepherd_ha.model.times import now_rfc3339

SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
                 "deletionGracePeriodSeconds")


def stamp_new(obj):
    """A copy of `obj` with server-owned metadata cleared and uid/creationTimestamp set."""
    obj = dict(obj)
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_FIELDS}
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now_rfc3339()
    obj["metadata"] = meta
    return obj
