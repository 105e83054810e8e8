"""Events written inside the scheduler's batched writes, the EventRecorder's way.

EventRecorder.emit writes one event per Raft round trip; a pass binding 500 pods
cannot wait for 500 of those. So the scheduler puts each pod's event op in the
same atomic write as the pod's binding (or condition): the event exists exactly
when the binding does. Names and aggregation are the recorder's own
(`event_name`: same object, reason, message and type -> same event, `count` + 1).
"""
from shepherd_ha.controllers.events import EVENT_NAMESPACE_FOR_CLUSTER_OBJECTS, event_name, involved_reference
from shepherd_ha.store import commands
from shepherd_ha.model.times import now_rfc3339
from shepherd_ha.store.stamping import stamp_new


def event_op(store, recorder, obj, reason, message, type_="Normal", now=None):
    """The create (or count-increment update) op for this event, read against the store now.
    `now`: the event time (default: the recorder's clock)."""
    ref = involved_reference(obj)
    namespace = ref.get("namespace") or EVENT_NAMESPACE_FOR_CLUSTER_OBJECTS
    name = event_name(ref, reason, message, type_)
    if now is None:
        now = recorder.now() if recorder is not None and getattr(recorder, "now", None) else now_rfc3339()
    component = getattr(recorder, "component", None) or "shepherd-scheduler"
    existing = store.get("events", namespace, name)
    if existing is None:
        event = stamp_new({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": ref, "reason": reason, "message": message, "type": type_,
            "count": 1, "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": component}})
        return commands.create("events", event)
    event = dict(existing, count=existing.get("count", 1) + 1, lastTimestamp=now)
    return commands.update("events", namespace, name, event,
                           precondition={"resourceVersion": existing["metadata"]["resourceVersion"]})
