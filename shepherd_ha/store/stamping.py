"""What the caller computes before submitting a create: the FSM may not (no clock,
no randomness inside it). Used by the API and by controllers alike."""
import datetime
import uuid

SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp")


def now_rfc3339(offset_seconds=0):
    """Now (plus `offset_seconds`, negative for the past) in RFC 3339, to the second."""
    now = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset_seconds)
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def stamp_new(obj):
    """A copy of `obj` with server-owned metadata cleared and uid/creationTimestamp set."""
    obj = dict(obj)
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_FIELDS}
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now_rfc3339()
    obj["metadata"] = meta
    return obj
